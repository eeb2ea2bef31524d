"""A linear-chain CRF (pytorch-crf) whose decoded tag sequences are always valid."""

from typing import List, Sequence, Tuple

import torch
from torch import nn
from torchcrf import CRF

# Large but finite: -inf would give NaN in the forward algorithm's logsumexp.
FORBIDDEN = -1e4


class ConstrainedCRF(CRF):
    """pytorch-crf's CRF restricted to allowed transitions, starts and ends.

    pytorch-crf's forward algorithm and Viterbi decoding read `transitions`,
    `start_transitions` and `end_transitions`; here those are properties that
    pin forbidden entries to FORBIDDEN, so invalid moves can neither be learned
    nor decoded. (A torch parametrization would do the same but makes the
    module unpicklable, and spaCy pipelines must pickle.)
    """

    def __init__(
        self,
        n_tags: int,
        allowed: Sequence[Tuple[int, int]],
        starts: Sequence[int],
        ends: Sequence[int],
    ) -> None:
        # CRF.__init__ would register `transitions` as a parameter; here it is a
        # masked view of `raw_transitions`, so the module is set up directly.
        nn.Module.__init__(self)
        if n_tags <= 0:
            raise ValueError(f"invalid number of tags: {n_tags}")
        self.num_tags = n_tags
        self.batch_first = True
        self.raw_start_transitions = nn.Parameter(torch.empty(n_tags).uniform_(-0.1, 0.1))
        self.raw_end_transitions = nn.Parameter(torch.empty(n_tags).uniform_(-0.1, 0.1))
        self.raw_transitions = nn.Parameter(torch.empty(n_tags, n_tags).uniform_(-0.1, 0.1))
        forbidden = torch.ones(n_tags, n_tags, dtype=torch.bool)
        for i, j in allowed:
            forbidden[i, j] = False
        no_start = torch.ones(n_tags, dtype=torch.bool)
        no_start[list(starts)] = False
        no_end = torch.ones(n_tags, dtype=torch.bool)
        no_end[list(ends)] = False
        self.register_buffer("forbidden", forbidden, persistent=False)
        self.register_buffer("no_start", no_start, persistent=False)
        self.register_buffer("no_end", no_end, persistent=False)

    @property
    def transitions(self) -> torch.Tensor:
        return self.raw_transitions.masked_fill(self.forbidden, FORBIDDEN)

    @property
    def start_transitions(self) -> torch.Tensor:
        return self.raw_start_transitions.masked_fill(self.no_start, FORBIDDEN)

    @property
    def end_transitions(self) -> torch.Tensor:
        return self.raw_end_transitions.masked_fill(self.no_end, FORBIDDEN)

    def nll(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Summed negative log-likelihood of `tags`.

        emissions (torch.Tensor): (batch, length, n_tags) scores.
        tags (torch.Tensor): (batch, length) gold tag ids.
        mask (torch.Tensor): (batch, length) bool; every row must start with True.
        RETURNS (torch.Tensor): The scalar loss.
        """
        # The forward algorithm's logsumexp runs in float32 even under mixed precision.
        return -self(emissions.float(), tags, mask=mask, reduction="sum")

    def viterbi(self, emissions: torch.Tensor, mask: torch.Tensor) -> List[List[int]]:
        """Best valid tag sequence per row."""
        with torch.no_grad():
            return super().decode(emissions.float(), mask=mask)
