"""The registered FLAT architectures. Builders only: the layers are in `layers/`,
the settings and their defaults in `settings.py`."""

import inspect
from typing import Any, List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from ..lattice.windows import Segment
from ..layers.featurizer import flat_featurizer
from ..layers.groups import flat_model
from ..layers.torch_wrapper import torch_tagger
from ..layers.transformer_features import flat_transformer_model
from ..settings import (
    ATTENTION_ONLY,
    FLAT_ONLY,
    LATTICE_ONLY,
    LSTM_ONLY,
    TRANSFORMER_ONLY,
    FlatSettings,
    settings_signature,
)

_TOK2VEC = inspect.Parameter(
    "tok2vec", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Model[List[Doc], List[Floats2d]]
)


@registry.architectures("spacy-flat.FlatTagger.v1")
@settings_signature(exclude=TRANSFORMER_ONLY + LSTM_ONLY)
def build_flat_tagger(**settings: Any) -> Model[List[Segment], Floats3d]:
    """Build FLAT: lattice features, the FLAT encoder and emission scores.

    settings: The `FlatSettings` fields but `use_char_embeddings` and `learn_rate_scale`.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    return build_flat(FlatSettings(**settings))


@registry.architectures("spacy-flat.FlatTransformerTagger.v1")
@settings_signature(_TOK2VEC, exclude=("encoder", *LSTM_ONLY), learn_rate_scale=5.0)
def build_flat_transformer_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]], **settings: Any
) -> Model[List[Segment], Floats3d]:
    """FLAT+BERT: FLAT whose character representations come from a transformer.

    tok2vec (Model[List[Doc], List[Floats2d]]): Token vectors, usually a
        `spacy-transformers.TransformerListener.v1` of a shared `transformer`
        component (which is then fine-tuned jointly, with its own optimizer settings).
        Each character takes the vector of the token it belongs to (one character
        per token in `spacy.blank("zh")`); whitespace between tokens gets zeros.
    settings: The `FlatSettings` fields; `use_char_embeddings` also concatenates
        the character embeddings, and `learn_rate_scale` (5.0 here) is FLAT's
        learning rate as a multiple of the transformer's.
    """
    return build_flat(FlatSettings(**settings), tok2vec)


@registry.architectures("spacy-flat.TenerTagger.v1")
@settings_signature(exclude=TRANSFORMER_ONLY + LATTICE_ONLY + LSTM_ONLY, scaled=False)
def build_tener_tagger(**settings: Any) -> Model[List[Segment], Floats3d]:
    """Build TENER (Yan et al. 2019): characters (and bigrams) only, no lattice
    words, encoded by layers with direction- and distance-aware relative
    positions and un-scaled attention; the same embeddings, CRF, windows and
    saving as FLAT.

    settings: The `FlatSettings` fields but the lattice's; `scaled = true` is the
        paper's ablation with scaled attention.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    return build_flat(FlatSettings(**settings, max_words=0, encoder="tener"))


@registry.architectures("spacy-flat.DcsanTagger.v1")
@settings_signature(exclude=TRANSFORMER_ONLY + FLAT_ONLY + LSTM_ONLY, scaled=False)
def build_dcsan_tagger(**settings: Any) -> Model[List[Segment], Floats3d]:
    """Build DC-SAN (Zhao et al.): each character's soft-lexicon word sets (the
    lattice words it begins, is inside, ends), a cross-lattice attention from
    those sets to the characters, a gated fusion, then TENER's self-attention
    layers over characters; the same lexicon, embeddings, CRF, windows and saving
    as FLAT. Each set weighs its words by frequency z(w) + b (eq. 4-5): counted
    on the training texts at initialization, or read with spacy-flat.word_counts.v1.

    settings: The `FlatSettings` fields but FLAT's attention ablations.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    return build_flat(FlatSettings(**settings, encoder="dcsan"))


@registry.architectures("spacy-flat.LatticeLstmTagger.v1")
@settings_signature(
    exclude=TRANSFORMER_ONLY + ATTENTION_ONLY, width=200, word_width=50, embed_dropout=0.5, output_dropout=0.5
)
def build_lattice_lstm_tagger(**settings: Any) -> Model[List[Segment], Floats3d]:
    """Build the Lattice LSTM (Zhang & Yang 2018): a bidirectional character LSTM
    whose cell merges, at the last character of each lattice word, a gated word
    cell started at the word's first character (eq. 11-16); the same lattice,
    embeddings, CRF, windows and saving as FLAT. Defaults are the paper's Table 3:
    hidden 200 (100 each way), word embeddings 50, dropout 0.5 on the embeddings
    and on the LSTM's output; `coupled_forget` gives the released code's character
    cell (forget gate = 1 - input gate) in place of eq. 11's.

    settings: The `FlatSettings` fields but the attention layers'.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    return build_flat(FlatSettings(**settings, encoder="lattice_lstm"))


@registry.architectures("spacy-flat.DcsanTransformerTagger.v1")
@settings_signature(_TOK2VEC, exclude=("encoder", *FLAT_ONLY, *LSTM_ONLY), learn_rate_scale=5.0, scaled=False)
def build_dcsan_transformer_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]], **settings: Any
) -> Model[List[Segment], Floats3d]:
    """DC-SAN with character features from a transformer (the paper's DC-SAN with
    BERT): the transformer's vectors, as FLAT+BERT takes them, are the characters
    that the word sets attend to and fuse with.

    tok2vec (Model[List[Doc], List[Floats2d]]): Token vectors, usually a
        `spacy-transformers.TransformerListener.v1` (see FlatTransformerTagger).
    settings: The `FlatSettings` fields but FLAT's attention ablations.
    """
    return build_flat(FlatSettings(**settings, encoder="dcsan"), tok2vec)


def build_flat(
    settings: FlatSettings, tok2vec: Optional[Model[List[Doc], List[Floats2d]]] = None
) -> Model[List[Segment], Floats3d]:
    """The one build function of both architectures.

    settings (FlatSettings): The architecture's settings.
    tok2vec (Optional[Model]): A listener for transformer features, or None.
    """
    features = flat_featurizer(settings)
    tagger = torch_tagger(settings)
    if tok2vec is None:
        return flat_model(features, tagger)
    return flat_transformer_model(features, tok2vec, tagger)
