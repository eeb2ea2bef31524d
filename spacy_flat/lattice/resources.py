"""The data a FLAT model reads besides its weights: the lexicon and the character rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Union

from ..errors import PipelineFileError
from .char_vocab import CharVocab
from .lexicon import Lexicon

# The parts saved beside the model, by the names of their entries (`NAME` in
# bytes, `NAME.msgpack` on disk).
PARTS = ("lexicon", "char_vocab", "bigrams")
# Parts a component may lack: a pipeline without a bigram table saves none.
OPTIONAL_PARTS = ("bigrams",)
Part = Union[Lexicon, CharVocab]


@dataclass
class FlatResources:
    """The lexicon and character vocabulary of one `flat_ner` component.

    The component owns and saves them; its model's featurizer reads the same
    object, and the model's data-dependent shapes are derived from it.
    """

    lexicon: Lexicon
    char_vocab: CharVocab
    # Pretrained bigram vectors, two-character entries of a Lexicon (never matched as words).
    bigrams: Optional[Lexicon] = None

    @property
    def n_chars(self) -> int:
        """RETURNS (int): Rows of the character-embedding table."""
        return len(self.char_vocab)

    @property
    def vector_width(self) -> int:
        """RETURNS (int): Width of the lexicon's word vectors; 0 for none."""
        return self.lexicon.vector_width

    def part_writers(self) -> Dict[str, Callable[[], bytes]]:
        """RETURNS (Dict[str, Callable[[], bytes]]): Each part's serializer, by name."""
        writers = {"lexicon": self.lexicon.to_bytes, "char_vocab": self.char_vocab.to_bytes}
        if self.bigrams is not None:
            writers["bigrams"] = self.bigrams.to_bytes
        return writers

    @staticmethod
    def read_part(name: str, data: bytes, source: str = "<bytes>") -> Part:
        """RETURNS (Part): The part `name` read from `data`; errors name `source`."""
        if name in ("lexicon", "bigrams"):
            return Lexicon.from_bytes(data, source=source)
        return CharVocab.from_bytes(data, source=source)

    @classmethod
    def from_parts(cls, parts: Dict[str, Part], current: Optional[FlatResources], owner: str) -> FlatResources:
        """Resources from loaded parts, keeping `current`'s for parts not loaded
        (excluded from deserialization)."""
        lexicon = parts.get("lexicon", current.lexicon if current else None)
        char_vocab = parts.get("char_vocab", current.char_vocab if current else None)
        bigrams = parts.get("bigrams", current.bigrams if current else None)
        if not isinstance(lexicon, Lexicon) or not isinstance(char_vocab, CharVocab):
            raise PipelineFileError(f"The saved '{owner}' component has no lexicon or character vocabulary")
        return cls(lexicon, char_vocab, bigrams if isinstance(bigrams, Lexicon) else None)
