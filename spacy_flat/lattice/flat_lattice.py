"""The flat lattice of a text: its characters plus every lexicon word in it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy

from .lexicon import Lexicon


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
    n = len(text)
    # max_words = 0 (TENER): no lattice words, and no matching to find them.
    matches = lexicon.matches(text) if max_words != 0 else []
    if 0 <= max_words < len(matches):
        # Long words are rare and cover few useful entities, so drop them first.
        matches = sorted(matches, key=lambda m: (m[1] - m[0], m[0]))[:max_words]
        matches.sort()
    if matches:
        found = numpy.asarray(matches, dtype="int64")
        word_heads, word_tails, rows = found[:, 0], found[:, 1], found[:, 2]
    else:
        word_heads = word_tails = rows = numpy.zeros((0,), dtype="int64")
    chars = numpy.arange(n, dtype="int64")
    return Lattice(
        n_chars=n,
        word_rows=rows,
        heads=numpy.concatenate([chars, word_heads]),
        tails=numpy.concatenate([chars, word_tails]),
    )
