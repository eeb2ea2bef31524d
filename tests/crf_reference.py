"""pytorch-crf as the reference the CRF's own recursions are held to (a test dependency only)."""

import torch
import torchcrf
from torch import nn

from spacy_flat.crf.model import ConstrainedCRF


class ReferenceCRF(torchcrf.CRF):
    """pytorch-crf's `forward` and `decode` over a `ConstrainedCRF`'s masked potentials: its
    parameters are the constrained CRF's, so gradients reach them."""

    def __init__(self, crf: ConstrainedCRF) -> None:
        nn.Module.__init__(self)
        self.num_tags = crf.num_tags
        self.batch_first = True
        self.crf = crf

    @property
    def transitions(self) -> torch.Tensor:  # type: ignore[override]
        return self.crf.transitions

    @property
    def start_transitions(self) -> torch.Tensor:  # type: ignore[override]
        return self.crf.start_transitions

    @property
    def end_transitions(self) -> torch.Tensor:  # type: ignore[override]
        return self.crf.end_transitions
