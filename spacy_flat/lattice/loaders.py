"""Registered loaders for lexicons and character vectors, named in a config's
`[initialize]` block. They read files (`readers.py`) and know nothing of the model.
"""

from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy
from spacy.util import registry

from .char_vocab import CharVocab
from .gazetteers import add_gazetteers
from .lexicon import Lexicon
from .readers import jieba_dir, read_lac_char_table, read_word2vec, read_word2vec_chars, read_word_list
from .vectors import unit_rows
from .word_counts import read_word_counts

# Every lexicon loader takes typed word lists (gazetteers) too, and jieba's lexicon and the word2vec
# lexicon also type jieba's own words by their tags: `create_jieba_lexicon` describes these arguments,
# and the other loaders' docstrings refer to it.


@registry.misc("spacy-flat.jieba_lexicon.v1")
def create_jieba_lexicon(
    gazetteers: Optional[Dict[str, str]] = None,
    typed_words: Optional[str] = None,
    jieba_types: Optional[Dict[str, str]] = None,
) -> Callable[[], Lexicon]:
    """The default lexicon: the 349k-word dict.txt bundled with jieba, no vectors,
    with typed word lists if given.

    gazetteers (Optional[Dict[str, str]]): Type name -> a word list, or several separated
        by commas (plain lists, THUOCL's `word<TAB>count`, CSV with a `name` column;
        xz/gz/bz2 or not). Each word gets the type, and the model a learned embedding per
        type beside the word's vector.
    typed_words (Optional[str]): A list of `word<TAB>type[,type...]` lines.
    jieba_types (Optional[Dict[str, str]]): A part-of-speech tag of dict.txt -> a type (`nr`
        person, `nrt` transliterated person, `ns` place, `nt` organization, `nz` other
        proper noun); the words so tagged join the lexicon with that type.
    RETURNS (Callable[[], Lexicon]): The loader.
    """

    def load() -> Lexicon:
        words, _ = read_word_list(jieba_dir() / "dict.txt")
        return _typed(Lexicon(words), gazetteers, typed_words, jieba_types)

    return load


@registry.misc("spacy-flat.no_lexicon.v1")
def create_no_lexicon() -> Callable[[], Lexicon]:
    """An empty lexicon, for an architecture that reads no lattice words
    (`spacy-flat.TenerTagger.v2`): nothing to load, match or save.

    RETURNS (Callable[[], Lexicon]): The loader.
    """
    return Lexicon


def _typed(
    lexicon: Lexicon,
    gazetteers: Optional[Dict[str, str]],
    typed_words: Optional[str],
    jieba_types: Optional[Dict[str, str]] = None,
) -> Lexicon:
    tagged = (jieba_dir() / "dict.txt", jieba_types) if jieba_types else None
    if gazetteers or typed_words or tagged:
        add_gazetteers(lexicon, gazetteers or {}, typed_words, tagged)
    return lexicon


@registry.misc("spacy-flat.word2vec_lexicon.v1")
def create_word2vec_lexicon(
    path: str,
    binary: Optional[bool] = None,
    normalize: bool = False,
    jieba_words: bool = False,
    extra_words: Optional[str] = None,
    gazetteers: Optional[Dict[str, str]] = None,
    typed_words: Optional[str] = None,
    extra_vectors: Optional[str] = None,
    jieba_types: Optional[Dict[str, str]] = None,
) -> Callable[[], Lexicon]:
    """A lexicon with vectors from a word2vec file (text or binary). Words from jieba
    or the extra list that the file lacks get no vector, only the model's learned
    word embedding, as in a lexicon without vectors.

    path (str): The word2vec file, text or binary; binary needs the `count width` header line.
    binary (Optional[bool]): Read it as binary (True) or text (False); None detects it.
    normalize (bool): Scale each vector to unit length.
    jieba_words (bool): Also match the words of jieba's bundled dict.txt.
    extra_words (Optional[str]): Also match the words of this list (one per
        line, the first field).
    extra_vectors (Optional[str]): A second word2vec file (e.g. `pretrain-vectors`'
        words.vec beside a general table): the union of both files' words, each
        vector the two files' vectors side by side, zeros for the file that lacks
        the word. Each half is scaled on its own when `normalize` is set.
    The other arguments are `spacy-flat.jieba_lexicon.v1`'s.
    RETURNS (Callable[[], Lexicon]): The loader.
    """

    def load() -> Lexicon:
        words, vectors, _ = read_word2vec(path, binary=binary)
        if normalize:
            vectors = unit_rows(vectors)
        if extra_vectors is not None:
            words, vectors = _side_by_side(words, vectors, *read_word2vec(extra_vectors)[:2], normalize)
        lexicon = Lexicon(words, vectors, normalize=normalize and extra_vectors is None)
        if jieba_words:
            lexicon.extend(read_word_list(jieba_dir() / "dict.txt")[0])
        if extra_words is not None:
            lexicon.extend(read_word_list(extra_words)[0])
        return _typed(lexicon, gazetteers, typed_words, jieba_types)

    return load


