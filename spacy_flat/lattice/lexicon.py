"""The lexicon: the words a lattice is matched against, with optional vectors
and optional types (gazetteers)."""

from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy
import srsly

from ..errors import LexiconError
from .matching import WordMatcher
from .vectors import unit_rows

# Types are bits of one int64 per word, so a word may have several.
MAX_TYPES = 63


class Lexicon:
    """Words of two or more characters, optionally with one vector each and any
    number of types (`place`, `person`, a user's `brand`: the lists a word came from).

    Matching uses an Aho-Corasick automaton (`WordMatcher`), which finds every
    occurrence of every word, overlapping and of all lengths, in one pass over
    the text. The automaton is rebuilt lazily after `add`, so new words take
    effect on the next call.
    """

    def __init__(
        self,
        words: Iterable[str] = (),
        vectors: Optional[numpy.ndarray] = None,
        *,
        vector_width: Optional[int] = None,
        normalize: bool = False,
    ) -> None:
        """Create a lexicon.

        words (Iterable[str]): The words. Single characters and duplicates are skipped.
        vectors (Optional[numpy.ndarray]): One row per word in `words`, or None.
        vector_width (Optional[int]): Width of the vectors when `vectors` is None
            but vectors will be added later; 0 or None for a lexicon without vectors.
        normalize (bool): Scale every vector to unit length, also those added
            later, so words added after training match what the model saw.
        """
        self.normalize = normalize
        self._index: Dict[str, int] = {}
        self._words: List[str] = []
        word_list = list(words)
        if vectors is not None:
            if vectors.ndim != 2 or vectors.shape[0] != len(word_list):
                raise LexiconError(f"Expected {len(word_list)} vectors, got an array of shape {vectors.shape}")
            vector_width = int(vectors.shape[1])
        self.vector_width = int(vector_width or 0)
        rows: List[int] = []
        for i, word in enumerate(word_list):
            if len(word) >= 2 and word not in self._index:
                self._index[word] = len(self._words)
                self._words.append(word)
                rows.append(i)
        self._vectors = numpy.zeros((len(self._words), self.vector_width), dtype="float32")
        if vectors is not None and rows:
            kept = vectors[numpy.asarray(rows)]
            self._vectors[:] = unit_rows(kept) if normalize else kept
        self._has_vector = numpy.full(len(self._words), vectors is not None, dtype=bool)
        # Type names in the order they were first given (a type's bit is its index).
        self.types: List[str] = []
        self._type_bits = numpy.zeros(len(self._words), dtype="int64")
        # Word frequencies z(w) and their floor b (DC-SAN's set weights); None until counted.
        self._counts: Optional[numpy.ndarray] = None
        self.count_floor = 1.0
        self._matcher: Optional[WordMatcher] = None

    def __len__(self) -> int:
        return len(self._words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._words)

    @property
    def words(self) -> List[str]:
        """RETURNS (List[str]): The words, in row order."""
        return self._words

    @property
    def vectors(self) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): One row per word; zeros for words without a vector."""
        return self._vectors

    @property
    def type_bits(self) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): (n_words,) int64; bit k set when the word has `types[k]`."""
        return self._type_bits

    @property
    def counts(self) -> Optional[numpy.ndarray]:
        """RETURNS (Optional[numpy.ndarray]): (n_words,) float32 frequencies, or None if never counted."""
        return self._counts

    def set_counts(self, counts: numpy.ndarray, floor: float) -> None:
        """Set every word's frequency z(w) and the floor b added to each (`word_counts.py`).

        counts (numpy.ndarray): (n_words,) frequencies in row order.
        floor (float): b, added to every frequency when words are weighted.
        """
        if counts.shape != (len(self._words),):
            raise LexiconError(f"Expected {len(self._words)} counts, got an array of shape {counts.shape}")
        self._counts = counts.astype("float32")
        self.count_floor = float(floor)

    def types_of(self, word: str) -> List[str]:
        """RETURNS (List[str]): The types of `word`; empty if it has none or is absent."""
        row = self._index.get(word)
        bits = 0 if row is None else int(self._type_bits[row])
        return [name for k, name in enumerate(self.types) if bits >> k & 1]

    def index(self, word: str) -> int:
        """RETURNS (int): The row of `word`. Raises KeyError if it is absent."""
        return self._index[word]

    def rows_of(self, items: Sequence[str]) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): The row of each item, -1 where it is absent."""
        index = self._index
        return numpy.fromiter((index.get(item, -1) for item in items), dtype="int64", count=len(items))

    def add(self, word: str, vector: Optional[numpy.ndarray] = None, types: Sequence[str] = ()) -> int:
        """Add a word, or set the vector of a word already present and add to its types.

        word (str): The word, two or more characters.
        vector (Optional[numpy.ndarray]): Its vector, of width `vector_width`.
        types (Sequence[str]): Types to give it (kept with those it has). A model
            has learned embeddings for the types its training lexicon had; a new
            type is stored but has none until the model is trained with it.
        RETURNS (int): The word's row.
        """
        if not isinstance(word, str) or len(word) < 2:
            raise LexiconError(f"Lexicon words have two or more characters, got {word!r}")
        if vector is not None:
            vector = numpy.asarray(vector, dtype="float32").reshape(-1)
            if vector.shape[0] != self.vector_width:
                raise LexiconError(
                    f"Vector for {word!r} has width {vector.shape[0]}, "
                    f"the lexicon's vectors have width {self.vector_width}"
                )
            if self.normalize:
                vector = unit_rows(vector[None])[0]
        row = self._index.get(word)
        if row is None:
            row = len(self._words)
            self._index[word] = row
            self._words.append(word)
            self._vectors = numpy.vstack([self._vectors, numpy.zeros((1, self.vector_width), dtype="float32")])
            self._has_vector = numpy.append(self._has_vector, False)
            self._type_bits = numpy.append(self._type_bits, 0)
            self._grow_counts(1)
            self._matcher = None
        if vector is not None:
            self._vectors[row] = vector
            self._has_vector[row] = True
        if types:
            self._type_bits[row] |= self._bits(types)
        return row

    def extend(self, words: Iterable[str], types: Sequence[str] = ()) -> int:
        """Add words without vectors; words already present keep theirs. Every
        word given (new or not) gets `types`.

        Growing the arrays once rather than word by word (as `add` does) keeps
        joining a 300k-word list linear.

        words (Iterable[str]): The words. Single characters and duplicates are skipped.
        types (Sequence[str]): Types to give each word, e.g. ("place",) for a gazetteer.
        RETURNS (int): How many words were new.
        """
        bits = self._bits(types) if types else 0
        before = len(self._words)
        rows: List[int] = []
        for word in words:
            if len(word) < 2:
                continue
            row = self._index.get(word)
            if row is None:
                row = self._index[word] = len(self._words)
                self._words.append(word)
            rows.append(row)
        added = len(self._words) - before
        if added:
            self._vectors = numpy.vstack([self._vectors, numpy.zeros((added, self.vector_width), dtype="float32")])
            self._has_vector = numpy.append(self._has_vector, numpy.zeros(added, dtype=bool))
            self._type_bits = numpy.append(self._type_bits, numpy.zeros(added, dtype="int64"))
            self._grow_counts(added)
            self._matcher = None
        if bits and rows:
            self._type_bits[numpy.asarray(rows)] |= bits
        return added

    def _grow_counts(self, added: int) -> None:
        # A word added after counting was not seen in the counted text: z(w) = 0.
        if self._counts is not None:
            self._counts = numpy.append(self._counts, numpy.zeros(added, dtype="float32"))

    def _bits(self, types: Sequence[str]) -> int:
        bits = 0
        for name in types:
            if not isinstance(name, str) or not name:
                raise LexiconError(f"A word type is a non-empty string, got {name!r}")
            if name not in self.types:
                if len(self.types) == MAX_TYPES:
                    raise LexiconError(f"A lexicon holds at most {MAX_TYPES} word types; {name!r} is one too many")
                self.types.append(name)
            bits |= 1 << self.types.index(name)
        return bits

    def has_vector(self, word: str) -> bool:
        """RETURNS (bool): Whether `word` is present and has a vector."""
        row = self._index.get(word)
        return row is not None and bool(self._has_vector[row])

    def matches(self, text: str) -> List[Tuple[int, int, int]]:
        """Find every occurrence of every word in `text`.

        text (str): The text.
        RETURNS (List[Tuple[int, int, int]]): (head, tail, row) per occurrence, head and
            tail the positions of its first and last character, sorted by head, then tail.
        """
        if not self._words or len(text) < 2:
            return []
        return self.matcher.find(text)

    @property
    def matcher(self) -> WordMatcher:
        """RETURNS (WordMatcher): The automaton over the words, rebuilt after words are added."""
        if self._matcher is None:
            self._matcher = WordMatcher(self._words)
        return self._matcher

    def to_bytes(self) -> bytes:
        """Serialize as msgpack: the word list, the vectors as raw float32 and a
        has-vector mask. Plain data only, so loading never unpickles code.

        RETURNS (bytes): The serialized lexicon.
        """
        return srsly.msgpack_dumps(
            {
                "words": self._words,
                "vector_width": self.vector_width,
                "vectors": self._vectors.astype("<f4").tobytes(),
                "has_vector": numpy.packbits(self._has_vector).tobytes(),
                "normalize": self.normalize,
                "types": self.types,
                "type_bits": self._type_bits.astype("<i8").tobytes(),
                "counts": None if self._counts is None else self._counts.astype("<f4").tobytes(),
                "count_floor": self.count_floor,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>") -> Lexicon:
        """Load a lexicon written by `to_bytes`.

        data (bytes): The serialized lexicon.
        source (str): Where the bytes came from, for error messages.
        RETURNS (Lexicon): The lexicon.
        """
        try:
            msg = srsly.msgpack_loads(data)
            words = list(msg["words"])
            width = int(msg["vector_width"])
            vectors = numpy.frombuffer(msg["vectors"], dtype="<f4").reshape(len(words), width)
            has_vector = numpy.unpackbits(numpy.frombuffer(msg["has_vector"], dtype="uint8"))
            # Absent in lexicons saved before the option existed.
            normalize = bool(msg.get("normalize", False))
            # Absent in lexicons saved before 0.3.0 (no types).
            types = [str(name) for name in msg.get("types", [])]
            type_bits = numpy.frombuffer(msg.get("type_bits", b""), dtype="<i8")
            if types and type_bits.shape[0] != len(words):
                raise ValueError(f"{type_bits.shape[0]} type rows for {len(words)} words")
            # Absent in lexicons saved before word counts (0.3.0).
            counts = msg.get("counts")
            counts = None if counts is None else numpy.frombuffer(counts, dtype="<f4")
            if counts is not None and counts.shape[0] != len(words):
                raise ValueError(f"{counts.shape[0]} counts for {len(words)} words")
        except Exception as err:  # any decoding failure means a damaged file
            raise LexiconError(f"Damaged lexicon in {source}: {err}") from err
        # The stored rows are already scaled; the flag applies to words added later.
        lexicon = cls(words, vectors.astype("float32"))
        lexicon.normalize = normalize
        if len(lexicon) != len(words):
            raise LexiconError(f"Damaged lexicon in {source}: duplicate or short words")
        lexicon._has_vector = has_vector[: len(words)].astype(bool)
        lexicon.types = types
        if types:
            lexicon._type_bits = type_bits.astype("int64")
        if counts is not None:
            lexicon.set_counts(counts, float(msg.get("count_floor", 1.0)))
        return lexicon
