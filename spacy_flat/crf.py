"""A linear-chain CRF (pytorch-crf) whose decoded tag sequences are always valid."""

from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
from torch import nn
from torch.nn.utils import parametrize
from torchcrf import CRF

# Large but finite: -inf would give NaN in the forward algorithm's logsumexp.
FORBIDDEN = -1e4


class _Forbid(nn.Module):
    """Parametrization that pins forbidden entries to FORBIDDEN."""

    def __init__(self, forbidden: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("forbidden", forbidden, persistent=False)

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return value.masked_fill(self.forbidden, FORBIDDEN)


class ConstrainedCRF(nn.Module):
    """pytorch-crf's CRF with transitions, starts and ends restricted to the
    allowed ones. The restriction is a torch parametrization, so pytorch-crf's
    own training (forward algorithm) and Viterbi decoding see the masked scores
    and forbidden moves can neither be learned nor decoded.
    """

    def __init__(
        self,
        n_tags: int,
        allowed: Sequence[Tuple[int, int]],
        starts: Sequence[int],
        ends: Sequence[int],
    ) -> None:
        super().__init__()
        self.crf = CRF(n_tags, batch_first=True)
        trans = torch.ones(n_tags, n_tags, dtype=torch.bool)
        for i, j in allowed:
            trans[i, j] = False
        start = torch.ones(n_tags, dtype=torch.bool)
        start[list(starts)] = False
        end = torch.ones(n_tags, dtype=torch.bool)
        end[list(ends)] = False
        parametrize.register_parametrization(self.crf, "transitions", _Forbid(trans))
        parametrize.register_parametrization(self.crf, "start_transitions", _Forbid(start))
        parametrize.register_parametrization(self.crf, "end_transitions", _Forbid(end))

    def nll(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Summed negative log-likelihood of `tags`.

        emissions (torch.Tensor): (batch, length, n_tags) scores.
        tags (torch.Tensor): (batch, length) gold tag ids.
        mask (torch.Tensor): (batch, length) bool; every row must start with True.
        RETURNS (torch.Tensor): The scalar loss.
        """
        # The forward algorithm's logsumexp is run in float32 even under mixed precision.
        # cached(): pytorch-crf reads `transitions` once per time step.
        with parametrize.cached():
            return -self.crf(emissions.float(), tags, mask=mask, reduction="sum")

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> List[List[int]]:
        """Best valid tag sequence per row (Viterbi)."""
        with torch.no_grad(), parametrize.cached():
            return self.crf.decode(emissions.float(), mask=mask)
