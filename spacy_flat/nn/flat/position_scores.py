"""The position half of FLAT's attention scores, (q_i + v) . R_ij W_kR, as one autograd function.

A query of span length a only meets triples with l_i = a, a contiguous block of
the triple table (`RelativePositions.query_length_start`), and with head h only
those with hh in [h - max_head, h], a contiguous run inside it (the table is
ordered l_i, hh, l_j); so the scores of a run of queries are a matmul against the
triples their heads can meet, followed by a gather of each pair's triple. Written
with plain torch ops, `gather` keeps its whole input for backward: for the
character rows that block is heads x characters x triples, several times the
attention matrix, and it made a 300-character training batch of 10 peak at
~0.9 GB in the forward pass alone. This function keeps only the queries, the
block table and the pair index, and rebuilds each chunk's block gradient in
backward, one chunk at a time.
"""

from __future__ import annotations

import bisect
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch.autograd.function import once_differentiable

from .positions import RelativePositions, Run

# Bound on the transient (heads x rows x triples) block, in elements: rows are
# processed in chunks under this size, forward and backward.
POSITION_SCORE_BUDGET = 1 << 23
# A length's query rows are cut into this many runs of heads: a run of heads h0..h1 meets the triples
# with hh in [h0 - max_head, h1] only, about (1 + 1/splits) / 2 of the length's block, at the cost of
# more and smaller matmuls; groups of fewer rows than MIN_ROWS_TO_SPLIT stay whole.
HEAD_SPLITS = 8
MIN_ROWS_TO_SPLIT = 128

# (first triple row, end triple row, query rows) of one chunk.
Chunk = Tuple[int, int, torch.Tensor]


def position_scores(qv: torch.Tensor, rk: torch.Tensor, pos: RelativePositions) -> torch.Tensor:
    """(q_i + v) . RK[index(i, j)] for every pair.

    qv (torch.Tensor): (B, H, n_q, hw) queries plus v, already scaled.
    rk (torch.Tensor): (H, hw, n_triples) the triple table projected by W_kR.
    pos (RelativePositions): the pair index (B, n_q, n) and its length blocks.
    RETURNS (torch.Tensor): (B, H, n_q, n) scores; rows of padded queries are zero.
    """
    batch, heads, n_q, hw = qv.shape
    n_k = pos.index.shape[2]
    flat_q = qv.permute(2, 0, 1, 3).reshape(n_q * batch, heads, hw)
    flat_index = pos.index.transpose(0, 1).reshape(n_q * batch, n_k)
    out = _PositionScores.apply(flat_q, rk, flat_index, _plan_chunks(pos, heads))
    return out.view(n_q, batch, heads, n_k).permute(1, 2, 0, 3)


