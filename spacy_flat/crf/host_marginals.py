"""Forward-backward over a linear-chain CRF in float64 NumPy: the log forward
and backward scores from which entity probabilities are read.

Kept apart from `model.py`'s torch modules because it runs on the host after one
copy of the scores, rescaled for speed and redone in log space where float64's
range is passed.
"""

from typing import Tuple

import numpy


def forward_backward(
    scores: numpy.ndarray, lengths: numpy.ndarray, trans: numpy.ndarray, start: numpy.ndarray, end: numpy.ndarray
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Log forward and backward scores and log Z of each row, each row ending at its own length.

    Run in probability space and rescaled at every step, as `ConstrainedCRF.nll`
    runs its forward pass: a step is a (batch, tags) x (tags, tags) matrix product
    with exp(transitions) taken once (forbidden ones exactly 0), where log space
    needs an exp over the whole (batch, tags, tags) block at every step; that made
    the probabilities a quarter of `nlp.pipe` at batch 64. Each step's emissions
    are shifted by the row's best before exp, so float64 holds gaps of ~700.

    RETURNS: alpha and beta (batch, length, tags) in log space, and log Z (batch,).
    """
    batch, length, n_tags = scores.shape
    moves = numpy.exp(trans)
    top = scores.max(2, keepdims=True)
    emitted = numpy.exp(scores - top)
    rows = numpy.arange(batch)
    alpha = numpy.empty((batch, length, n_tags))
    beta = numpy.empty((batch, length, n_tags))
    alpha_scale = numpy.empty((batch, length))
    beta_scale = numpy.empty((batch, length))
    # Scaled values per step and their running log scale; logs are taken once at the end.
    forward, log_scale = _rescaled(numpy.exp(start - start.max())[None] * emitted[:, 0])
    log_scale += start.max() + top[:, 0, 0]
    alpha[:, 0], alpha_scale[:, 0] = forward, log_scale
    for t in range(1, length):
        forward, step_scale = _rescaled((forward @ moves) * emitted[:, t])
        log_scale = log_scale + step_scale + top[:, t, 0]
        alpha[:, t], alpha_scale[:, t] = forward, log_scale
    closing = numpy.exp(end - end.max())
    backward = numpy.broadcast_to(closing, (batch, n_tags)).copy()
    back_scale = numpy.full(batch, end.max())
    last = lengths - 1
    beta[:, length - 1], beta_scale[:, length - 1] = backward, back_scale
    for t in range(length - 2, -1, -1):
        onward, step_scale = _rescaled((emitted[:, t + 1] * backward) @ moves.T)
        # A row's backward pass starts at its own last character.
        ends_here = t >= last
        backward = numpy.where(ends_here[:, None], closing[None], onward)
        back_scale = numpy.where(ends_here, end.max(), back_scale + step_scale + top[:, t + 1, 0])
        beta[:, t], beta_scale[:, t] = backward, back_scale
    with numpy.errstate(divide="ignore"):  # log 0 = -inf: a tag no path reaches
        alpha = numpy.log(alpha) + alpha_scale[:, :, None]
        beta = numpy.log(beta) + beta_scale[:, :, None]
    with numpy.errstate(invalid="ignore"):  # an emptied row gives NaN here, and is redone below
        log_z = _logsumexp(alpha[rows, last] + end[None], 1)
    bad = ~numpy.isfinite(log_z)
    if bad.any():
        # A step whose emission gaps pass float64's range (~745) empties a rescaled
        # row; those rows take the log-space recursion, slower but exact.
        alpha[bad], beta[bad], log_z[bad] = _log_space(scores[bad], lengths[bad], trans, start, end)
    return alpha, beta, log_z


def _log_space(
    scores: numpy.ndarray, lengths: numpy.ndarray, trans: numpy.ndarray, start: numpy.ndarray, end: numpy.ndarray
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """The forward-backward recursion in log space (an exp over (batch, tags, tags) per step)."""
    batch, length, n_tags = scores.shape
    alpha = numpy.empty((batch, length, n_tags))
    beta = numpy.empty((batch, length, n_tags))
    alpha[:, 0] = start[None] + scores[:, 0]
    for t in range(1, length):
        alpha[:, t] = _logsumexp(alpha[:, t - 1, :, None] + trans[None], 1) + scores[:, t]
    last = lengths - 1
    beta[:, length - 1] = end[None]
    for t in range(length - 2, -1, -1):
        onward = _logsumexp(trans[None] + (scores[:, t + 1] + beta[:, t + 1])[:, None, :], 2)
        beta[:, t] = numpy.where((t >= last)[:, None], end[None], onward)
    return alpha, beta, _logsumexp(alpha[numpy.arange(batch), last] + end[None], 1)


def _rescaled(values: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """RETURNS: each row divided by its sum, and the log of that sum."""
    total = values.sum(1)
    safe = numpy.maximum(total, 1e-300)  # an all-zero row stays zero, its scale finite
    return values / safe[:, None], numpy.log(safe)


def _logsumexp(x: numpy.ndarray, axis: int) -> numpy.ndarray:
    top = x.max(axis, keepdims=True)
    return (top + numpy.log(numpy.exp(x - top).sum(axis, keepdims=True))).squeeze(axis)
