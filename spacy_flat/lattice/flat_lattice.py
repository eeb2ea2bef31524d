"""The flat lattice of a text: its characters plus every lexicon word in it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy

from .lexicon import Lexicon

# No words: heads, tails and rows.
NO_MATCHES = (numpy.zeros(0, dtype="int64"),) * 3


@dataclass(frozen=True)
class Lattice:
    """Characters and matched words of one text, as flat spans.

    Token i < n_chars is character i (head = tail = i); token n_chars + k is the
    k-th matched word, from character `heads[n_chars + k]` to `tails[n_chars + k]`
    inclusive.
    """

    n_chars: int
    word_rows: numpy.ndarray  # (n_words,) int64 rows in the lexicon
    heads: numpy.ndarray  # (n_chars + n_words,) int64
    tails: numpy.ndarray  # (n_chars + n_words,) int64

    @property
    def n_words(self) -> int:
        return int(self.word_rows.shape[0])

    def __len__(self) -> int:
        return self.n_chars + self.n_words


def build_lattice(text: str, lexicon: Lexicon, *, max_words: int = -1) -> Lattice:
    """Match `text` against `lexicon`.

    text (str): The text; one token per Unicode code point.
    lexicon (Lexicon): The words to match.
    max_words (int): Keep at most this many words (shortest-first is not
        meaningful for NER, so the longest matches are dropped first);
        -1 keeps all.
    RETURNS (Lattice): The lattice.
    """
    word_heads, word_tails, rows = lattice_words(text, lexicon, max_words)
    chars = numpy.arange(len(text), dtype="int64")
    return Lattice(
        n_chars=len(text),
        word_rows=rows,
        heads=numpy.concatenate([chars, word_heads]),
        tails=numpy.concatenate([chars, word_tails]),
    )


def lattice_words(text: str, lexicon: Lexicon, max_words: int = -1) -> Tuple[numpy.ndarray, ...]:
    """RETURNS (Tuple[numpy.ndarray, ...]): The heads, tails and lexicon rows of
    the words of `text`'s lattice (`build_lattice`), sorted by head, then tail."""
    # max_words = 0 (TENER): no lattice words, and no matching to find them.
    if max_words == 0 or not len(lexicon) or len(text) < 2:
        return NO_MATCHES
    heads, tails, rows = lexicon.matcher.find_arrays(text)
    if 0 <= max_words < len(rows):
        # Long words are rare and cover few useful entities, so drop them first.
        kept = numpy.lexsort((heads, tails - heads))[:max_words]
        kept = kept[numpy.lexsort((tails[kept], heads[kept]))]
        heads, tails, rows = heads[kept], tails[kept], rows[kept]
    return heads, tails, rows


def batch_words(texts: Sequence[str], lexicon: Lexicon, max_words: int = -1) -> Tuple[numpy.ndarray, ...]:
    """The lattice words of every text, concatenated: heads, tails, rows, and
    each text's number of words. Without a cap, the batch is matched in one pass."""
    if max_words < 0 and len(lexicon) and texts:
        return lexicon.matcher.find_batch(texts)
    found = [lattice_words(text, lexicon, max_words) for text in texts]
    counts = numpy.asarray([len(rows) for _, _, rows in found], dtype="int64")
    if not found:
        return (*NO_MATCHES, counts)
    heads, tails, rows = (numpy.concatenate(part) for part in zip(*found))
    return heads, tails, rows, counts
