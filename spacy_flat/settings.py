"""The FLAT architecture's settings: the one place their names, defaults and
meanings are written.

The registered builders (`architectures.py`) take these as keyword arguments;
their signatures are made from this dataclass (`settings_signature`), so spaCy's
config system fills and validates every setting without a second copy of the
list. The torch module, the featurizer and the shim all read one `FlatSettings`.
"""

import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, TypeVar, cast

ENCODERS = ("flat", "tener", "dcsan", "lattice_lstm")
# The autocast types of `mixed_precision_dtype`.
AUTOCAST_DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class FlatSettings:
    """Settings of a FLAT model (the paper's Table 5 sizes by default).

    width (int): d_model (160); for the Lattice LSTM, its hidden size, both
        directions together (Zhang & Yang's 200: 100 each way).
    n_heads (int): Attention heads (8).
    ffn_width (int): Feed-forward size (480).
    n_layers (int): FLAT layers (1).
    char_width (int): Character embedding width; must match the character
        vectors given at initialization (jieba's LAC table: 128).
    word_width (int), word_rows (int): Word bloom-embedding width and rows.
    bigram_width (int), bigram_rows (int): Character-bigram bloom embeddings; 0 rows for none.
    bigram_vectors (bool): Also give each character the lexicon's vector of its
        bigram (zeros where the lexicon has none), as the paper's pretrained
        bigram embeddings; needs a lexicon with vectors.
    max_words (int): Cap on lattice words per text; -1 for none.
    embed_dropout (float), dropout (float), attention_dropout (float),
    output_dropout (float): Dropout rates (paper: 0.5 embeddings, 0.3 output).
    scaled (bool): Scale attention by 1/sqrt(d_head); False is TENER's un-scaled attention.
    mask_self_matched (bool): FLAT_msm ablation.
    max_distance (int): FLAT_mld ablation (10 in the paper); -1 for none.
    head_only (bool): FLAT_head ablation.
    position_distances (int): FLAT's distances fused into R: 4 (eq. 8: hh, ht, th, tt) or 2
        (hh and tt, the released code's default fusion).
    key_projection (bool), output_projection (bool): FLAT's attention projects its keys
        (W_k) and its output (W_o); the released code does neither (keys are the layer's input).
    residual (bool): Each sublayer adds its input back before its layer norm (the
        Transformer's layer); False is the released FLAT code's layer, whose add & norm adds
        a sublayer's output to itself: LN(Attn(x)), then LN(FFN(.)), no dropout between.
    xavier_init (bool): Draw the weight matrices but the embeddings', the position fusion's and
        the CRF's from a Xavier-uniform distribution at initialization, as the released FLAT code
        does; False keeps PyTorch's defaults (and zeros for FLAT's u and v).
    mixed_precision (bool), grad_scaler_config (dict): PyTorch autocast and grad scaling.
    mixed_precision_dtype (str): The autocast type on a CUDA device, "float16" (thinc's)
        or "bfloat16" (float32's range: no loss scaling needed). On a CPU the model
        stays float32 (bfloat16 autocast measured no faster there).
    use_char_embeddings (bool): Use the character embeddings; only a model with
        transformer features may go without.
    learn_rate_scale (float): The torch module's learning rate as a multiple of
        the optimizer's (FLAT+BERT trains FLAT faster than the transformer).
    encoder (str): "flat" (the lattice of characters and words), "tener"
        (characters only, TENER's layers) or "dcsan" (characters attended by their
        word sets, then TENER's layers) or "lattice_lstm" (Zhang & Yang's lattice
        LSTM over characters and the words ending at each); set by the registered builder.
    coupled_forget (bool): Lattice LSTM: the character cell of Zhang & Yang's released
        code, whose forget gate is one minus its input gate (three gates), in place of
        the paper's eq. 11 with a forget gate of its own (four).
    int8_inference (bool): Predict on a CPU with the linear layers dynamically quantized
        to int8 (`nn/quantized.py`): faster, at a small cost in F1; training, and prediction
        on a GPU, stay float32.
    """

    width: int = 160
    n_heads: int = 8
    ffn_width: int = 480
    n_layers: int = 1
    char_width: int = 128
    word_width: int = 64
    word_rows: int = 20000
    bigram_width: int = 0
    bigram_rows: int = 0
    bigram_vectors: bool = False
    max_words: int = -1
    embed_dropout: float = 0.5
    dropout: float = 0.15
    attention_dropout: float = 0.0
    output_dropout: float = 0.3
    scaled: bool = True
    mask_self_matched: bool = False
    max_distance: int = -1
    head_only: bool = False
    position_distances: int = 4
    key_projection: bool = True
    output_projection: bool = True
    residual: bool = True
    xavier_init: bool = False
    mixed_precision: bool = False
    mixed_precision_dtype: str = "float16"
    grad_scaler_config: Optional[Dict[str, Any]] = None
    use_char_embeddings: bool = True
    learn_rate_scale: float = 1.0
    encoder: str = "flat"
    coupled_forget: bool = False
    int8_inference: bool = False

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.encoder == "lattice_lstm":
            # No attention heads: the width is split between the two directions.
            if self.width % 2:
                raise ValueError(f"the Lattice LSTM's width {self.width} is not even (two directions)")
        elif self.coupled_forget:
            raise ValueError("coupled_forget is a setting of the Lattice LSTM's character cell")
        elif self.width % self.n_heads:
            raise ValueError(f"width {self.width} is not divisible by {self.n_heads} heads")
        if self.position_distances not in (2, 4):
            raise ValueError(f"position_distances must be 4 or 2, got {self.position_distances}")
        if self.mixed_precision_dtype not in AUTOCAST_DTYPES:
            raise ValueError(
                f"mixed_precision_dtype must be one of {AUTOCAST_DTYPES}, got {self.mixed_precision_dtype!r}"
            )
        if (self.grad_scaler_config or {}).get("enabled"):
            # The CRF's gradients are computed outside the shim's scaled backward, and a
            # batch in several groups would unscale earlier groups' gradients again.
            raise ValueError("grad_scaler_config enabled = true is not supported yet: leave grad scaling off")


