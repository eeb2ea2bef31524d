"""The registered architectures: each builder states its own arguments and composes
the lattice featurizer, the embeddings, its encoder and the CRF head (`nn/`), as
spaCy's `ml/models/` builders do. The versions earlier releases registered are in
`legacy.py`."""

from typing import Any, Callable, Dict, List, Optional

import torch
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from ..lattice.windows import Segment
from ..layers.featurizer import flat_featurizer
from ..layers.flat_model import flat_model
from ..layers.torch_tagger import torch_tagger
from ..layers.transformer_features import flat_transformer_model
from ..nn.dcsan import DcsanEncoder
from ..nn.embeddings import LatticeEmbeddings
from ..nn.flat.encoder import FlatEncoder
from ..nn.lattice import LatticeEncoder
from ..nn.lattice_lstm.encoder import LatticeLstmEncoder
from ..nn.tagger import LatticeTagger
from ..nn.tener import TenerEncoder

# The autocast types of `mixed_precision_dtype`.
AUTOCAST_DTYPES = ("float16", "bfloat16")


@registry.architectures("spacy-flat.FlatTagger.v2")
def build_flat_tagger_v2(
    width: int = 160,
    n_heads: int = 8,
    ffn_width: int = 480,
    n_layers: int = 1,
    char_width: int = 128,
    word_width: int = 64,
    word_rows: int = 20000,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    max_words: int = -1,
    embed_dropout: float = 0.5,
    dropout: float = 0.15,
    attention_dropout: float = 0.0,
    output_dropout: float = 0.3,
    scaled: bool = True,
    mask_self_matched: bool = False,
    max_distance: int = -1,
    head_only: bool = False,
    mixed_precision: bool = False,
    mixed_precision_dtype: str = "float16",
) -> Model[List[Segment], Floats3d]:
    """Build FLAT (Li et al. 2020): the flat lattice of characters and lexicon words,
    encoded by self-attention with relative span positions; the paper's Table 5 sizes.

    width (int): Model width (d_model).
    n_heads (int): Attention heads.
    ffn_width (int): Feed-forward size.
    n_layers (int): Attention layers.
    char_width (int): Character embedding width; must match the character vectors given at
        initialization (jieba's LAC table: 128).
    word_width (int): Width of the lattice words' bloom embeddings.
    word_rows (int): Rows of the lattice words' bloom embeddings.
    bigram_width (int): Width of the character-bigram bloom embeddings.
    bigram_rows (int): Rows of the character-bigram bloom embeddings; 0 for none.
    bigram_vectors (bool): Also give each character the pretrained vector of its bigram (a
        bigram table's or the lexicon's; zeros where there is none).
    max_words (int): Most lattice words a text keeps; -1 for no cap.
    embed_dropout (float): Dropout on the embeddings.
    dropout (float): Dropout on each sublayer's output and inside the feed-forward.
    attention_dropout (float): Dropout on the attention weights.
    output_dropout (float): Dropout before the emission scores.
    scaled (bool): Scale attention by 1/sqrt(d_head).
    mask_self_matched (bool): The paper's ablation FLAT_msm: characters do not attend to
        the words that contain them.
    max_distance (int): The paper's ablation FLAT_mld: no attention between spans whose
        heads are further apart; -1 for none.
    head_only (bool): The paper's ablation FLAT_head: the position term from the head
        distance alone.
    mixed_precision (bool): Train and predict under PyTorch's autocast on a CUDA device; a
        CPU stays float32.
    mixed_precision_dtype (str): The autocast type, "float16" or "bfloat16" (float32's range).
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    tagger = _lattice_tagger(
        FlatEncoder,
        char_width,
        word_width,
        word_rows,
        bigram_width,
        bigram_rows,
        bigram_vectors,
        embed_dropout,
        output_dropout=output_dropout,
        width=width,
        n_heads=n_heads,
        ffn_width=ffn_width,
        n_layers=n_layers,
        dropout=dropout,
        attention_dropout=attention_dropout,
        scaled=scaled,
        mask_self_matched=mask_self_matched,
        max_distance=max_distance,
        head_only=head_only,
    )
    features = _features(word_rows, bigram_rows, bigram_vectors, max_words)
    return flat_model(features, _torch_layer(tagger, mixed_precision, mixed_precision_dtype))


@registry.architectures("spacy-flat.FlatTransformerTagger.v2")
def build_flat_transformer_tagger_v2(
    tok2vec: Model[List[Doc], List[Floats2d]],
    width: int = 160,
    n_heads: int = 8,
    ffn_width: int = 480,
    n_layers: int = 1,
    char_width: int = 128,
    word_width: int = 64,
    word_rows: int = 20000,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    max_words: int = -1,
    embed_dropout: float = 0.5,
    dropout: float = 0.15,
    attention_dropout: float = 0.0,
    output_dropout: float = 0.3,
    scaled: bool = True,
    mask_self_matched: bool = False,
    max_distance: int = -1,
    head_only: bool = False,
    mixed_precision: bool = False,
    mixed_precision_dtype: str = "float16",
    use_char_embeddings: bool = True,
    learn_rate_scale: float = 5.0,
) -> Model[List[Segment], Floats3d]:
    """FLAT+BERT: FLAT whose character representations come from a transformer.

    tok2vec (Model[List[Doc], List[Floats2d]]): Token vectors, usually a
        `spacy-transformers.TransformerListener.v1` of a shared `transformer`
        component (which is then fine-tuned jointly, with its own optimizer settings).
        Each character takes the vector of the token it belongs to (one character
        per token in `spacy.blank("zh")`); whitespace between tokens gets zeros.
    use_char_embeddings (bool): Also concatenate the character embeddings to the
        transformer's vectors.
    learn_rate_scale (float): The architecture's learning rate as a multiple of the
        transformer's.
    The other arguments are `spacy-flat.FlatTagger.v2`'s.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    tagger = _lattice_tagger(
        FlatEncoder,
        char_width,
        word_width,
        word_rows,
        bigram_width,
        bigram_rows,
        bigram_vectors,
        embed_dropout,
        output_dropout=output_dropout,
        use_char_embeddings=use_char_embeddings,
        width=width,
        n_heads=n_heads,
        ffn_width=ffn_width,
        n_layers=n_layers,
        dropout=dropout,
        attention_dropout=attention_dropout,
        scaled=scaled,
        mask_self_matched=mask_self_matched,
        max_distance=max_distance,
        head_only=head_only,
    )
    features = _features(word_rows, bigram_rows, bigram_vectors, max_words)
    layer = _torch_layer(tagger, mixed_precision, mixed_precision_dtype, learn_rate_scale=learn_rate_scale)
    return flat_transformer_model(features, tok2vec, layer)


