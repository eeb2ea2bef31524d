"""The thinc side: where thinc meets torch.

The featurizer, the group loop under the attention budget, the torch tagger
(`TorchTagger`: device, CRF loss, decoding), transformer features, the in-place
PyTorch shim and the array hand-over. Modules here may import `nn/`, the data
side and the decoding, never `pipeline/`.
"""

from .featurizer import flat_featurizer, set_resources
from .groups import encode_in_groups, flat_model
from .torch_tagger import TorchTagger
from .torch_wrapper import torch_tagger
from .transformer_features import flat_transformer_model

__all__ = [
    "TorchTagger",
    "encode_in_groups",
    "flat_featurizer",
    "flat_model",
    "flat_transformer_model",
    "set_resources",
    "torch_tagger",
]
