"""The thinc layers of the FLAT architectures, one a file."""

from .featurizer import flat_featurizer, set_resources
from .groups import encode_in_groups, flat_model
from .torch_tagger import TorchTagger, torch_tagger
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
