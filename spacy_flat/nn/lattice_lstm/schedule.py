"""Where the Lattice LSTM's recurrence (lattice_lstm_recurrence.py) reads each
character and merges each lexicon word, in each direction: the characters in the
order each direction reads them, and the words laid out by the step at which they
end, packed per direction, with the rows they read and write. Built once per
batch, before the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import torch


@dataclass
class Schedule:
    """Where the words merged at each step read and write, built once per batch
    (`word_slots`). Packed words are ordered by
    step, then direction; padding reads row 0 and sums into a row of its own.

    packed (List[int]): per step, the words packed per direction (N_j); 0 where none ends.
    sizes (List[int]): per step where words end, D * N_j.
    state (List[torch.Tensor]): per step where words end, (D * N_j,) int64: the
        state row ((j + 1) * D + d) * B + b of each word's first character (the
        states are kept after a zero state).
    row (List[torch.Tensor]): likewise, the row d * B + b the word ends in; D * B in padding.
    target (torch.Tensor): (P,) int64, each packed word's character row (j * D + d) * B + b.
    word_by_direction (torch.Tensor): (P,) int64, each packed word's row in the word
        terms, ordered by direction, then step.
    target_by_direction (torch.Tensor): (P,) int64, `target` in that order; C * D * B in padding.
    merges (torch.Tensor): (C, D, B, 1) 1.0 where words end (eq. 15), 0.0 where the plain cell holds.
    read (torch.Tensor): (C * D * B,) int64, the input row (o_b + i) * D + d (character
        i of row b, whose characters start at o_b, in direction d) that each state row
        (j * D + d) * B + b reads; padding reads row d, and nothing real depends on it.
    written (torch.Tensor): (B * C * D,) int64, the state row that holds the h of
        character i of row b in direction d, padding included.
    char_states (torch.Tensor): (N_c * D,) int64, `written` for the characters alone:
        the state row each input row was read into.
    """

    packed: List[int]
    sizes: List[int]
    state: List[torch.Tensor]
    row: List[torch.Tensor]
    target: torch.Tensor
    word_by_direction: torch.Tensor
    target_by_direction: torch.Tensor
    merges: torch.Tensor
    read: torch.Tensor
    written: torch.Tensor
    char_states: torch.Tensor


def word_slots(
    rows: torch.Tensor,
    heads: torch.Tensor,
    tails: torch.Tensor,
    lengths: torch.Tensor,
    steps: int,
    batch: int,
    directions: int,
    dtype: torch.dtype,
) -> Schedule:
    """Lay the words out by the step at which each direction merges them: the
    last character left to right, the first one right to left (the rows read
    reversed). One sort, no loop over words; single-character words are dropped.

    RETURNS (Schedule): The characters read and the words merged at each step,
        packed per direction.
    """
    device, n_words = rows.device, rows.shape[0]
    longer = tails > heads
    ids = torch.arange(n_words, device=device)[longer]
    rows, heads, tails = rows[longer], heads[longer], tails[longer]
    end = torch.cat([tails, lengths[rows] - 1 - heads][:directions])
    direction = torch.arange(directions, device=device).repeat_interleave(ids.shape[0])
    group, order = torch.sort(end * directions + direction, stable=True)
    end, direction = end[order], direction[order]
    row, span, word = (t.repeat(directions)[order] for t in (rows, tails - heads, ids))
    # Rank of each word among those its direction merges at its step, from the sorted groups.
    rank = torch.arange(group.shape[0], device=device) - torch.searchsorted(group, group)
    counts = torch.zeros(steps * directions, dtype=torch.long, device=device)
    packed = counts.scatter_reduce(0, group, rank + 1, "amax").view(steps, directions).amax(1)
    start = torch.cumsum(packed, 0) - packed
    total = int(packed.sum())
    step_major = start[end] * directions + direction * packed[end] + rank
    by_direction = direction * total + start[end] + rank
    cell = (end * directions + direction) * batch + row  # where the word is merged

    def laid_out(values: torch.Tensor, where: torch.Tensor, padding: int) -> torch.Tensor:
        return torch.full((directions * total,), padding, device=device).index_copy_(0, where, values)

    word = word * directions + direction  # the word terms' rows, (N_w, D * 3H) viewed as (N_w * D, 3H)
    reading = _reading_rows(lengths, steps, directions)
    sizes = [directions * n for n in packed.tolist() if n]
    return Schedule(
        packed.tolist(),
        sizes,
        laid_out(((end - span + 1) * directions + direction) * batch + row, step_major, 0).split(sizes),
        laid_out(direction * batch + row, step_major, directions * batch).split(sizes),
        laid_out(cell, step_major, 0),
        laid_out(word, by_direction, 0),
        laid_out(cell, by_direction, steps * directions * batch),
        torch.zeros(steps * directions * batch, dtype=dtype, device=device)
        .index_fill_(0, cell, 1)
        .view(steps, directions, batch, 1),
        *reading,
    )


def _reading_rows(
    lengths: torch.Tensor, steps: int, directions: int
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`Schedule.read`, `written` and `char_states`. Each direction reads its row's
    characters left to right, or right to left within the row's length (padding in
    place, after the characters), so one row gather each way replaces padding,
    flips, stacks and transposes."""
    batch, device = lengths.shape[0], lengths.device
    position = torch.arange(steps, device=device)[:, None]
    order = [position.expand(steps, batch)]  # (C, B): the character read at each step
    if directions == 2:
        last = lengths[None, :] - 1
        order.append(torch.where(position <= last, last - position, position))
    char = torch.stack(order, 1)  # (C, D, B)
    direction = torch.arange(directions, device=device)[None, :, None]
    row = torch.arange(batch, device=device)
    first = torch.cumsum(lengths, 0) - lengths
    read = torch.where(char < lengths, (first + char) * directions + direction, direction)
    # Character i of row b, direction d, was read at step char[i, d, b]: reversal is its own inverse.
    written = ((char * directions + direction) * batch + row).permute(2, 0, 1)  # (B, C, D)
    real = lengths[:, None] > position.T  # (B, C)
    return read.reshape(-1), written.reshape(-1), written[real].reshape(-1)