# The settings only a model with transformer features takes, and the one each builder sets.
TRANSFORMER_ONLY = ("use_char_embeddings", "learn_rate_scale", "encoder")
# Settings of FLAT's lattice attention, which TENER and DC-SAN do not have, and
# of the lattice words, which TENER (characters only) does not have either.
FLAT_ONLY = (
    "mask_self_matched",
    "max_distance",
    "head_only",
    "position_distances",
    "key_projection",
    "output_projection",
)
LATTICE_ONLY = ("word_width", "word_rows", "max_words", *FLAT_ONLY)
# Settings of the Lattice LSTM's cell, which the attention models do not have.
LSTM_ONLY = ("coupled_forget",)
# Settings of the attention layers, which the Lattice LSTM does not have.
ATTENTION_ONLY = (
    "n_heads",
    "ffn_width",
    "n_layers",
    "dropout",
    "attention_dropout",
    "scaled",
    "residual",
    "xavier_init",
    *FLAT_ONLY,
)
F = TypeVar("F", bound=Callable[..., Any])


def settings_signature(*leading: inspect.Parameter, exclude: Sequence[str] = (), **defaults: Any) -> Callable[[F], F]:
    """Give a builder that takes `**settings` the signature of `FlatSettings`,
    and apply that signature's defaults when it is called from Python too.

    leading (inspect.Parameter): Parameters that come first (a tok2vec layer).
    exclude (Sequence[str]): Settings the builder does not take.
    defaults (Any): Defaults that differ from `FlatSettings`'s for this builder.
    """
    hints = typing.get_type_hints(FlatSettings)
    names = [f.name for f in dataclasses.fields(FlatSettings)]
    unknown = set(defaults) - set(names)
    if unknown:
        raise TypeError(f"{sorted(unknown)} are not FlatSettings fields")
    params = list(leading)
    for field in dataclasses.fields(FlatSettings):
        if field.name not in exclude:
            default = defaults.get(field.name, field.default)
            kind = inspect.Parameter.KEYWORD_ONLY
            params.append(inspect.Parameter(field.name, kind, default=default, annotation=hints[field.name]))

    def decorate(builder: F) -> F:
        signature = inspect.Signature(params, return_annotation=inspect.signature(builder).return_annotation)

        @functools.wraps(builder)
        def build(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return builder(*bound.args, **bound.kwargs)

        build.__signature__ = signature  # type: ignore[attr-defined]
        return cast(F, build)

    return decorate


def default_config(architecture: str, exclude: Sequence[str] = TRANSFORMER_ONLY + LSTM_ONLY) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): The `[model]` block of `architecture` with every default."""
    values = {f.name: f.default for f in dataclasses.fields(FlatSettings) if f.name not in exclude}
    return {"@architectures": architecture, **values}
