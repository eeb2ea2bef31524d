"""A CRF's K best tag paths (K-best Viterbi), and the loss that distils a
teacher's best paths into a student.

Top-K distillation (Wang et al., ACL 2020, "Structure-Level Knowledge
Distillation for Multilingual Sequence Labeling", their weighted variant
Top-WK): the teacher's K best paths y_1..y_K, each weighted by its probability
under the teacher renormalised over the K, p_k = exp(s_k / T) / Σ_j exp(s_j / T)
(the CRF's own p(y_k) divided by their sum: Z cancels, so this is the softmax of
the path scores, as the authors' code computes it); the student minimises
Σ_k p_k · NLL_student(y_k). With K = 1 that is training on the teacher's
Viterbi path. The marginals (`posteriors.py`) see the teacher's distribution
character by character; these paths see whole sequences, but only K of them.
"""

from typing import Optional, Tuple

import numpy
import torch

from .model import ConstrainedCRF


def k_best_paths(
    scores: numpy.ndarray,
    lengths: numpy.ndarray,
    trans: numpy.ndarray,
    start: numpy.ndarray,
    end: numpy.ndarray,
    k: int,
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """The K highest-scoring tag paths of every row, best first, by the Viterbi
    recursion keeping the K best partial paths that end in each tag.

    Each (tag, rank) entry at step t extends one (tag, rank) entry of step t - 1,
    so the K entries kept per tag are K different paths, and the K best over the
    last step's tags are the K best paths. Ties go to the lower (tag, rank), so
    the result is deterministic. A row with fewer than K allowed paths gets all
    of them; the rest score -inf.

    scores (numpy.ndarray): (rows, width, n_tags) emissions, forbidden tags -inf.
    lengths (numpy.ndarray): (rows,) characters per row, each <= width.
    trans, start, end (numpy.ndarray): The CRF's potentials, forbidden moves -inf.
    k (int): How many paths.
    RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): (rows, k, width) int32 tag ids,
        each path valid to its row's length (0 after), and (rows, k) float64 path
        scores (start + emissions + transitions + end).
    """
    if k < 1:
        raise ValueError(f"k must be 1 or more, got {k}")
    rows, width, n_tags = scores.shape
    lengths = numpy.asarray(lengths, dtype="int64")
    paths = numpy.zeros((rows, k, width), dtype="int32")
    totals = numpy.full((rows, k), -numpy.inf)
    if rows == 0 or width == 0 or not lengths.any():
        return paths, totals
    scores = scores.astype("float64")
    # best[b, t, y, r]: the r-th best score of a path ending in tag y at t;
    # back[b, t, y, r]: the entry of step t - 1 it extends, as tag * k + rank.
    best = numpy.full((rows, width, n_tags, k), -numpy.inf)
    back = numpy.zeros((rows, width, n_tags, k), dtype="int64")
    best[:, 0, :, 0] = start[None] + scores[:, 0]
    for t in range(1, width):
        # (rows, prev, rank, next) -> (rows, next, prev * k + rank)
        candidates = (best[:, t - 1, :, :, None] + trans[None, :, None, :]).transpose(0, 3, 1, 2)
        candidates = candidates.reshape(rows, n_tags, n_tags * k)
        order = numpy.argsort(-candidates, axis=2, kind="stable")[:, :, :k]
        best[:, t] = numpy.take_along_axis(candidates, order, 2) + scores[:, t, :, None]
        back[:, t] = order
    filled = numpy.flatnonzero(lengths > 0)
    last = lengths[filled] - 1
    closing = (best[filled, last] + end[None, :, None]).reshape(len(filled), n_tags * k)
    order = numpy.argsort(-closing, axis=1, kind="stable")[:, :k]
    totals[filled] = numpy.take_along_axis(closing, order, 1)
    # Backtrace every row and rank at once; a row joins at its own last character.
    tags, ranks = numpy.divmod(order, k)
    for t in range(int(last.max()), -1, -1):
        on = last >= t
        paths[filled[on], :, t] = tags[on]
        if t > 0:
            came = back[filled[on][:, None], t, tags[on], ranks[on]]
            tags[on], ranks[on] = numpy.divmod(came, k)
    # A row with fewer than k allowed paths: the missing ones hold tag 0 throughout.
    paths[~numpy.isfinite(totals)] = 0
    return paths, totals


def crf_k_best(
    crf: ConstrainedCRF,
    scores: numpy.ndarray,
    lengths: numpy.ndarray,
    k: int,
    forbidden: Optional[numpy.ndarray] = None,
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """`k_best_paths` under the CRF's allowed transitions, starts and ends and,
    where given, the tags each character may not take (the constraints of `viterbi`).

    scores (numpy.ndarray): (rows, width, n_tags) emissions.
    forbidden (Optional[numpy.ndarray]): (rows, >= width, n_tags) bool, tags a character may not take.
    RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): As `k_best_paths`.
    """
    # -inf rather than FORBIDDEN: a path through a forbidden move is no path at
    # all, so a row with fewer than k allowed paths gets no forbidden ones.
    with torch.no_grad():
        trans = crf.raw_transitions.double().masked_fill(crf.forbidden, -numpy.inf).cpu().numpy()
        start = crf.raw_start_transitions.double().masked_fill(crf.no_start, -numpy.inf).cpu().numpy()
        end = crf.raw_end_transitions.double().masked_fill(crf.no_end, -numpy.inf).cpu().numpy()
    emitted = numpy.asarray(scores, dtype="float64")
    if forbidden is not None:
        emitted = numpy.where(forbidden[:, : emitted.shape[1]], -numpy.inf, emitted)
    return k_best_paths(emitted, lengths, trans, start, end, k)


def top_paths_loss(
    crf: ConstrainedCRF,
    emissions: torch.Tensor,
    mask: torch.Tensor,
    paths: torch.Tensor,
    weights: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Summed Σ_k w_k · NLL(y_k) of every row's weighted paths under the CRF,
    both its potentials divided by T, times T² (as `soft_target_loss`, so one
    temperature means the same for either kind of target).

    A row's NLLs share its log Z, so the forward algorithm runs once per row
    however many paths it has; each path adds one gather (`ConstrainedCRF.nll`'s).

    emissions (torch.Tensor): (batch, length, n_tags) scores.
    mask (torch.Tensor): (batch, length) bool, each row a non-empty prefix of True.
    paths (torch.Tensor): (batch, k, length) long tag ids; padding may hold any valid id.
    weights (torch.Tensor): (batch, k) each path's weight, 0 for a row's missing paths.
    RETURNS (torch.Tensor): The scalar loss.
    """
    batch, k, length = paths.shape
    with torch.autocast(device_type=emissions.device.type, enabled=False):
        scaled = emissions.float().masked_fill(~mask[:, :, None], 0.0) / temperature
        transitions = crf.transitions / temperature
        start = crf.start_transitions / temperature
        end = crf.end_transitions / temperature
        last = mask.sum(1) - 1
        log_z = ConstrainedCRF._log_partition(scaled, transitions, start, end, last)
        path_scores = ConstrainedCRF._gold_score(
            scaled.repeat_interleave(k, 0),
            paths.reshape(batch * k, length),
            mask.repeat_interleave(k, 0),
            transitions,
            start,
            end,
            last.repeat_interleave(k),
        ).view(batch, k)
        nll = log_z[:, None] - path_scores
        return (weights.to(nll.dtype) * nll).sum() * temperature**2