@registry.architectures("spacy-flat.TenerTagger.v2")
def build_tener_tagger_v2(
    width: int = 160,
    n_heads: int = 8,
    ffn_width: int = 480,
    n_layers: int = 1,
    char_width: int = 128,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    embed_dropout: float = 0.5,
    dropout: float = 0.15,
    attention_dropout: float = 0.0,
    output_dropout: float = 0.3,
    scaled: bool = False,
    mixed_precision: bool = False,
    mixed_precision_dtype: str = "float16",
) -> Model[List[Segment], Floats3d]:
    """Build TENER (Yan et al. 2019): characters (and bigrams) only, no lattice words,
    encoded by layers with direction- and distance-aware relative positions and
    un-scaled attention; the same embeddings, CRF, windows and saving as FLAT.

    The arguments are `spacy-flat.FlatTagger.v2`'s; `scaled = true` is the paper's ablation.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    embeddings = _embeddings(char_width, 0, 0, bigram_width, bigram_rows, bigram_vectors, embed_dropout)
    encoder = TenerEncoder(
        embeddings.char_input_width,
        width=width,
        n_heads=n_heads,
        ffn_width=ffn_width,
        n_layers=n_layers,
        dropout=dropout,
        attention_dropout=attention_dropout,
        scaled=scaled,
    )
    tagger = LatticeTagger(embeddings, encoder, output_dropout=output_dropout)
    features = _features(0, bigram_rows, bigram_vectors, max_words=0)
    return flat_model(features, _torch_layer(tagger, mixed_precision, mixed_precision_dtype))


@registry.architectures("spacy-flat.DcsanTagger.v2")
def build_dcsan_tagger_v2(
    width: int = 160,
    n_heads: int = 8,
    ffn_width: int = 480,
    n_layers: int = 1,
    char_width: int = 128,
    word_width: int = 64,
    word_rows: int = 20000,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    max_words: int = -1,
    embed_dropout: float = 0.5,
    dropout: float = 0.15,
    attention_dropout: float = 0.0,
    output_dropout: float = 0.3,
    scaled: bool = False,
    mixed_precision: bool = False,
    mixed_precision_dtype: str = "float16",
) -> Model[List[Segment], Floats3d]:
    """Build DC-SAN (Zhao et al.): each character's soft-lexicon word sets (the
    lattice words it begins, is inside, ends), a cross-lattice attention from
    those sets to the characters, a gated fusion, then TENER's self-attention
    layers over characters; the same lexicon, embeddings, CRF, windows and saving
    as FLAT. Each set weighs its words by frequency z(w) + b (eq. 4-5): counted
    on the training texts at initialization, or read with spacy-flat.word_counts.v1.

    The arguments are `spacy-flat.FlatTagger.v2`'s.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    tagger = _lattice_tagger(
        DcsanEncoder,
        char_width,
        word_width,
        word_rows,
        bigram_width,
        bigram_rows,
        bigram_vectors,
        embed_dropout,
        width=width,
        n_heads=n_heads,
        ffn_width=ffn_width,
        n_layers=n_layers,
        dropout=dropout,
        attention_dropout=attention_dropout,
        output_dropout=output_dropout,
        scaled=scaled,
    )
    features = _features(word_rows, bigram_rows, bigram_vectors, max_words)
    return flat_model(features, _torch_layer(tagger, mixed_precision, mixed_precision_dtype))


