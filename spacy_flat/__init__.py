"""spacy-flat: the Flat-Lattice Transformer for Chinese NER as a spaCy component."""

from .about import __version__
from .lexicon import Lexicon
from .loaders import (
    create_jieba_lexicon,
    create_lac_char_vectors,
    create_word2vec_char_vectors,
    create_word2vec_lexicon,
    create_word_list_lexicon,
)
from .model import build_flat_tagger
from .pipe import FlatNER, make_flat_ner
from .scorer import make_char_ner_scorer

__all__ = [
    "FlatNER",
    "Lexicon",
    "__version__",
    "build_flat_tagger",
    "create_jieba_lexicon",
    "create_lac_char_vectors",
    "create_word2vec_char_vectors",
    "create_word2vec_lexicon",
    "create_word_list_lexicon",
    "make_char_ner_scorer",
    "make_flat_ner",
]
