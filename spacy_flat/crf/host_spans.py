"""The probability of each decoded entity's tag run, for a whole batch at once:
the forward-backward of `host_marginals.py` over packed rows (`host_viterbi.Packed`),
with logs taken only where a run begins or ends.

`host_marginals.forward_backward` returns every log alpha and beta; an entity's
probability needs two entries and log Z, and the logs of the rest were a sizeable
part of the work.
"""

from typing import Tuple

import numpy

from .host_marginals import _log_space, _logsumexp
from .host_viterbi import Packed


def span_probabilities(
    scores: numpy.ndarray,
    lengths: numpy.ndarray,
    trans: numpy.ndarray,
    start: numpy.ndarray,
    end: numpy.ndarray,
    runs: Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray],
    temperature: float = 1.0,
) -> numpy.ndarray:
    """The CRF's probability that each run's characters take exactly its tags.

    scores (numpy.ndarray): (rows, width, n_tags) float32 emissions, forbidden tags masked.
    lengths (numpy.ndarray): (rows,) characters per row.
    trans, start, end (numpy.ndarray): float64 potentials, divided by `temperature`.
    runs: (row, first, end, tags) arrays: each run's row, its first character
        and the character after its last, and a (rows, width) array of tag ids
        whose [first, end) part of the row is the run's tags.
    temperature (float): Divides every emission, as it divided the potentials.
    RETURNS (numpy.ndarray): (runs,) float64, each min(1, p), as the per-run
        sum of `ConstrainedCRF.run_probabilities` computes it.
    """
    row, first, stop, tags = runs
    if not len(row):
        return numpy.zeros(0)
    # Only the rows with runs, and of those only their characters, are read.
    used, local = numpy.unique(row, return_inverse=True)
    sub_scores, sub_lengths = scores[used], numpy.asarray(lengths)[used]
    head, tail = tags[row, first], tags[row, stop - 1]
    alpha, beta, log_z = _run_ends(
        sub_scores, sub_lengths, temperature, trans, start, end, local, first, stop - 1, head, tail
    )
    bad = ~numpy.isfinite(log_z)
    if bad.any():
        # A step whose emission gaps pass float64's range (~745) empties a rescaled
        # row; those rows take the log-space recursion, slower but exact.
        redo = numpy.flatnonzero(bad)
        wide = sub_scores[redo].astype("float64") / temperature
        full_alpha, full_beta, full_z = _log_space(wide, sub_lengths[redo], trans, start, end)
        log_z[redo] = full_z
        hit = numpy.isin(local, redo)
        at = numpy.searchsorted(redo, local[hit])
        alpha[hit] = full_alpha[at, first[hit], head[hit]]
        beta[hit] = full_beta[at, stop[hit] - 1, tail[hit]]
    inner = _inner_scores(scores, temperature, trans, row, first, stop, tags)
    log_p = alpha + inner + beta - log_z[local]
    # fmin, not minimum: a NaN gives 1.0, as Python's min(1.0, p) did.
    return numpy.fmin(1.0, numpy.exp(log_p))


def _inner_scores(
    scores: numpy.ndarray,
    temperature: float,
    trans: numpy.ndarray,
    row: numpy.ndarray,
    first: numpy.ndarray,
    stop: numpy.ndarray,
    tags: numpy.ndarray,
) -> numpy.ndarray:
    """Each run's moves and emissions after its first character, added one
    character at a time in the order a per-run Python sum adds them."""
    inner = numpy.zeros(len(row))
    width = tags.shape[1]
    for k in range(1, int((stop - first).max())):
        going = first + k < stop
        at = numpy.minimum(first + k, width - 1)
        now, before = tags[row, at], tags[row, at - 1]
        emitted = scores[row, at, now].astype("float64") / temperature
        inner += numpy.where(going, trans[before, now] + emitted, 0.0)
    return inner