@registry.architectures("spacy-flat.DcsanTransformerTagger.v2")
def build_dcsan_transformer_tagger_v2(
    tok2vec: Model[List[Doc], List[Floats2d]],
    width: int = 160,
    n_heads: int = 8,
    ffn_width: int = 480,
    n_layers: int = 1,
    char_width: int = 128,
    word_width: int = 64,
    word_rows: int = 20000,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    max_words: int = -1,
    embed_dropout: float = 0.5,
    dropout: float = 0.15,
    attention_dropout: float = 0.0,
    output_dropout: float = 0.3,
    scaled: bool = False,
    mixed_precision: bool = False,
    mixed_precision_dtype: str = "float16",
    use_char_embeddings: bool = True,
    learn_rate_scale: float = 5.0,
) -> Model[List[Segment], Floats3d]:
    """DC-SAN with character features from a transformer (the paper's DC-SAN with
    BERT): the transformer's vectors, as FLAT+BERT takes them, are the characters
    that the word sets attend to and fuse with.

    The arguments are `spacy-flat.DcsanTagger.v2`'s and `spacy-flat.FlatTransformerTagger.v2`'s.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    tagger = _lattice_tagger(
        DcsanEncoder,
        char_width,
        word_width,
        word_rows,
        bigram_width,
        bigram_rows,
        bigram_vectors,
        embed_dropout,
        width=width,
        n_heads=n_heads,
        ffn_width=ffn_width,
        n_layers=n_layers,
        dropout=dropout,
        attention_dropout=attention_dropout,
        output_dropout=output_dropout,
        scaled=scaled,
        use_char_embeddings=use_char_embeddings,
    )
    features = _features(word_rows, bigram_rows, bigram_vectors, max_words)
    layer = _torch_layer(tagger, mixed_precision, mixed_precision_dtype, learn_rate_scale=learn_rate_scale)
    return flat_transformer_model(features, tok2vec, layer)


@registry.architectures("spacy-flat.LatticeLstmTagger.v2")
def build_lattice_lstm_tagger_v2(
    width: int = 200,
    char_width: int = 128,
    word_width: int = 50,
    word_rows: int = 20000,
    bigram_width: int = 0,
    bigram_rows: int = 0,
    bigram_vectors: bool = False,
    max_words: int = -1,
    embed_dropout: float = 0.5,
    output_dropout: float = 0.5,
    mixed_precision: bool = False,
    mixed_precision_dtype: str = "float16",
) -> Model[List[Segment], Floats3d]:
    """Build the Lattice LSTM (Zhang & Yang 2018): a bidirectional character LSTM
    whose cell merges, at the last character of each lattice word, a gated word
    cell started at the word's first character (eq. 11-16); the same lattice,
    embeddings, CRF, windows and saving as FLAT. Defaults are the paper's Table 3:
    hidden 200 (100 each way), word embeddings 50, dropout 0.5 on the embeddings
    and on the LSTM's output.

    width (int): The hidden size, both directions together (even).
    The other arguments are `spacy-flat.FlatTagger.v2`'s.
    RETURNS (Model[List[Segment], Floats3d]): Emission scores (segments, chars, tags).
    """
    embeddings = _embeddings(
        char_width, word_width, word_rows, bigram_width, bigram_rows, bigram_vectors, embed_dropout
    )
    encoder = LatticeLstmEncoder(embeddings.char_input_width, word_width, width=width)
    tagger = LatticeTagger(embeddings, encoder, output_dropout=output_dropout)
    features = _features(word_rows, bigram_rows, bigram_vectors, max_words)
    return flat_model(features, _torch_layer(tagger, mixed_precision, mixed_precision_dtype))


def _embeddings(
    char_width: int,
    word_width: int,
    word_rows: int,
    bigram_width: int,
    bigram_rows: int,
    bigram_vectors: bool,
    embed_dropout: float,
    *,
    use_char_embeddings: bool = True,
) -> LatticeEmbeddings:
    return LatticeEmbeddings(
        char_width=char_width,
        word_width=word_width,
        word_rows=word_rows,
        bigram_width=bigram_width,
        bigram_rows=bigram_rows,
        bigram_vectors=bigram_vectors,
        embed_dropout=embed_dropout,
        use_char_embeddings=use_char_embeddings,
    )


def _lattice_tagger(
    encoder: Callable[..., LatticeEncoder],
    char_width: int,
    word_width: int,
    word_rows: int,
    bigram_width: int,
    bigram_rows: int,
    bigram_vectors: bool,
    embed_dropout: float,
    *,
    output_dropout: float,
    use_char_embeddings: bool = True,
    **layers: Any,
) -> LatticeTagger:
    """The tagger of an encoder that reads characters and lattice words (FLAT's, DC-SAN's), with or
    without transformer features; `layers`: the encoder's own arguments."""
    embeddings = _embeddings(
        char_width,
        word_width,
        word_rows,
        bigram_width,
        bigram_rows,
        bigram_vectors,
        embed_dropout,
        use_char_embeddings=use_char_embeddings,
    )
    return LatticeTagger(
        embeddings, encoder(embeddings.char_input_width, word_width, **layers), output_dropout=output_dropout
    )


def _features(word_rows: int, bigram_rows: int, bigram_vectors: bool, max_words: int) -> Model:
    return flat_featurizer(
        word_rows=word_rows, bigram_rows=bigram_rows, bigram_vectors=bigram_vectors, max_words=max_words
    )


def _torch_layer(
    tagger: LatticeTagger,
    mixed_precision: bool,
    mixed_precision_dtype: str,
    *,
    learn_rate_scale: float = 1.0,
    grad_scaler_config: Optional[Dict[str, Any]] = None,
) -> Model:
    if mixed_precision_dtype not in AUTOCAST_DTYPES:
        raise ValueError(f"mixed_precision_dtype must be one of {AUTOCAST_DTYPES}, got {mixed_precision_dtype!r}")
    return torch_tagger(
        tagger,
        mixed_precision=mixed_precision,
        autocast_dtype=getattr(torch, mixed_precision_dtype),
        grad_scaler_config=grad_scaler_config,
        learn_rate_scale=learn_rate_scale,
    )
