"""From texts to the padded id arrays the encoder reads (plain NumPy)."""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence, Tuple

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


@dataclass
class TextIds:
    """What featurizing texts reads from the texts alone, as ids (never the vectors they index):
    the part a training run can compute once per text and reuse every epoch (`FeatureCache`).
    Arrays are the texts' concatenated, in text order.

    lengths, counts (numpy.ndarray): (texts,) characters and lattice words per text.
    word_heads, word_tails, word_rows (numpy.ndarray): (N_w,) each word's span and lexicon row.
    char_rows (numpy.ndarray): (N_c,) each character's row.
    bigram_hashes (Optional[numpy.ndarray]): (N_c, 2) bloom rows of each character's bigram.
    bigram_rows (Optional[numpy.ndarray]): (N_c,) the row of each character's bigram in the bigram
        table (or the lexicon), -1 where it has none.
    """

    lengths: numpy.ndarray
    counts: numpy.ndarray
    word_heads: numpy.ndarray
    word_tails: numpy.ndarray
    word_rows: numpy.ndarray
    char_rows: numpy.ndarray
    bigram_hashes: Optional[numpy.ndarray] = None
    bigram_rows: Optional[numpy.ndarray] = None


class IdsCache(Protocol):
    """Keeps texts' ids to be read rather than computed again (`feature_cache.FeatureCache`)."""

    def ids(self, texts: Sequence[str], compute: Callable[[Sequence[str]], TextIds]) -> TextIds: ...


def text_ids(
    texts: Sequence[str],
    lexicon: Lexicon,
    char_vocab: CharVocab,
    *,
    bigram_rows: int = 0,
    max_words: int = -1,
    bigram_vectors: bool = False,
    bigram_table: Optional[Lexicon] = None,
) -> TextIds:
    """The ids of `texts` (`featurize`'s arguments, those that shape ids): one lattice match
    over the batch, one character lookup, the bigrams' hashes and rows."""
    lengths = numpy.asarray([len(text) for text in texts], dtype="int64")
    word_heads, word_tails, all_rows, counts = batch_words(texts, lexicon, max_words)
    hashes = gram_rows = None
    if bigram_rows > 0 or bigram_vectors:
        # The bigram at i is text[i : i + 2]; the last character pairs with an end mark.
        grams = [t[i : i + 2] if i + 1 < len(t) else t[i] + "\x03" for t in texts for i in range(len(t))]
        if bigram_rows > 0:
            hashes = hash_rows(grams, bigram_rows)
        if bigram_vectors:
            source = bigram_table or lexicon
            if not source.vector_width:
                raise ValueError("bigram_vectors needs a lexicon with vectors, e.g. spacy-flat.word2vec_lexicon.v1")
            gram_rows = source.rows_of(grams)
    char_rows = char_vocab.rows("".join(texts))
    return TextIds(lengths, counts, word_heads, word_tails, all_rows, char_rows, hashes, gram_rows)


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
    cache: Optional[IdsCache] = None,
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
    cache (Optional[FeatureCache]): Keeps each text's ids (`TextIds`) to be read rather than
        computed again (`feature_cache.py`); None computes them.
    RETURNS (FlatBatch): The batch.
    """

    compute = functools.partial(
        text_ids,
        lexicon=lexicon,
        char_vocab=char_vocab,
        bigram_rows=bigram_rows,
        max_words=max_words,
        bigram_vectors=bigram_vectors,
        bigram_table=bigram_table,
    )
    ids = compute(texts) if cache is None else cache.ids(texts, compute)
    return assemble(ids, lexicon, word_rows=word_rows, bigram_vectors=bigram_vectors, bigram_table=bigram_table)


def assemble(
    ids: TextIds,
    lexicon: Lexicon,
    *,
    word_rows: int,
    bigram_vectors: bool = False,
    bigram_table: Optional[Lexicon] = None,
) -> FlatBatch:
    """The padded batch of texts' ids: positions, masks, and the vectors the ids index."""
    lengths, counts, all_rows = ids.lengths, ids.counts, ids.word_rows
    batch = len(lengths)
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
    heads.reshape(-1)[word_index] = ids.word_heads
    tails.reshape(-1)[word_index] = ids.word_tails
    token_mask.reshape(-1)[char_index] = True
    token_mask.reshape(-1)[word_index] = True
    char_mask = numpy.arange(n_chars_max)[None, :] < lengths[:, None]
    gram_vectors = missing = None
    if bigram_vectors and ids.bigram_rows is not None:
        gram_vectors, found = _row_vectors(bigram_table or lexicon, ids.bigram_rows)
        missing = ~found if bigram_table is not None else None
    vectors = lexicon.vectors[all_rows] if lexicon.vector_width else None
    return FlatBatch(
        char_rows=ids.char_rows,
        word_hashes=word_hash_rows(lexicon, all_rows, word_rows),
        heads=heads,
        tails=tails,
        char_index=char_index,
        word_index=word_index,
        token_mask=token_mask,
        char_mask=char_mask,
        bigram_hashes=ids.bigram_hashes,
        word_vectors=vectors,
        bigram_vectors=gram_vectors,
        bigram_missing=missing,
        word_types=lexicon.type_bits[all_rows] if lexicon.types else None,
        word_weights=None if lexicon.counts is None else lexicon.counts[all_rows] + lexicon.count_floor,
    )


def _row_vectors(lexicon: Lexicon, rows: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): (len(rows), vector_width) vectors of the
    lexicon's `rows`, zeros where a row is -1, and which rows it has."""
    found = rows >= 0
    out = numpy.zeros((len(rows), lexicon.vector_width), dtype="float32")
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
