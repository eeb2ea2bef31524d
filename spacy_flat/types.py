"""Type aliases shared across the package."""

from typing import NamedTuple, Tuple, Union

import numpy

# A character span: (start, end_exclusive, label).
CharSpan = Tuple[int, int, str]
# A character span with the CRF's probability of it: (start, end_exclusive, label, probability).
ScoredSpan = Tuple[int, int, str, float]


class TopPaths(NamedTuple):
    """A teacher's best tag paths through one segment, with their probabilities.

    paths (numpy.ndarray): (k, length) tag ids, most probable first.
    probabilities (numpy.ndarray): (k,) float32, summing to 1 (empty for an empty segment).
    """

    paths: numpy.ndarray
    probabilities: numpy.ndarray


# What a teacher gives a student for one segment: (length, n_tags) tag marginals, or its best paths.
SoftTarget = Union[numpy.ndarray, TopPaths]
