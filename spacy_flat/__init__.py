"""spacy-flat: the Flat-Lattice Transformer for Chinese NER as a spaCy component."""

import os

import torch

from .about import __version__
from .lattice.lexicon import Lexicon
from .lattice.loaders import (
    create_jieba_lexicon,
    create_lac_char_vectors,
    create_word2vec_char_vectors,
    create_word2vec_lexicon,
    create_word_list_lexicon,
)
from .legacy import build_flat_tagger_v1 as build_flat_tagger
from .legacy import build_flat_transformer_tagger_v1 as build_flat_transformer_tagger
from .pipeline.architectures import (
    build_dcsan_tagger_v2,
    build_dcsan_transformer_tagger_v2,
    build_flat_tagger_v2,
    build_flat_transformer_tagger_v2,
    build_lattice_lstm_tagger_v2,
    build_tener_tagger_v2,
)
from .pipeline.factory import make_flat_ner
from .pipeline.flat_ner import FlatNER
from .pipeline.scorer import make_char_ner_scorer, make_pooled_ner_scorer
from .training.corpora import create_pooled_corpus
from .training.schedules import warmup_linear_from_first_step


def _single_threaded_torch_in_child() -> None:
    # A child forked after torch's OpenMP pool started (nlp.pipe(n_process=N))
    # deadlocks in its first parallel op; one thread per process avoids that
    # and is what N processes on shared cores want anyway.
    torch.set_num_threads(1)


os.register_at_fork(after_in_child=_single_threaded_torch_in_child)

__all__ = [
    "FlatNER",
    "Lexicon",
    "__version__",
    "build_dcsan_tagger_v2",
    "build_dcsan_transformer_tagger_v2",
    "build_flat_tagger",
    "build_flat_tagger_v2",
    "build_flat_transformer_tagger",
    "build_flat_transformer_tagger_v2",
    "build_lattice_lstm_tagger_v2",
    "build_tener_tagger_v2",
    "create_jieba_lexicon",
    "create_lac_char_vectors",
    "create_pooled_corpus",
    "create_word2vec_char_vectors",
    "create_word2vec_lexicon",
    "create_word_list_lexicon",
    "make_char_ner_scorer",
    "make_flat_ner",
    "make_pooled_ner_scorer",
    "warmup_linear_from_first_step",
]