def _plan_chunks(pos: RelativePositions, heads: int) -> List[Chunk]:
    """Group the (position-major) query rows by span length, cut each group into runs of
    heads (`HEAD_SPLITS`), each scored against the triples its heads can meet only, then
    cut each run into chunks whose block stays under POSITION_SCORE_BUDGET. A plan made
    on the host (`position_plan.py`) is taken as it is; otherwise the rows are sorted on
    the device and their sizes read back."""
    n_queries = pos.index.shape[1]
    planned = pos.query_plans.get(n_queries) if pos.query_plans is not None else None
    if planned is not None:
        order, runs = planned
    else:
        n_len = pos.query_length_start.shape[0] - 1
        # Padded rows get the key n_len, past every group, and are never scored.
        row_len = pos.lengths.masked_fill(~pos.mask, n_len).transpose(0, 1).reshape(-1)
        row_head = pos.heads.transpose(0, 1).reshape(-1)
        order = torch.argsort(row_len * (pos.max_head + 1) + row_head)
        runs = head_runs(
            torch.bincount(row_len, minlength=n_len + 1).tolist(),
            pos.query_length_start.tolist(),
            row_head[order].tolist(),
            pos.hh.tolist(),
            pos.max_head,
        )
    chunks: List[Chunk] = []
    for v0, v1, r0, r1 in runs:
        step = max(1, POSITION_SCORE_BUDGET // max(1, heads * (v1 - v0)))
        chunks.extend((v0, v1, order[c0 : min(c0 + step, r1)]) for c0 in range(r0, r1, step))
    return chunks


def head_runs(
    counts: Sequence[int], starts: Sequence[int], sorted_heads: Sequence[int], triple_hh: Sequence[int], max_head: int
) -> List[Run]:
    """The runs of query rows sorted by (span length, head), each with the stretch of the
    triple table its heads can meet.

    counts (Sequence[int]): Query rows of each span length (padded rows last, uncounted).
    starts (Sequence[int]): First triple row of each query length (`query_length_start`).
    sorted_heads (Sequence[int]): The heads of the sorted query rows.
    triple_hh (Sequence[int]): hh of each triple row.
    RETURNS (List[Run]): (first triple, end triple, first row, end row) of each run.
    """
    head_range = max_head + 1
    runs: List[Run] = []
    offset = 0
    for a in range(len(starts) - 1):
        count = counts[a]
        if not count:
            continue
        u0, u1 = starts[a], starts[a + 1]
        group_heads, group_hh = sorted_heads[offset : offset + count], triple_hh[u0:u1]
        splits = HEAD_SPLITS if count >= MIN_ROWS_TO_SPLIT else 1
        width = -(-head_range // splits)
        first = 0
        while first < count:
            low = group_heads[first]
            end = bisect.bisect_right(group_heads, low + width - 1, first)
            # A query with head h meets keys with heads 0..max_head: hh in [h - max_head, h].
            v0 = u0 + bisect.bisect_left(group_hh, low - max_head)
            v1 = u0 + bisect.bisect_right(group_hh, group_heads[end - 1])
            runs.append((v0, v1, offset + first, offset + end))
            first = end
        offset += count
    return runs


def _block_index(flat_index: torch.Tensor, u0: int, u1: int, rows: torch.Tensor) -> torch.Tensor:
    """Each pair's triple as an offset into its row's block. A padded query row is never
    in a chunk; a padded key's triple is a real one (`position.pair_keys`), in the block
    of its query's run; the clamp keeps any other index inside, and its score is masked."""
    return (flat_index.index_select(0, rows) - u0).clamp_(0, u1 - u0 - 1)


class _PositionScores(torch.autograd.Function):
    # Under mixed precision (thinc autocasts on CUDA) the term runs in float32:
    # its gather writes into a float32 buffer, and the sums are long.
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(
        ctx: Any, flat_q: torch.Tensor, rk: torch.Tensor, flat_index: torch.Tensor, chunks: List[Chunk]
    ) -> torch.Tensor:
        """flat_q (R, H, hw), rk (H, hw, U), flat_index (R, n) → (R, H, n)."""
        heads = flat_q.shape[1]
        out = flat_q.new_zeros(flat_q.shape[0], heads, flat_index.shape[1])
        for u0, u1, rows in chunks:
            block = torch.matmul(flat_q.index_select(0, rows).transpose(0, 1), rk[:, :, u0:u1])  # H c U
            idx = _block_index(flat_index, u0, u1, rows)
            out.index_copy_(0, rows, block.gather(-1, idx[None].expand(heads, -1, -1)).transpose(0, 1))
        ctx.save_for_backward(flat_q, rk, flat_index)
        ctx.chunks = chunks
        return out

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor], None, None]:
        flat_q, rk, flat_index = ctx.saved_tensors
        need_q, need_rk = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_q = torch.zeros_like(flat_q) if need_q else None
        grad_rk = torch.zeros_like(rk) if need_rk else None
        heads = flat_q.shape[1]
        for u0, u1, rows in ctx.chunks:
            g = grad.index_select(0, rows).transpose(0, 1)  # H c n
            idx = _block_index(flat_index, u0, u1, rows)
            block = g.new_zeros(heads, rows.shape[0], u1 - u0)
            block.scatter_add_(-1, idx[None].expand(heads, -1, -1), g)
            if grad_q is not None:
                # Rows are disjoint across chunks, so a copy is enough.
                grad_q.index_copy_(0, rows, torch.matmul(block, rk[:, :, u0:u1].transpose(1, 2)).transpose(0, 1))
            if grad_rk is not None:
                q_rows = flat_q.index_select(0, rows).permute(1, 2, 0)  # H hw c
                grad_rk[:, :, u0:u1] += torch.matmul(q_rows, block)
        return grad_q, grad_rk, None, None
