"""A linear-chain CRF whose decoded tag sequences are always valid."""

from typing import List, Sequence, Tuple

import numpy
import torch
from torch import nn

from .host_marginals import forward_backward
from .host_spans import span_probabilities
from .host_viterbi import viterbi_paths
from .likelihood import NegLogLikelihood, gold_score

# Large but finite: -inf would give NaN in the forward algorithm's logsumexp.
FORBIDDEN = -1e4


def recursion_dtype(device: torch.device) -> torch.dtype:
    """The forward algorithm's float type on `device`: float64, except on
    Apple's MPS, which has none (there the range is float32's)."""
    return torch.float32 if device.type == "mps" else torch.float64


class ConstrainedCRF(nn.Module):
    """A linear-chain CRF (pytorch-crf's parameters and their names) restricted to
    allowed transitions, starts and ends.

    `transitions`, `start_transitions` and `end_transitions` are properties that
    pin forbidden entries to FORBIDDEN, so invalid moves can neither be learned
    nor decoded. (A torch parametrization would do the same but makes the
    module unpicklable, and spaCy pipelines must pickle.) Training and decoding
    go through `nll` and `viterbi`, faster versions of pytorch-crf's `forward`
    and `decode` (measured below); pytorch-crf itself is the tests' reference
    (`tests/crf_reference.py`), a test dependency.
    """

    def __init__(
        self,
        n_tags: int,
        allowed: Sequence[Tuple[int, int]],
        starts: Sequence[int],
        ends: Sequence[int],
    ) -> None:
        super().__init__()
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
        # Masks, not weights: never saved.
        self.forbidden: torch.Tensor
        self.no_start: torch.Tensor
        self.no_end: torch.Tensor
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
        """Summed negative log-likelihood of `tags`: the same value and gradients
        as pytorch-crf's `CRF.forward(..., reduction="sum")`, negated, at a
        fraction of the cost. pytorch-crf loops over the characters for the
        gold-path score too, re-reads the masked transitions at every step and
        masks every step with `torch.where`; those per-step ops were the largest
        single part of a Resume training step (24%,
        `benchmarks/tools/profile_training.py`). Here the gold path is scored in one
        gather, and log Z and every gradient come from one forward-backward
        pass without autograd (`crf_likelihood.NegLogLikelihood`): recorded
        step by step, the forward algorithm (`_log_partition`, still the
        reference) left ~1,000 small autograd nodes to a training batch.

        emissions (torch.Tensor): (batch, length, n_tags) scores.
        tags (torch.Tensor): (batch, length) gold tag ids; padding may hold any valid id.
        mask (torch.Tensor): (batch, length) bool, each row a non-empty prefix of True.
        RETURNS (torch.Tensor): The scalar loss.
        """
        # No float16 even under mixed precision: the scores are float32 and the
        # forward-backward float64 (see `_log_partition`).
        # Padding is zeroed: the recursion runs through it, and a NaN or inf there
        # would reach the real characters' gradients.
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            emissions = emissions.float().masked_fill(~mask[:, :, None], 0.0)
            wide = recursion_dtype(emissions.device)
            loss = NegLogLikelihood.apply(
                emissions, self.transitions, self.start_transitions, self.end_transitions, tags, mask, wide
            )
            return loss

    # Scores of given paths under autograd (`top_paths.top_paths_loss` reads them).
    _gold_score = staticmethod(gold_score)

    @staticmethod
    def _log_partition(
        emissions: torch.Tensor,
        transitions: torch.Tensor,
        start: torch.Tensor,
        end: torch.Tensor,
        last: torch.Tensor,
    ) -> torch.Tensor:
        """log Z of each row by the forward algorithm, (batch,).

        Rows run on past their end (through zeroed padding); each row's log Z
        is read off at its own last character, so no step needs a mask and the
        padding gets no gradient. Each step is a matrix product in probability
        space, shifted by the step's best score, rather than a logsumexp over
        (batch, n_tags, n_tags): most of that block is FORBIDDEN, and torch's
        CPU `exp` takes a path about 5x slower for inputs that far below zero.
        Here only `exp(transitions)` meets them, once per batch (they become
        exact zeros). One shift serves every tag, so a tag whose best
        predecessor is far below the step's best must still be representable:
        in float64 that holds down to about e^-700 (float32 stops at e^-87,
        which a confident model's emission gaps can reach), for the cost of
        float32 at these sizes. Below that (a tag no allowed move reaches) the
        probability is clamped to the smallest normal float before the log,
        which keeps its gradient finite.
        """
        wide = recursion_dtype(emissions.device)
        tiny = torch.finfo(wide).tiny
        steps = emissions.to(wide).unbind(1)
        moves = transitions.to(wide).exp()
        alpha = start.to(wide)[None] + steps[0]
        alphas = [alpha]
        for emitted in steps[1:]:
            top = alpha.max(1, keepdim=True).values.detach()
            alpha = torch.mm((alpha - top).exp(), moves).clamp_min(tiny).log() + top + emitted
            alphas.append(alpha)
        n_tags = alpha.shape[1]
        final = torch.stack(alphas, 1).gather(1, last[:, None, None].expand(-1, 1, n_tags))[:, 0]
        return torch.logsumexp(final + end.to(wide)[None], 1).to(emissions.dtype)

    def viterbi(self, emissions: torch.Tensor, mask: torch.Tensor) -> List[List[int]]:
        """Best valid tag sequence per row: pytorch-crf's Viterbi recursion, run in
        NumPy (`best_paths`).

        emissions (torch.Tensor): (batch, length, n_tags) scores.
        mask (torch.Tensor): (batch, length) bool, each row a prefix of True.
        RETURNS (List[List[int]]): Tag ids per row, of the row's length.
        """
        with torch.no_grad():
            scores = emissions.float().cpu().numpy()
            lengths = mask.sum(1).cpu().numpy()
        paths = self.best_paths(scores, lengths)
        return [paths[b, :n].tolist() for b, n in enumerate(lengths)]

    def best_paths(self, scores: numpy.ndarray, lengths: numpy.ndarray) -> numpy.ndarray:
        """Best valid tag sequence of every row at once, by pytorch-crf's Viterbi
        recursion in NumPy (`packed.viterbi_paths`). pytorch-crf issues several
        small torch ops per time step, whose dispatch and thread-pool overhead
        dominated inference on long texts (42 s of 100 s for a 40,000-character
        document on a loaded 2-core machine); in NumPy a step costs microseconds.

        scores (numpy.ndarray): (batch, width, n_tags) float32 emissions.
        lengths (numpy.ndarray): (batch,) characters per row.
        RETURNS (numpy.ndarray): (batch, width) int32 tag ids, valid to each row's length.
        """
        with torch.no_grad():
            trans = self.transitions.float().cpu().numpy()
            start = self.start_transitions.float().cpu().numpy()
            end = self.end_transitions.float().cpu().numpy()
        return viterbi_paths(scores, lengths, trans, start, end)

    def span_probabilities(
        self,
        scores: numpy.ndarray,
        lengths: numpy.ndarray,
        runs: Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray],
        temperature: float = 1.0,
    ) -> numpy.ndarray:
        """`run_probabilities` for a whole batch of runs given as arrays
        (`span_marginals.span_probabilities`), as `best_paths` is `viterbi`'s.

        scores (numpy.ndarray): (batch, width, n_tags) float32 emissions.
        runs: (row, first, end, tags): each run's row and [first, end), and the
            (batch, width) tag ids the runs are read from.
        RETURNS (numpy.ndarray): (runs,) float64 probabilities.
        """
        with torch.no_grad():
            trans = self.transitions.double().cpu().numpy() / temperature
            start = self.start_transitions.double().cpu().numpy() / temperature
            end = self.end_transitions.double().cpu().numpy() / temperature
        return span_probabilities(scores, lengths, trans, start, end, runs, temperature)

    def _host_potentials(
        self, emissions: torch.Tensor, mask: torch.Tensor, temperature: float
    ) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """Emissions, row lengths, transitions, starts and ends as float64 NumPy, divided by the temperature."""
        with torch.no_grad():
            return (
                emissions.double().cpu().numpy() / temperature,
                mask.sum(1).cpu().numpy(),
                self.transitions.double().cpu().numpy() / temperature,
                self.start_transitions.double().cpu().numpy() / temperature,
                self.end_transitions.double().cpu().numpy() / temperature,
            )

    def run_probabilities(
        self,
        emissions: torch.Tensor,
        mask: torch.Tensor,
        runs: Sequence[Sequence[Tuple[int, Sequence[int]]]],
        temperature: float = 1.0,
    ) -> List[List[float]]:
        """The probability of each given tag run under the CRF: the marginal that
        the characters from `start` on take exactly those tags (an entity's
        B…L or U run), by the forward-backward algorithm in float64 NumPy
        (`host_marginals.forward_backward`).

        emissions (torch.Tensor): (batch, length, n_tags) scores.
        mask (torch.Tensor): (batch, length) bool, each row a prefix of True.
        runs: Per row, (start, tag ids) of each run.
        temperature (float): Every potential is divided by it (calibration);
            1.0 is the trained CRF's own distribution.
        RETURNS (List[List[float]]): Per row, the probability of each run.
        """
        scores, lengths, trans, start, end = self._host_potentials(emissions, mask, temperature)
        alpha, beta, log_z = forward_backward(scores, lengths, trans, start, end)
        out: List[List[float]] = []
        for b, row_runs in enumerate(runs):
            probs = []
            for first, tags in row_runs:
                inner = sum(trans[tags[k - 1], tags[k]] + scores[b, first + k, tags[k]] for k in range(1, len(tags)))
                log_p = alpha[b, first, tags[0]] + inner + beta[b, first + len(tags) - 1, tags[-1]] - log_z[b]
                probs.append(float(min(1.0, numpy.exp(log_p))))
            out.append(probs)
        return out
