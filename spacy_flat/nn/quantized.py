"""An int8 copy of a tagger for prediction on a CPU: its linear layers dynamically quantized.

On one CPU thread the encoder is most of `nlp.pipe`'s time, and its linear layers
(projections, attention, feed-forward, output) a fifth of it; torch's dynamic quantization
runs them in int8, with the weights quantized once and the activations per batch. The
relative-position module reads its linear layer's weights directly (`position.py` builds
its tables from them), so it stays float32, as do the attention's W_kR (its rows are looked up,
not computed, in prediction: `position_keys.py`) and everything that is not a linear layer.
`torch.ao.quantization` is deprecated in favour of torchao but still ships with torch; the
option that uses it is off by default.
"""

import copy
import warnings

import torch
from torch import nn

# Sub-modules whose linear layers are read as weights, not called: kept in float32.
KEEP_FLOAT = ("position",)
# Linear layers, by their own name, whose outputs prediction keeps between batches: kept in float32.
KEEP_FLOAT_LAYERS = ("w_kr",)


def int8_copy(module: nn.Module) -> nn.Module:
    """A copy of `module` for CPU inference, every linear layer it calls quantized to int8.

    module (nn.Module): A tagger on the CPU, unchanged.
    RETURNS (nn.Module): The copy, in eval mode.
    """
    names = {
        name
        for name, layer in module.named_modules()
        if isinstance(layer, nn.Linear)
        and not set(name.split(".")) & set(KEEP_FLOAT)
        and name.split(".")[-1] not in KEEP_FLOAT_LAYERS
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

        spec = {name: default_dynamic_qconfig for name in names}
        quantized = quantize_dynamic(copy.deepcopy(module).eval(), spec, dtype=torch.qint8, inplace=True)
    return quantized
