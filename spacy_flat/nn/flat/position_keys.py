"""FLAT's projected position rows R W_kR, kept between prediction batches on a CPU.

R_ij depends on its triple (hh, l_i, l_j) and the weights only, so in prediction the
rows a batch needs recur from batch to batch. A batch of Resume or MSRA test documents
holds about 3.3 distinct triples a token, and fusing them (`PositionFusion`) and
projecting them by each layer's W_kR cost about a sixth of `nlp.pipe` on one CPU thread.
Here each layer keeps the projected rows of every (l_i, l_j) pair it has met, a block over
hh in [-reach, reach], and a batch's rows are one `index_select`. A block is computed on
its own, so its values never depend on which batch asked for it first.

Training computes the rows per batch as before (they need gradients), and so does a GPU,
where the position term is a small share and looking blocks up would read sizes back.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from .positions import PositionFusion, RelativePositions, covering_reach

# Bound on one layer's kept rows (their storage), in bytes: past it the rows are dropped and
# rebuilt for the batch at hand. Resume's and MSRA's test sets need 60-100 blocks of 513 x 160 floats (20-33 MB).
KEY_CACHE_BYTES = 64 << 20
# The smallest reach of hh kept (`position.covering_reach`'s).
MIN_REACH = covering_reach(0)


@dataclass
class _Kept:
    identity: tuple
    reach: int
    blocks: Dict[Tuple[int, int], int]  # (l_i, l_j) -> block number
    table: torch.Tensor  # (n_lengths, n_lengths) int64 block number, -1 where none
    rows: torch.Tensor  # (blocks * (2 reach + 1), width)


class PositionKeyCache:
    """One layer's projected position rows, by (l_i, l_j) block. Not part of the
    model's weights: never saved, and dropped when the model is pickled or copied.
    Readers need no lock (a published `_Kept` is never changed where they read);
    adding blocks takes one, so two threads never write the same spare rows."""

    def __init__(self, budget: int = KEY_CACHE_BYTES) -> None:
        self.budget = budget
        self._kept: Optional[_Kept] = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        """Pickle the budget only: the rows are rebuilt where they are used."""
        return {"budget": self.budget}

    def __setstate__(self, state: dict) -> None:
        self.budget = state["budget"]
        self._kept = None
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> PositionKeyCache:
        """A copy without the rows (a copy of the model may change its weights)."""
        return PositionKeyCache(self.budget)

    def clear(self) -> None:
        """Drop the kept rows (training changes the weights; a GPU does not use them)."""
        self._kept = None

    def keys(self, pos: RelativePositions, fusion: PositionFusion, w_kr: nn.Linear) -> torch.Tensor:
        """W_kR R of each of the batch's triples, in the order of `pos.hh`.

        RETURNS (torch.Tensor): (n_triples, width) rows.
        """
        identity = _identity(fusion, w_kr)
        reach = covering_reach(pos.max_head)
        n_lengths = int(pos.query_length_start.shape[0]) - 1
        pairs = torch.unique(pos.len_i * n_lengths + pos.len_j).tolist()
        needed = [(key // n_lengths, key % n_lengths) for key in pairs]
        kept = self._kept
        if kept is None or kept.identity != identity or kept.reach < reach or not kept.blocks.keys() >= set(needed):
            with self._lock:
                kept = self._added(identity, reach, needed, fusion, w_kr)
            if kept is None:  # this batch alone needs more than the budget
                return w_kr(fusion(pos))
        block = kept.table[pos.len_i, pos.len_j]
        return kept.rows.index_select(0, block * (2 * kept.reach + 1) + pos.hh + kept.reach)

    def _added(
        self, identity: tuple, reach: int, needed: List[Tuple[int, int]], fusion: PositionFusion, w_kr: nn.Linear
    ) -> Optional[_Kept]:
        """The kept rows with the `needed` blocks in, published (under the lock); None where
        the needed blocks alone pass the budget (nothing kept then)."""
        kept = self._kept
        if kept is None or kept.identity != identity or kept.reach < reach:
            kept = _empty(identity, reach, w_kr)
        missing = [pair for pair in needed if pair not in kept.blocks]
        block_bytes = (2 * kept.reach + 1) * w_kr.out_features * w_kr.weight.element_size()
        if len(needed) * block_bytes > self.budget:
            self._kept = None
            return None
        if (len(kept.blocks) + len(missing)) * block_bytes > self.budget:
            # Start again from this batch's blocks.
            kept = _empty(identity, kept.reach, w_kr)
            missing = needed
        if missing:
            at_most = self.budget // block_bytes
            reach_now = kept.reach
            kept = _grown(kept, missing, lambda a, b: _block(fusion, w_kr, reach_now, a, b), at_most)
        self._kept = kept
        return kept


def _identity(fusion: PositionFusion, w_kr: nn.Linear) -> tuple:
    """What the kept rows were computed from: the weights (by storage and version, which an
    optimizer step, swapped-in averages or loaded weights change), their type and device,
    and whether autocast is on (rows built under it are half precision)."""
    w_r, kind = fusion.w_r, w_kr.weight.device.type
    return (
        tuple((t.data_ptr(), t._version) for t in (w_r.weight, w_r.bias, w_kr.weight)),
        w_kr.weight.dtype,
        w_kr.weight.device,
        fusion.head_only,
        torch.is_autocast_enabled(kind),
        torch.get_autocast_dtype(kind),
    )


def _empty(identity: tuple, reach: int, w_kr: nn.Linear) -> _Kept:
    """No rows yet, for these weights and this reach."""
    table = torch.full((0, 0), -1, dtype=torch.long, device=w_kr.weight.device)
    return _Kept(identity, reach, {}, table, w_kr.weight.new_zeros(0, 0))


def _block(fusion: PositionFusion, w_kr: nn.Linear, reach: int, len_i: int, len_j: int) -> torch.Tensor:
    """The projected rows of (hh, len_i, len_j) for hh = -reach..reach."""
    device = w_kr.weight.device
    hh = torch.arange(-reach, reach + 1, device=device)
    lengths = (torch.full_like(hh, len_i), torch.full_like(hh, len_j))
    lo, hi = -reach - len_j, reach + len_i
    return w_kr(fusion.fuse(hh, *lengths, (lo, hi)))


def _grown(
    kept: _Kept, missing: List[Tuple[int, int]], build: Callable[[int, int], torch.Tensor], at_most: int
) -> _Kept:
    """`kept` with the blocks of the `missing` (l_i, l_j) pairs added. The rows' storage grows
    by doubling up to `at_most` blocks, so a block is copied a few times at most; rows already
    kept are never written, so a reader holding the old object sees the same values."""
    blocks = dict(kept.blocks)
    built = [build(*pair) for pair in missing]
    size, width = built[0].shape
    used = len(kept.blocks) * size
    rows = kept.rows
    if rows.shape[0] < used + len(built) * size or rows.shape[1] != width:
        capacity = max(min(2 * rows.shape[0], at_most * size), used + len(built) * size)
        grown = built[0].new_empty(capacity, width)
        if used:
            grown[:used] = rows[:used]
        rows = grown
    for pair, block in zip(missing, built):
        blocks[pair] = len(blocks)
        rows[blocks[pair] * size : (blocks[pair] + 1) * size] = block
    n_lengths = max(max(a, b) for a, b in blocks) + 1
    table = torch.full((n_lengths, n_lengths), -1, dtype=torch.long, device=rows.device)
    for (a, b), number in blocks.items():
        table[a, b] = number
    return _Kept(kept.identity, kept.reach, blocks, table, rows)
