"""FLAT's relative span positions planned on the host, from the batch's NumPy arrays.

`relative_positions` indexes a batch's distinct (hh, l_i, l_j) triples with tensor
operations on the model's device, and the position term then reads sizes back: the
largest head and length, the triples present (`nonzero`), the range of distances and
the runs of query rows (`position_scores._plan_chunks`). On a GPU each read makes the
host wait for every kernel queued before it, so a training step could not run ahead of
the device. The heads and tails are on the host before they are copied to the device,
so `plan_positions` computes the same index, triples and plans there with NumPy, and
`RelativePositions.to` copies them over with the features: the step then reads nothing back.
On a CPU there is nothing to wait for, and the tensor path is kept.
"""

from __future__ import annotations

from typing import Dict, Sequence

import numpy
import torch

from .position_scores import head_runs
from .positions import QueryPlan, RelativePositions, pair_keys


def plan_positions(
    heads: numpy.ndarray, tails: numpy.ndarray, mask: numpy.ndarray, query_counts: Sequence[int] = ()
) -> RelativePositions:
    """The triple table and pair index of `relative_positions`, computed on the host.

    heads, tails (numpy.ndarray): (batch, n) int64 span positions.
    mask (numpy.ndarray): (batch, n) bool, True for real tokens.
    query_counts (Sequence[int]): Numbers of query positions (the first tokens of each
        row) to plan the position term's runs for, besides all n.
    RETURNS (RelativePositions): The same values as `relative_positions` as CPU tensors over
        NumPy arrays, with the distance range and the plans (`.to(device)` copies them over).
    """
    mask = mask.astype(bool)
    heads = numpy.where(mask, heads, 0).astype("int64")
    lengths = numpy.where(mask, tails - heads, 0).astype("int64")
    n_len = int(lengths.max()) + 1 if lengths.size else 1
    offset = int(heads.max()) if heads.size else 0
    n_hh = 2 * offset + 1
    # The dense keys of relative_positions, ordered (l_i, hh, l_j).
    key = pair_keys(heads, lengths, n_len, offset)
    present = numpy.zeros(n_len * n_len * n_hh, dtype=bool)
    present[key.ravel()] = True
    compact = numpy.cumsum(present) - 1
    keys = numpy.flatnonzero(present)
    len_j = keys % n_len
    rest = keys // n_len
    tri_hh = rest % n_hh - offset
    len_i = rest // n_hh
    starts = numpy.searchsorted(len_i, numpy.arange(n_len + 1))
    th, ht, tt = tri_hh + len_i, tri_hh - len_j, tri_hh + len_i - len_j
    distance_range = (int(min(tri_hh.min(), ht.min(), tt.min())), int(max(tri_hh.max(), th.max(), tt.max())))
    n = heads.shape[1]
    plans: Dict[int, QueryPlan] = {}
    for n_queries in {n, *query_counts}:
        row_len = numpy.where(mask[:, :n_queries], lengths[:, :n_queries], n_len).T.reshape(-1)
        row_head = heads[:, :n_queries].T.reshape(-1)
        order = numpy.argsort(row_len * (offset + 1) + row_head, kind="stable")
        counts = numpy.bincount(row_len, minlength=n_len + 1).tolist()
        runs = head_runs(counts, starts.tolist(), row_head[order].tolist(), tri_hh.tolist(), offset)
        plans[n_queries] = (torch.from_numpy(order), runs)
    t = torch.from_numpy
    return RelativePositions(
        t(compact[key]),
        t(tri_hh),
        t(len_i),
        t(len_j),
        t(lengths),
        t(mask),
        t(starts),
        t(heads),
        offset,
        distance_range=distance_range,
        query_plans=plans,
    )
