"""Rows of different lengths, recursed over together: the layout the CRF's
NumPy recursions (Viterbi, forward-backward) share.

Rows are sorted longest first, so the rows still running at step t are always
a prefix of the batch (`active[t]` of them). One loop over the longest row then
serves the whole batch, with no step spent on padding and no row masked:
bucketing rows by length (as before) paid a Python loop per bucket and still
ran each bucket to its longest row.
"""

from dataclasses import dataclass

import numpy


@dataclass(frozen=True)
class Packed:
    """The longest-first order of a batch's rows, how many run at each step, and
    their cells: (step, row) pairs laid out step after step, each step's rows
    contiguous, so a step reads and writes one slice and no padding is stored.

    order (numpy.ndarray): (rows,) the batch's rows, longest first (stable).
    lengths (numpy.ndarray): (rows,) int64, the lengths in that order.
    active (numpy.ndarray): (longest,) the rows longer than t, for each step t.
    offsets (numpy.ndarray): (longest + 1,) where each step's cells begin.
    cell_rows, cell_steps (numpy.ndarray): (cells,) each cell's packed row and step.
    """

    order: numpy.ndarray
    lengths: numpy.ndarray
    active: numpy.ndarray
    offsets: numpy.ndarray
    cell_rows: numpy.ndarray
    cell_steps: numpy.ndarray

    @classmethod
    def of(cls, lengths: numpy.ndarray) -> "Packed":
        """lengths (numpy.ndarray): (rows,) characters per row; rows of 0 never run."""
        lengths = numpy.asarray(lengths, dtype="int64")
        order = numpy.argsort(-lengths, kind="stable")
        ordered = lengths[order]
        longest = int(ordered[0]) if len(ordered) else 0
        # Ascending negated lengths: the rows longer than t come before -t.
        active = numpy.searchsorted(-ordered, -numpy.arange(longest), side="left")
        offsets = numpy.concatenate([[0], numpy.cumsum(active)])
        steps = numpy.repeat(numpy.arange(longest), active)
        rows = numpy.arange(len(steps)) - numpy.repeat(offsets[:-1], active)
        return cls(order, ordered, active, offsets, rows, steps)

    @property
    def longest(self) -> int:
        return int(self.active.shape[0])

    def gather(self, values: numpy.ndarray) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): (cells, ...) the (row, step) entries of `values`
        (rows, width, ...) at every cell."""
        return values[self.order[self.cell_rows], self.cell_steps]

    def cells(self, rows: numpy.ndarray, steps: numpy.ndarray) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): The cells of packed `rows` at `steps`."""
        return self.offsets[steps] + rows

    def unsort(self, values: numpy.ndarray) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): Per-row `values` (longest-first order) back in batch order."""
        out = numpy.empty_like(values)
        out[self.order] = values
        return out


def viterbi_paths(
    scores: numpy.ndarray, lengths: numpy.ndarray, trans: numpy.ndarray, start: numpy.ndarray, end: numpy.ndarray
) -> numpy.ndarray:
    """Best tag sequence of every row, by pytorch-crf's Viterbi recursion in NumPy:
    each row's arithmetic is that of the recursion run on the row alone.

    scores (numpy.ndarray): (rows, width, n_tags) float32 emissions, forbidden tags already masked.
    lengths (numpy.ndarray): (rows,) characters per row, each <= width.
    trans, start, end (numpy.ndarray): The CRF's float32 potentials, forbidden moves masked.
    RETURNS (numpy.ndarray): (rows, width) int32 tag ids, each row's valid to its length (0 after).
    """
    rows, width, _ = scores.shape
    packed = Packed.of(lengths)
    paths = numpy.zeros((rows, width), dtype="int32")
    if packed.longest == 0:
        return paths
    at, active = packed.offsets, packed.active
    emitted = packed.gather(scores)
    # Each step's best scores are kept for the backtrace, which recomputes the
    # one argmax it needs per row rather than the forward pass taking every
    # tag's argmax (the largest part of a step).
    best = numpy.empty_like(emitted)
    best[: active[0]] = start[None, :] + emitted[: active[0]]
    for t in range(1, packed.longest):
        k, here, before = active[t], at[t], at[t - 1]
        # (prev, row, next), reduced over its first axis: NumPy takes a maximum of
        # whole (row, next) planes there, several times faster than the reduction
        # along a short last axis of (row, next, prev). max is exact, so the
        # result is the same either way.
        candidates = best[before : before + k].T[:, :, None] + trans[:, None, :]
        best[here : here + k] = candidates.max(0) + emitted[here : here + k]
    filled = numpy.arange(active[0])
    closing = best[packed.cells(filled, packed.lengths[filled] - 1)] + end[None, :]
    current = closing.argmax(1).astype("int32")
    # Backtrace over the batch at once: a row joins at its own last character.
    # The argmax over (best at t - 1) + (move into the tag at t) is the one
    # the recursion took there, ties to the first tag as pytorch-crf's.
    moves = numpy.ascontiguousarray(trans.T)  # (next, prev)
    for t in range(packed.longest - 1, 0, -1):
        k, before = active[t], at[t - 1]
        paths[:k, t] = current[:k]
        current[:k] = (best[before : before + k] + moves[current[:k]]).argmax(1)
    paths[filled, 0] = current
    return packed.unsort(paths)
