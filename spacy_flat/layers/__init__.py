"""The thinc side: where thinc meets torch.

The featurizer (`featurizer.py`), the model of every architecture and its group loop under the
attention budget (`flat_model.py`), the torch tagger as a thinc layer (`torch_tagger.py`) and the
component's handle on it (`tagger_handle.py`, `TorchTagger`: device, CRF loss, decoding),
transformer features, the in-place PyTorch shim and the array hand-over. Modules here may import
`nn/`, `crf/`, the data side and the decoding, never `pipeline/`.
"""

from .featurizer import flat_featurizer, set_resources
from .tagger_handle import TorchTagger
from .transformer_features import flat_transformer_model

__all__ = ["TorchTagger", "flat_featurizer", "flat_transformer_model", "set_resources"]
