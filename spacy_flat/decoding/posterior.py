"""Decoding from tag marginals alone: the best valid tag path under the BILUO
transitions and the boundary rules, scored by log marginals (an ensemble's
prediction, which has no CRF of its own)."""

from typing import List, Optional

import numpy

from .tags import TagSet


def posterior_decode(marginals: numpy.ndarray, tag_set: TagSet, forbidden: Optional[numpy.ndarray] = None) -> List[int]:
    """The valid tag path of greatest Σ_t log p_t(y_t) (Viterbi over log marginals,
    every allowed transition scored 0).

    marginals (numpy.ndarray): (length, n_tags) probabilities.
    forbidden (Optional[numpy.ndarray]): (length, n_tags) bool, tags a character may not take.
    RETURNS (List[int]): The tag ids.
    """
    length, n_tags = marginals.shape
    if length == 0:
        return []
    # Floored, so that a tag the marginals rule out is unlikely, not impossible:
    # only the transitions and `forbidden` make a path invalid, and O is always valid.
    scores = numpy.log(numpy.maximum(marginals.astype("float64"), 1e-30))
    if forbidden is not None:
        scores = numpy.where(forbidden[:length], -numpy.inf, scores)
    moves = numpy.full((n_tags, n_tags), -numpy.inf)
    for i, j in tag_set.allowed_transitions():
        moves[i, j] = 0.0
    starts = numpy.full(n_tags, -numpy.inf)
    starts[tag_set.allowed_starts()] = 0.0
    ends = numpy.full(n_tags, -numpy.inf)
    ends[tag_set.allowed_ends()] = 0.0
    best = starts + scores[0]
    back = numpy.zeros((length, n_tags), dtype="int64")
    for t in range(1, length):
        candidates = best[:, None] + moves
        back[t] = candidates.argmax(0)
        best = candidates.max(0) + scores[t]
    path = [int((best + ends).argmax())]
    for t in range(length - 1, 0, -1):
        path.append(int(back[t, path[-1]]))
    return path[::-1]
