"""From texts to the padded id arrays the encoder reads (plain NumPy)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import murmurhash
import numpy

from .char_vocab import CharVocab
from .flat_lattice import batch_words
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
    batch = len(texts)
    lengths = numpy.asarray([len(text) for text in texts], dtype="int64")
    word_heads, word_tails, all_rows, counts = batch_words(texts, lexicon, max_words)
    width = int((lengths + counts).max(initial=0)) or 1
    n_chars_max = int(lengths.max(initial=0)) or 1
    # Row b holds its characters at b * width + [0, n_chars), then its words.
    char_index = numpy.repeat(numpy.arange(batch) * width, lengths) + _within(lengths)
    word_index = numpy.repeat(numpy.arange(batch) * width + lengths, counts) + _within(counts)
    heads = numpy.zeros((batch, width), dtype="int64")
    tails = numpy.zeros((batch, width), dtype="int64")
    token_mask = numpy.zeros((batch, width), dtype=bool)
    positions = _within(lengths)
    heads.reshape(-1)[char_index] = positions
    tails.reshape(-1)[char_index] = positions
    heads.reshape(-1)[word_index] = word_heads
    tails.reshape(-1)[word_index] = word_tails
    token_mask.reshape(-1)[char_index] = True
    token_mask.reshape(-1)[word_index] = True
    char_mask = numpy.arange(n_chars_max)[None, :] < lengths[:, None]
    char_rows = char_vocab.rows("".join(texts))
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
        word_hashes=word_hash_rows(lexicon, all_rows, word_rows),
        heads=heads,
        tails=tails,
        char_index=char_index,
        word_index=word_index,
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


def _within(counts: numpy.ndarray) -> numpy.ndarray:
    """RETURNS (numpy.ndarray): 0, 1, ..., n - 1 for each n of `counts`, concatenated."""
    total = int(counts.sum())
    return numpy.arange(total, dtype="int64") - numpy.repeat(numpy.cumsum(counts) - counts, counts)


# Each lexicon's words' raw hashes by row, filled as words are first met: a
# word's bloom rows depend on its row alone, so no batch hashes it again.
_WORD_HASHES: weakref.WeakKeyDictionary[Lexicon, numpy.ndarray] = weakref.WeakKeyDictionary()


def word_hash_rows(lexicon: Lexicon, rows: numpy.ndarray, n_rows: int) -> numpy.ndarray:
    """RETURNS (numpy.ndarray): (len(rows), 2) int64: `hash_rows` of the lexicon's words at `rows`."""
    known = _WORD_HASHES.get(lexicon)
    if known is None or len(known) < len(lexicon):
        grown = numpy.full((len(lexicon), len(HASH_SEEDS) + 1), 0, dtype="int64")
        if known is not None:
            grown[: len(known)] = known
        known = _WORD_HASHES[lexicon] = grown
    # The last column says whether the row's hashes are there.
    new = numpy.unique(rows[known[rows, -1] == 0])
    if len(new):
        words = [lexicon.words[row] for row in new.tolist()]
        for k, seed in enumerate(HASH_SEEDS):
            known[new, k] = [murmurhash.hash(word, seed) for word in words]
        known[new, -1] = 1
    return known[rows, : len(HASH_SEEDS)] % n_rows
