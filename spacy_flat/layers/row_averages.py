"""thinc's parameter averages of an embedding table whose steps touch only the rows a batch read.

thinc's optimizer keeps, with `use_averages = true`, an exponential moving average of every
parameter, moved towards the weights after every step: `ema -= (1 - d(t)) * (ema - w)`, with
`d(t) = min((1 + t) / (10 + t), 0.9999)` at the parameter's t-th update (`Ops.update_averages`).
For an embedding table that is a pass over every row a step, although a batch reads a few hundred
of its 20,941 character or 20,000 word rows; with SGD, where the shim steps only those rows, a dense
average would bring back the dense step as well.

A row that no step touches keeps its weights, and the average of a constant closes in on it by a
known factor: after steps s+1..t it is `w + (ema - w) * prod d(u)`. So each row records the step up
to which its average is exact, and is brought up to date when a step touches it again; a reader
(evaluation and saving, through the shim's `use_params`) gets every row brought up to date in a copy.
Reading changes nothing, and a checkpoint keeps the rows' steps beside thinc's array, so a run that
was stopped and resumed computes the very same floats as one never stopped. The product has a
closed form: below the cap, `prod (1 + u) / (10 + u)` telescopes to a ratio of gamma functions.
"""

import math
from typing import Any

import torch
from thinc.util import get_array_module

# thinc's `update_averages` caps the decay at 0.9999, reached after this step: d(89,990) = 0.9999.
MAX_DECAY = 0.9999
UNCAPPED_STEPS = 89_990


def decay(step: int) -> float:
    """thinc's decay of the average at a parameter's `step`-th update (1-based)."""
    return min((1.0 + step) / (10.0 + step), MAX_DECAY)


def _log_gamma_ratio(steps: torch.Tensor) -> torch.Tensor:
    # sum of log((1 + u) / (10 + u)) for u = 1..s, up to a constant that cancels in differences
    s = steps.to(torch.float64)
    return torch.lgamma(s + 2.0) - torch.lgamma(s + 11.0)


def log_decay_product(since: torch.Tensor, until: int) -> torch.Tensor:
    """The log of `prod d(u)` for u = since+1 .. until, for each entry of `since` (0 where since >= until).

    since (torch.Tensor): int64 steps, each at most `until`.
    until (int): The last step.
    RETURNS (torch.Tensor): float64, the shape of `since`.
    """
    end = torch.full_like(since, until)
    uncapped = _log_gamma_ratio(end.clamp(max=UNCAPPED_STEPS)) - _log_gamma_ratio(since.clamp(max=UNCAPPED_STEPS))
    capped = (end.clamp(min=UNCAPPED_STEPS) - since.clamp(min=UNCAPPED_STEPS)).to(torch.float64)
    return uncapped + capped * math.log(MAX_DECAY)


def _address(array: Any) -> int:
    # numpy arrays and cupy arrays give their first byte's address differently
    return int(array.ctypes.data) if hasattr(array, "ctypes") else int(array.data.ptr)


class RowAverages:
    """The lazily kept average of one table: thinc's array, and the update up to which each row is exact.

    average (Any): The optimizer's averages array for the table (numpy or cupy), written in place.
    view (torch.Tensor): The average as a tensor on the table's device: the same memory where the
        array's device is the table's (CPU, CUDA); otherwise a copy, whose updated rows are written
        back into `average` at every step (MPS: thinc keeps its arrays on the host).
    exact_at (torch.Tensor): int64, for each row the update count at which its average is exact.
    step (int): The table's update count, the last step included.
    """

    def __init__(self, average: Any, view: torch.Tensor, exact_at: torch.Tensor, step: int) -> None:
        self.average = average
        self.view = view
        self.exact_at = exact_at
        self.step = step
        self.shared = view.data_ptr() == _address(average)

    @classmethod
    def exact(cls, average: Any, view: torch.Tensor, step: int) -> "RowAverages":
        """The record of an average whose every row is exact at update `step` (0 for thinc's new zeros)."""
        return cls(average, view, torch.full((view.shape[0],), step, dtype=torch.int64, device=view.device), step)

    def update(self, rows: torch.Tensor, before: torch.Tensor, after: torch.Tensor, step: int) -> None:
        """Apply update `step` to the rows it changed.

        rows (torch.Tensor): int64 row indices, unique.
        before (torch.Tensor): Their weights before the step (constant since each row's last update).
        after (torch.Tensor): Their weights after it.
        step (int): The table's update count, this step included.
        """
        if step != self.step + 1:
            raise RuntimeError(
                f"row averages out of step: update {step} of a table whose average was last updated at {self.step}"
            )
        since = self.exact_at[rows]
        average = self.view[rows]
        # Rows stepped at the update before are exact as they stand (no rounding through a factor of 1).
        behind = since < step - 1
        factor = torch.exp(log_decay_product(since, step - 1)).to(before.dtype).unsqueeze(1)
        average = torch.where(behind.unsqueeze(1), before + (average - before) * factor, average)
        average -= (1.0 - decay(step)) * (average - after)
        self.view.index_copy_(0, rows, average)
        if not self.shared:
            xp = get_array_module(self.average)
            self.average[xp.asarray(rows.cpu().numpy())] = xp.asarray(average.cpu().numpy())
        self.exact_at[rows] = step
        self.step = step

    def current(self, weights: torch.Tensor) -> torch.Tensor:
        """Every row's average at the last update, in a new tensor; the record is left as it is.

        weights (torch.Tensor): The table's weights now.
        RETURNS (torch.Tensor): thinc's average of the table.
        """
        result = self.view.clone()
        behind = (self.exact_at < self.step).nonzero().squeeze(1)
        if behind.numel():
            factor = torch.exp(log_decay_product(self.exact_at[behind], self.step)).to(weights.dtype).unsqueeze(1)
            now = weights.index_select(0, behind)
            result.index_copy_(0, behind, now + (self.view[behind] - now) * factor)
        return result