def _side_by_side(
    words: List[str], vectors: numpy.ndarray, more: List[str], more_vectors: numpy.ndarray, normalize: bool
) -> Tuple[List[str], numpy.ndarray]:
    """The union of two tables' words, each row [first file's vector, second's]."""
    if normalize:
        more_vectors = unit_rows(more_vectors)
    index = {word: row for row, word in enumerate(words)}
    union = words + [word for word in more if word not in index]
    table = numpy.zeros((len(union), vectors.shape[1] + more_vectors.shape[1]), dtype="float32")
    table[: len(words), : vectors.shape[1]] = vectors
    rows = {word: row for row, word in enumerate(union)}
    table[[rows[w] for w in more], vectors.shape[1] :] = more_vectors
    return union, table


@registry.misc("spacy-flat.word_list_lexicon.v1")
def create_word_list_lexicon(
    path: str, column: int = 0, gazetteers: Optional[Dict[str, str]] = None, typed_words: Optional[str] = None
) -> Callable[[], Lexicon]:
    """A lexicon without vectors from a plain word list, one word per line.

    path (str): The word list.
    column (int): Which whitespace-separated field of a line holds the word (jieba's
        dict.txt: `word freq pos`, 0).
    The other arguments are `spacy-flat.jieba_lexicon.v1`'s.
    RETURNS (Callable[[], Lexicon]): The loader.
    """

    def load() -> Lexicon:
        words, _ = read_word_list(path, column=column)
        return _typed(Lexicon(words), gazetteers, typed_words)

    return load


@registry.misc("spacy-flat.word_counts.v1")
def create_word_counts(path: str) -> Callable[[], Dict[str, float]]:
    """Word frequencies for DC-SAN's word-set weights from a `word<TAB>count` file
    (`pretrain-vectors` writes `words.counts.tsv` beside its word table). Without
    one, `flat_ner` counts the lexicon's words on its training data.

    path (str): The `word<TAB>count` file (xz/gz/bz2 or not); a repeated word's counts add up.
    RETURNS (Callable[[], Dict[str, float]]): The loader.
    """

    def load() -> Dict[str, float]:
        return read_word_counts(Path(path))

    return load


@registry.misc("spacy-flat.lac_char_vectors.v1")
def create_lac_char_vectors(
    directory: Optional[str] = None, normalize: bool = False
) -> Callable[[], Tuple[CharVocab, numpy.ndarray]]:
    """The default character vectors: Baidu LAC's table bundled with jieba.

    directory (Optional[str]): The `lac_small` folder; jieba's by default.
    normalize (bool): Scale each row to unit length.
    RETURNS (Callable[[], Tuple[CharVocab, numpy.ndarray]]): The loader.
    """

    def load() -> Tuple[CharVocab, numpy.ndarray]:
        vocab, table = read_lac_char_table(directory)
        return vocab, unit_rows(table) if normalize else table

    return load


@registry.misc("spacy-flat.word2vec_char_vectors.v1")
def create_word2vec_char_vectors(
    path: str, binary: Optional[bool] = None, normalize: bool = False
) -> Callable[[], Tuple[CharVocab, numpy.ndarray]]:
    """Character vectors from the single characters of a word2vec file; set the
    model's char_width to the file's width.

    path (str): The word2vec file, text or binary; binary needs the `count width` header line.
    binary (Optional[bool]): Read it as binary (True) or text (False); None detects it.
    normalize (bool): Scale each row to unit length.
    RETURNS (Callable[[], Tuple[CharVocab, numpy.ndarray]]): The loader.
    """

    def load() -> Tuple[CharVocab, numpy.ndarray]:
        vocab, table = read_word2vec_chars(path, binary=binary)
        return vocab, unit_rows(table) if normalize else table

    return load


@registry.misc("spacy-flat.word2vec_bigram_vectors.v1")
def create_word2vec_bigram_vectors(
    path: str, binary: Optional[bool] = None, normalize: bool = False
) -> Callable[[], Lexicon]:
    """The paper's pretrained bigram embeddings: the two-character entries of a
    word2vec file (`pretrain-vectors` writes bigrams.vec). Each character gets
    the vector of the bigram that starts at it; a learned vector stands in where
    the table lacks it. Needs `[components.flat_ner.model] bigram_vectors = true`.

    path (str): The word2vec file, text or binary; binary needs the `count width` header line.
    binary (Optional[bool]): Read it as binary (True) or text (False); None detects it.
    normalize (bool): Scale each row to unit length.
    RETURNS (Callable[[], Lexicon]): The loader.
    """

    def load() -> Lexicon:
        bigrams, vectors, _ = read_word2vec(path, binary=binary, min_length=2, max_length=2)
        return Lexicon(bigrams, vectors, normalize=normalize)

    return load
