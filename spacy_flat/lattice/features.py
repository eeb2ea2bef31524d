"""From texts to the padded id arrays the encoder reads (plain NumPy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import murmurhash
import numpy

from .char_vocab import CharVocab
from .flat_lattice import Lattice, build_lattice
from .lexicon import Lexicon

# Seeds for the bloom-embedding hashes of words and character bigrams.
HASH_SEEDS = (7, 11)


@dataclass
class FlatBatch:
    """A batch of lattices. Row b holds its characters, then its words, then padding."""

    char_rows: numpy.ndarray  # (N_c,) int64
    word_hashes: numpy.ndarray  # (N_w, 2) int64
    heads: numpy.ndarray  # (B, n) int64
    tails: numpy.ndarray  # (B, n) int64
    char_index: numpy.ndarray  # (N_c,) flat index into B * n
    word_index: numpy.ndarray  # (N_w,)
    token_mask: numpy.ndarray  # (B, n) bool
    char_mask: numpy.ndarray  # (B, n_chars_max) bool
    bigram_hashes: Optional[numpy.ndarray]  # (N_c, 2) int64
    word_vectors: Optional[numpy.ndarray]  # (N_w, vector_width) float32
    # (N_c, width) float32: the pretrained vector of each character's bigram
    # (the bigram table's, else the lexicon's), zeros where there is none.
    bigram_vectors: Optional[numpy.ndarray] = None
    # (N_c,) bool: the bigram table lacks the character's bigram (a learned vector stands in).
    bigram_missing: Optional[numpy.ndarray] = None
    # (N_w,) int64: each word's type bits (Lexicon.type_bits); None when the lexicon has no types.
    word_types: Optional[numpy.ndarray] = None
    # (N_w,) float32: each word's weight z(w) + b in DC-SAN's word sets; None when the lexicon has no counts.
    word_weights: Optional[numpy.ndarray] = None
    # (N_c, width) per-character features from a transformer, set by the
    # transformer architecture; an xp array (NumPy or CuPy).
    char_features: Optional[Any] = None
    # Recompute attention in backward instead of keeping it (set by the group
    # loop when a training batch is encoded in several groups).
    recompute: bool = False

    @property
    def lengths(self) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): Characters per row."""
        return self.char_mask.sum(1)


def hash_rows(items: Sequence[str], n_rows: int) -> numpy.ndarray:
    """RETURNS (numpy.ndarray): (len(items), 2) int64 rows of a bloom embedding."""
    out = numpy.empty((len(items), len(HASH_SEEDS)), dtype="int64")
    for k, seed in enumerate(HASH_SEEDS):
        out[:, k] = [murmurhash.hash(item, seed) for item in items]
    return out % n_rows


def featurize(
    texts: Sequence[str],
    lexicon: Lexicon,
    char_vocab: CharVocab,
    *,
    word_rows: int,
    bigram_rows: int = 0,
    max_words: int = -1,
    bigram_vectors: bool = False,
    bigram_table: Optional[Lexicon] = None,
) -> FlatBatch:
    """Build the lattices of `texts` and their padded id arrays.

    texts (Sequence[str]): Non-empty texts.
    lexicon (Lexicon): Words to match.
    char_vocab (CharVocab): Character rows.
    word_rows (int): Rows of the word hash embedding.
    bigram_rows (int): Rows of the bigram hash embedding; 0 for none.
    max_words (int): Cap on lattice words per text; -1 for none.
    bigram_vectors (bool): Look each character's bigram up in `bigram_table`,
        or without one in the lexicon's vectors (zeros where it has none).
    bigram_table (Optional[Lexicon]): Pretrained bigram vectors (two-character entries).
    RETURNS (FlatBatch): The batch.
    """
    lattices: List[Lattice] = [build_lattice(t, lexicon, max_words=max_words) for t in texts]
    batch = len(texts)
    width = max((len(lat) for lat in lattices), default=1) or 1
    n_chars_max = max((lat.n_chars for lat in lattices), default=1) or 1
    heads = numpy.zeros((batch, width), dtype="int64")
    tails = numpy.zeros((batch, width), dtype="int64")
    token_mask = numpy.zeros((batch, width), dtype=bool)
    char_mask = numpy.zeros((batch, n_chars_max), dtype=bool)
    char_index: List[numpy.ndarray] = []
    word_index: List[numpy.ndarray] = []
    word_rows_in_lexicon: List[numpy.ndarray] = []
    words: List[str] = []
    for b, (text, lat) in enumerate(zip(texts, lattices)):
        size = len(lat)
        heads[b, :size] = lat.heads
        tails[b, :size] = lat.tails
        token_mask[b, :size] = True
        char_mask[b, : lat.n_chars] = True
        char_index.append(b * width + numpy.arange(lat.n_chars))
        word_index.append(b * width + lat.n_chars + numpy.arange(lat.n_words))
        word_rows_in_lexicon.append(lat.word_rows)
        words.extend(text[h : t + 1] for h, t in zip(lat.heads[lat.n_chars :], lat.tails[lat.n_chars :]))
    all_rows = numpy.concatenate(word_rows_in_lexicon) if word_rows_in_lexicon else numpy.zeros(0, "int64")
    char_rows = numpy.concatenate([char_vocab.rows(t) for t in texts]) if texts else numpy.zeros(0, "int64")
    bigrams = gram_vectors = missing = None
    if bigram_rows > 0 or bigram_vectors:
        # The bigram at i is text[i : i + 2]; the last character pairs with an end mark.
        grams = [t[i : i + 2] if i + 1 < len(t) else t[i] + "\x03" for t in texts for i in range(len(t))]
        if bigram_rows > 0:
            bigrams = hash_rows(grams, bigram_rows)
        if bigram_vectors:
            gram_vectors, found = _lexicon_vectors(bigram_table or lexicon, grams)
            missing = ~found if bigram_table is not None else None
    vectors = lexicon.vectors[all_rows] if lexicon.vector_width else None
    return FlatBatch(
        char_rows=char_rows,
        word_hashes=hash_rows(words, word_rows),
        heads=heads,
        tails=tails,
        char_index=_concat(char_index),
        word_index=_concat(word_index),
        token_mask=token_mask,
        char_mask=char_mask,
        bigram_hashes=bigrams,
        word_vectors=vectors,
        bigram_vectors=gram_vectors,
        bigram_missing=missing,
        word_types=lexicon.type_bits[all_rows] if lexicon.types else None,
        word_weights=None if lexicon.counts is None else lexicon.counts[all_rows] + lexicon.count_floor,
    )


def _lexicon_vectors(lexicon: Lexicon, items: Sequence[str]) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): (len(items), vector_width)
    vectors, zeros for items not in `lexicon`, and which items it has."""
    if not lexicon.vector_width:
        raise ValueError("bigram_vectors needs a lexicon with vectors, e.g. spacy-flat.word2vec_lexicon.v1")
    rows = lexicon.rows_of(items)
    found = rows >= 0
    out = numpy.zeros((len(items), lexicon.vector_width), dtype="float32")
    out[found] = lexicon.vectors[rows[found]]
    return out, found


def _concat(parts: List[numpy.ndarray]) -> numpy.ndarray:
    return numpy.concatenate(parts).astype("int64") if parts else numpy.zeros(0, dtype="int64")