def _run_ends(
    scores: numpy.ndarray,
    lengths: numpy.ndarray,
    temperature: float,
    trans: numpy.ndarray,
    start: numpy.ndarray,
    end: numpy.ndarray,
    local: numpy.ndarray,
    first: numpy.ndarray,
    last: numpy.ndarray,
    head: numpy.ndarray,
    tail: numpy.ndarray,
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """log alpha at each run's first character and tag, log beta at its last,
    and each row's log Z, by `host_marginals.forward_backward`'s rescaled recursion.

    The forward pass runs longest row first; the backward pass has every row
    aligned at its own last character, so at step t both are prefixes of the
    packed rows and one step does both: a stacked product with exp(trans) and
    its transpose, one rescaling. The backward half carries its emissions
    multiplied in ahead of the product, as the backward recursion takes them.
    Each step's scale is kept and its log taken once after the loop; the logs
    are summed in the recursion's order (`_running_scales`). Only the rows'
    characters are stored (`Packed` cells), never their padding.
    """
    rows, _, n_tags = scores.shape
    packed = Packed.of(lengths)
    at, active = packed.offsets, packed.active
    wide = packed.gather(scores).astype("float64") / temperature  # (cells, tags)
    top = wide.max(1, keepdims=True)
    emitted = numpy.exp(wide - top)
    top = top[:, 0]
    final = packed.lengths - 1
    # Step s of the backward pass is character (last - s) of each row.
    back = packed.cells(packed.cell_rows, final[packed.cell_rows] - packed.cell_steps)
    back_emitted = emitted[back]
    # The backward step s adds the top of the character after it (step s - 1's); step 0 none.
    rows_last = final[packed.cell_rows]
    after = packed.cells(packed.cell_rows, numpy.minimum(rows_last - packed.cell_steps + 1, rows_last))
    back_top = numpy.where(packed.cell_steps > 0, top[after], 0.0)
    moves = numpy.exp(trans)
    pair = numpy.stack([moves, moves.T])
    # (forward or backward, cell, tag): the rescaled alpha and beta, and their scales.
    scaled = numpy.empty((2, len(wide), n_tags))
    scales = numpy.ones((2, len(wide)))
    opening = numpy.exp(start - start.max())[None] * emitted[:rows]
    scales[0, :rows] = numpy.maximum(opening.sum(1), 1e-300)
    scaled[0, :rows] = opening / scales[0, :rows, None]
    scaled[1, :rows] = numpy.exp(end - end.max())[None]
    state = scaled[:, :rows].copy()
    state[1] *= back_emitted[:rows]
    for t in range(1, packed.longest):
        k, here = active[t], at[t]
        step = numpy.matmul(state[:, :k], pair)
        step[0] *= emitted[here : here + k]
        total = numpy.maximum(step.sum(2), 1e-300, out=scales[:, here : here + k])  # an emptied row stays finite
        step /= total[:, :, None]
        scaled[:, here : here + k] = step
        state[0, :k] = step[0]
        numpy.multiply(step[1], back_emitted[here : here + k], out=state[1, :k])
    alpha_scale = _running_scales(packed, scales[0], numpy.full(rows, start.max()), top)
    # The backward pass starts unscaled (its step 0 has no log: log 1 = 0) at end.max().
    beta_scale = _running_scales(packed, scales[1], numpy.full(rows, end.max()), back_top)
    where = numpy.empty_like(packed.order)
    where[packed.order] = numpy.arange(rows)
    run_rows = where[local]
    start_cells = packed.cells(run_rows, first)
    end_cells = packed.cells(run_rows, final[run_rows] - last)
    closing_cells = packed.cells(where, final[where])
    with numpy.errstate(divide="ignore"):  # log 0 = -inf: a tag no path reaches
        alpha_at = numpy.log(scaled[0, start_cells, head]) + alpha_scale[start_cells]
        beta_at = numpy.log(scaled[1, end_cells, tail]) + beta_scale[end_cells]
        closing = numpy.log(scaled[0, closing_cells]) + alpha_scale[closing_cells][:, None]
    with numpy.errstate(invalid="ignore"):  # an emptied row gives NaN here, and is redone
        log_z = _logsumexp(closing + end[None], 1)
    return alpha_at, beta_at, log_z


def _running_scales(
    packed: Packed, scales: numpy.ndarray, opening: numpy.ndarray, tops: numpy.ndarray
) -> numpy.ndarray:
    """(cells,) each cell's log scale: at step 0 the step's log plus (opening + top),
    then the previous scale plus the step's log, plus its top: added one at a time
    in the recursion's order (an accumulate along each row, which is sequential)."""
    rows, steps = len(packed.order), packed.longest
    terms = numpy.zeros((rows, 2 * steps))
    with numpy.errstate(divide="ignore"):
        terms[packed.cell_rows, 2 * packed.cell_steps] = numpy.log(scales)
    terms[packed.cell_rows, 2 * packed.cell_steps + 1] = tops
    terms[:, 1] += opening
    return numpy.add.accumulate(terms, axis=1)[packed.cell_rows, 2 * packed.cell_steps + 1]
