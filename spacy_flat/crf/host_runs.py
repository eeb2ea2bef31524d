"""Entity spans from a batch of decoded tag ids by array operations: where each
B…L or U run begins and ends in every row at once, instead of a Python loop over
every character's tag string (`TagSet.decode`)."""

import functools
from typing import Sequence, Tuple

import numpy

from ..decoding.tags import TagSet

# Each run as arrays: its row, its first character, the character after its last, its label's index.
Runs = Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]


@functools.lru_cache(maxsize=16)
def tag_runs(labels: Tuple[str, ...]) -> "TagRuns":
    """RETURNS (TagRuns): The tables of the tag set of `labels`, built once, not per batch."""
    return TagRuns(TagSet(labels))


class TagRuns:
    """The BILUO structure of a tag set as lookup tables over tag ids.

    tag_set (TagSet): The tags.
    """

    def __init__(self, tag_set: TagSet) -> None:
        self.tag_set = tag_set
        roles = numpy.asarray([tag[0] for tag in tag_set.tags])
        self.begins = numpy.isin(roles, list("BU"))
        self.ends = numpy.isin(roles, list("LU"))
        label_index = {label: k for k, label in enumerate(tag_set.labels)}
        self.label = numpy.asarray([label_index.get(tag[2:], -1) for tag in tag_set.tags], dtype="int64")
        n_tags = len(tag_set)
        self.allowed = numpy.zeros((n_tags, n_tags), dtype=bool)
        for prev, nxt in tag_set.allowed_transitions():
            self.allowed[prev, nxt] = True
        self.may_start = numpy.zeros(n_tags, dtype=bool)
        self.may_start[tag_set.allowed_starts()] = True
        self.may_end = numpy.zeros(n_tags, dtype=bool)
        self.may_end[tag_set.allowed_ends()] = True

    def runs(self, paths: numpy.ndarray, lengths: Sequence[int]) -> Runs:
        """The entity runs of every row, in row then position order, as
        `TagSet.decode` reads them row by row.

        paths (numpy.ndarray): (rows, width) tag ids, each row's valid to its length.
        lengths (Sequence[int]): Characters per row.
        """
        sizes = numpy.asarray(lengths, dtype="int64")
        rows, width = paths.shape
        inside = numpy.arange(width)[None, :] < sizes[:, None]
        # A row is valid when every move, its first tag and its last tag are allowed.
        moves = self.allowed[paths[:, :-1], paths[:, 1:]] | ~inside[:, 1:]
        last = paths[numpy.arange(rows), numpy.maximum(sizes - 1, 0)]
        valid = (moves.all(1) & self.may_start[paths[:, 0]] & self.may_end[last]) | (sizes == 0)
        keep = inside & valid[:, None]
        row, first = numpy.nonzero(self.begins[paths] & keep)
        end_row, end = numpy.nonzero(self.ends[paths] & keep)
        # In a valid row each begin pairs with the next end; the label is the
        # ending tag's, as spaCy's `tags_to_entities` reads it.
        runs = (row, first, end + 1, self.label[paths[end_row, end]])
        invalid = numpy.flatnonzero(~valid)
        return runs if not len(invalid) else self._with_invalid(runs, paths, sizes, invalid)

    def _with_invalid(self, runs: Runs, paths: numpy.ndarray, lengths: numpy.ndarray, invalid: numpy.ndarray) -> Runs:
        """`runs` with those of rows that are no valid BILUO sequence, read by
        `TagSet.decode` (which raises where spaCy's reader does)."""
        index = {label: k for k, label in enumerate(self.tag_set.labels)}
        extra = [
            (r, s, e, index[label])
            for r in invalid.tolist()
            for s, e, label in self.tag_set.decode(paths[r, : lengths[r]].tolist())
        ]
        parts = [
            numpy.concatenate([part, numpy.asarray([x[k] for x in extra], dtype=part.dtype)])
            for k, part in enumerate(runs)
        ]
        # By row, each row's runs in the order its reader gave them.
        order = numpy.argsort(parts[0], kind="stable")
        return (parts[0][order], parts[1][order], parts[2][order], parts[3][order])
