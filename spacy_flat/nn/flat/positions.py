"""FLAT's relative span positions, computed without an n x n x d tensor.

For spans i, j with heads h and lengths l = tail - head, the four distances are
hh = h_i - h_j, th = hh + l_i, ht = hh - l_j, tt = hh + l_i - l_j, so R_ij depends
only on the triple (hh, l_i, l_j). A batch holds few distinct triples (characters
have l = 0 and words are short), so R is computed once per distinct triple
(`RelativePositions.triples`) and each pair keeps an index into that table.
Since W_r is linear before the ReLU, W_r [p_hh + p_th + p_ht + p_tt] is the sum
of four per-distance tables W_r,k p(d), each only (2D + 1) x d_model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple, overload

import numpy
import torch
from torch import nn

from ..transfer import to_device

# (first triple row, end triple row, first and end position in the sorted query rows) of one run
# of queries scored against one stretch of the triple table (`position_scores.head_runs`).
Run = Tuple[int, int, int, int]
# The query rows (position-major) sorted by span length then head, and their runs.
QueryPlan = Tuple[torch.Tensor, List[Run]]
# The four distances of eq. 8, in the order W_r reads them.
KINDS = ("hh", "th", "ht", "tt")


@dataclass
class RelativePositions:
    """The distinct (hh, l_i, l_j) triples of a batch and each pair's triple.

    `index[b, i, j]` is the row of pair (i, j) in the triple table. Rows are
    ordered by l_i, then hh, then l_j: the triples of queries with one length form a
    contiguous block (`query_length_start`), and within it the triples a query with
    head h can meet (hh in [h - max_head, h]) form a contiguous run.
    """

    index: torch.Tensor  # (batch, n, n) int64
    hh: torch.Tensor  # (n_triples,) int64
    len_i: torch.Tensor  # (n_triples,) int64
    len_j: torch.Tensor  # (n_triples,) int64
    lengths: torch.Tensor  # (batch, n) int64 span length (tail - head) of each token
    mask: torch.Tensor  # (batch, n) bool, True for real tokens
    query_length_start: torch.Tensor  # (max_len + 2,) first triple row with l_i >= k
    heads: torch.Tensor  # (batch, n) int64 head of each token (0 for padding)
    max_head: int  # the batch's largest head
    # Planned on the host (`position_plan.py`): the lowest and highest of the four distances,
    # and the query plans by number of query positions; None: read from the tensors when needed.
    distance_range: Optional[Tuple[int, int]] = None
    query_plans: Optional[Dict[int, QueryPlan]] = None

    @property
    def n_triples(self) -> int:
        return int(self.hh.shape[0])

    def queries(self, n_queries: int) -> RelativePositions:
        """The same triples seen from the first `n_queries` tokens of each row only
        (the characters, for a last layer whose word rows nobody reads)."""
        return replace(
            self,
            index=self.index[:, :n_queries],
            lengths=self.lengths[:, :n_queries],
            mask=self.mask[:, :n_queries],
            heads=self.heads[:, :n_queries],
        )

    def to(self, device: torch.device) -> RelativePositions:
        """The same positions on `device`, copied without a wait (`transfer.to_device`)."""
        plans = self.query_plans
        return replace(
            self,
            index=to_device(self.index, device),
            hh=to_device(self.hh, device),
            len_i=to_device(self.len_i, device),
            len_j=to_device(self.len_j, device),
            lengths=to_device(self.lengths, device),
            mask=to_device(self.mask, device),
            query_length_start=to_device(self.query_length_start, device),
            heads=to_device(self.heads, device),
            query_plans=None if plans is None else {n: (to_device(o, device), r) for n, (o, r) in plans.items()},
        )


def relative_positions(heads: torch.Tensor, tails: torch.Tensor, mask: torch.Tensor) -> RelativePositions:
    """Index the distinct position triples of a batch, on the tensors' device. Their sizes
    are read back (a GPU waits for them); `position_plan.plan_positions` computes the same
    on the host.

    heads (torch.Tensor): (batch, n) int64 head positions.
    tails (torch.Tensor): (batch, n) int64 tail positions.
    mask (torch.Tensor): (batch, n) bool, True for real tokens.
    RETURNS (RelativePositions): The triple table and the pair index.
    """
    heads = heads.masked_fill(~mask, 0)
    lengths = (tails - heads).masked_fill(~mask, 0)
    n_len = int(lengths.max().item()) + 1 if lengths.numel() else 1
    offset = int(heads.max().item()) if heads.numel() else 0
    n_hh = 2 * offset + 1
    key = pair_keys(heads, lengths, n_len, offset)
    # A presence table then a cumulative sum compact the keys without sorting n^2 of them.
    present = torch.zeros(n_len * n_len * n_hh, dtype=torch.bool, device=heads.device)
    present[key.view(-1)] = True
    compact = torch.cumsum(present, 0) - 1
    index = compact[key]
    keys = torch.nonzero(present).squeeze(1)
    len_j = keys % n_len
    rest = keys // n_len
    tri_hh = rest % n_hh - offset
    len_i = rest // n_hh
    starts = torch.searchsorted(len_i, torch.arange(n_len + 1, device=heads.device))
    return RelativePositions(index, tri_hh, len_i, len_j, lengths, mask, starts, heads, offset)


@overload
def pair_keys(heads: torch.Tensor, lengths: torch.Tensor, n_len: int, offset: int) -> torch.Tensor: ...


@overload
def pair_keys(heads: numpy.ndarray, lengths: numpy.ndarray, n_len: int, offset: int) -> numpy.ndarray: ...


def pair_keys(heads: Any, lengths: Any, n_len: int, offset: int) -> Any:
    """Each pair's dense key ((l_i * n_hh + h_i - h_j + offset) * n_len + l_j), ordered (l_i, hh,
    l_j), from (batch, n) int64 heads and lengths (torch tensors, or NumPy arrays for the host
    plan), padded tokens' heads and lengths 0. A row term plus a column term: one addition
    makes the n x n keys.

    A padded token's pairs key real triples: with head and length 0 it stands where a row's
    first character stands (every encoded row has one), so pairs with it repeat that
    character's pairs, and the table of triples is the table of the real pairs. Their
    scores are masked in attention.
    """
    n_hh = 2 * offset + 1
    rows = (lengths * n_hh + heads + offset) * n_len
    cols = lengths - heads * n_len
    return rows[:, :, None] + cols[:, None, :]


def covering_reach(distance: int) -> int:
    """The power of two, at least 64, that covers distances in [-distance, distance]: tables
    kept for prediction over such a range are rarely rebuilt as longer texts come."""
    return 1 << max(6, max(0, distance).bit_length())


def sinusoid(distances: torch.Tensor, width: int) -> torch.Tensor:
    """The paper's eqs. 9-10: p_d[2k] = sin(d / 10000^(2k/d)), p_d[2k+1] = cos(...)."""
    half = torch.arange(0, width, 2, device=distances.device, dtype=torch.float32)
    freq = torch.exp(-math.log(10000.0) * half / width)
    angles = distances.float()[:, None] * freq[None, :]
    table = torch.zeros(distances.shape[0], width, device=distances.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : width // 2])
    return table


class PositionFusion(nn.Module):
    """R = ReLU(W_r (p_hh + p_th + p_ht + p_tt) + b) for each distinct triple (eq. 8).

    head_only (bool): FLAT_head: use p_hh alone.

    Without autograd (prediction), the four per-distance tables W_r,k p(d) are
    kept between calls for a range of distances that grows as needed, and rebuilt
    when W_r changes (an optimizer step, averaged parameters swapped in, loaded
    weights) or autocast is turned on or off: one doc at a time they cost 12% of `nlp.pipe` when rebuilt per call.
    """

    def __init__(self, width: int, *, head_only: bool = False) -> None:
        super().__init__()
        self.width = width
        self.head_only = head_only
        # One slice of W_r per distance kind (hh, th, ht, tt): equal to W_r applied to the concatenation.
        self.w_r = nn.Linear(len(KINDS) * width, width)
        # (the weights' identity, lowest distance, tables (kinds, distances, width)) once built.
        self._cached: Optional[Tuple[tuple, int, torch.Tensor]] = None

    def forward(self, pos: RelativePositions) -> torch.Tensor:
        """RETURNS (torch.Tensor): (n_triples, width) R rows."""
        return self.fuse(pos.hh, pos.len_i, pos.len_j, pos.distance_range)

    def fuse(
        self, hh: torch.Tensor, len_i: torch.Tensor, len_j: torch.Tensor, distance_range: Optional[Tuple[int, int]]
    ) -> torch.Tensor:
        """R rows of the triples (hh, len_i, len_j), each (n,) int64.

        distance_range (Optional[Tuple[int, int]]): Bounds of the four distances if known,
            else read from the tensors.
        RETURNS (torch.Tensor): (n, width) R rows.
        """
        th = hh + len_i
        ht = hh - len_j
        tt = hh + len_i - len_j
        if distance_range is not None:
            lo, hi = distance_range
        else:  # two reads of the device
            lo = int(torch.minimum(hh.min(), tt.min()).minimum(ht.min()).item())
            hi = int(torch.maximum(hh.max(), tt.max()).maximum(th.max()).item())
        kinds = (hh, th, ht, tt)
        n_kinds = 1 if self.head_only else len(KINDS)
        lo, tables = self._tables(lo, hi, n_kinds)
        fused = self.w_r.bias.expand(hh.shape[0], self.width)
        for k in range(n_kinds):
            fused = fused + tables[k][kinds[k] - lo]
        return torch.relu(fused)

    def _tables(self, lo: int, hi: int, n_kinds: int) -> Tuple[int, torch.Tensor]:
        """The lowest distance covered and the per-distance tables (kinds, distances, width)."""
        if torch.is_grad_enabled():
            self._cached = None
            return lo, self._build(lo, hi, n_kinds)
        weight = self.w_r.weight
        kind = weight.device.type
        # Tables built under autocast are half precision: never reuse them outside it, nor the reverse.
        autocast = (torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind))
        identity = (weight.data_ptr(), weight._version, weight.device, weight.dtype, n_kinds, autocast)
        cached = self._cached
        if cached is None or cached[0] != identity or lo < cached[1] or hi >= cached[1] + cached[2].shape[1]:
            # Cover a power-of-two range around zero, so a longer text rarely rebuilds.
            reach = covering_reach(max(abs(lo), abs(hi)))
            cached = self._cached = (identity, -reach, self._build(-reach, reach, n_kinds))
        return cached[1], cached[2]

    def _build(self, lo: int, hi: int, n_kinds: int) -> torch.Tensor:
        enc = sinusoid(torch.arange(lo, hi + 1, device=self.w_r.weight.device), self.width)
        w = self.w_r.weight.view(self.width, len(KINDS), self.width)
        return torch.stack([enc @ w[:, k, :].t() for k in range(n_kinds)])  # per-distance W_r,k p(d)
