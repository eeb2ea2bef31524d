"""Registered loaders for lexicons and character vectors, named in a config's
`[initialize]` block. They read files (`readers.py`) and know nothing of the model.
"""

from typing import Callable, Optional, Tuple

import numpy
from spacy.util import registry

from .char_vocab import CharVocab
from .lexicon import Lexicon
from .readers import jieba_dir, read_lac_char_table, read_word2vec, read_word2vec_chars, read_word_list
from .vectors import unit_rows


@registry.misc("spacy-flat.jieba_lexicon.v1")
def create_jieba_lexicon() -> Callable[[], Lexicon]:
    """The default lexicon: the 349k-word dict.txt bundled with jieba, no vectors."""

    def load() -> Lexicon:
        words, _ = read_word_list(jieba_dir() / "dict.txt")
        return Lexicon(words)

    return load


@registry.misc("spacy-flat.word2vec_lexicon.v1")
def create_word2vec_lexicon(
    path: str,
    binary: Optional[bool] = None,
    normalize: bool = False,
    jieba_words: bool = False,
    extra_words: Optional[str] = None,
) -> Callable[[], Lexicon]:
    """A lexicon with vectors from a word2vec file (text or binary).

    normalize (bool): Scale each vector to unit length.
    jieba_words (bool): Also match the words of jieba's bundled dict.txt.
    extra_words (Optional[str]): Also match the words of this list (one per
        line, the first field).
    Words from jieba or the list that the file lacks get no vector, only the
    model's learned word embedding, as in a lexicon without vectors.
    """

    def load() -> Lexicon:
        words, vectors, _ = read_word2vec(path, binary=binary)
        lexicon = Lexicon(words, vectors, normalize=normalize)
        if jieba_words:
            lexicon.extend(read_word_list(jieba_dir() / "dict.txt")[0])
        if extra_words is not None:
            lexicon.extend(read_word_list(extra_words)[0])
        return lexicon

    return load


@registry.misc("spacy-flat.word_list_lexicon.v1")
def create_word_list_lexicon(path: str, column: int = 0) -> Callable[[], Lexicon]:
    """A lexicon without vectors from a plain word list, one word per line."""

    def load() -> Lexicon:
        words, _ = read_word_list(path, column=column)
        return Lexicon(words)

    return load


@registry.misc("spacy-flat.lac_char_vectors.v1")
def create_lac_char_vectors(
    directory: Optional[str] = None, normalize: bool = False
) -> Callable[[], Tuple[CharVocab, numpy.ndarray]]:
    """The default character vectors: Baidu LAC's table bundled with jieba;
    `normalize` scales each row to unit length."""

    def load() -> Tuple[CharVocab, numpy.ndarray]:
        vocab, table = read_lac_char_table(directory)
        return vocab, unit_rows(table) if normalize else table

    return load


@registry.misc("spacy-flat.word2vec_char_vectors.v1")
def create_word2vec_char_vectors(
    path: str, binary: Optional[bool] = None, normalize: bool = False
) -> Callable[[], Tuple[CharVocab, numpy.ndarray]]:
    """Character vectors from the single characters of a word2vec file; set the
    model's char_width to the file's width. `normalize` scales each row to unit
    length."""

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
    `normalize` scales each row to unit length."""

    def load() -> Lexicon:
        bigrams, vectors, _ = read_word2vec(path, binary=binary, min_length=2, max_length=2)
        return Lexicon(bigrams, vectors, normalize=normalize)

    return load
