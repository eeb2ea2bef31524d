"""spacy-flat.batch_by_length.v1: like lengths together, a fixed count a batch, nothing lost."""

import random

import pytest
from spacy.util import registry

from spacy_flat.training.batchers import batch_by_length


def resolve(**settings):
    return registry.resolve({"batcher": {"@batchers": "spacy-flat.batch_by_length.v1", **settings}})["batcher"]


def test_every_item_once_in_batches_of_the_size():
    items = ["x" * random.Random(i).randint(1, 60) + str(i) for i in range(1000)]
    batches = list(resolve(size=11, buffer=256)(items))
    assert sorted(item for batch in batches for item in batch) == sorted(items)
    # Each buffer of 256 gives 23 batches of 11 and one of 3 (the last buffer: 232 = 21 * 11 + 1).
    assert [len(b) for b in batches].count(11) == 3 * 23 + 21
    assert all(len(b) <= 11 for b in batches)


def test_a_buffers_batches_hold_like_lengths_longest_first():
    items = [str(i) * n for i, n in enumerate([5, 1, 9, 3, 7, 2, 8, 4, 6])]
    batches = list(batch_by_length(items, size=3, buffer=9))
    lengths = [sorted(len(item) for item in batch) for batch in batches]
    assert lengths == [[7, 8, 9], [4, 5, 6], [1, 2, 3]]
    # Within a batch the items keep their reading order.
    assert batches[0] == [items[2], items[4], items[6]]


def test_sizes_per_buffer_and_a_length_function():
    items = list(range(10))
    batches = list(batch_by_length(items, size=[2, 5], buffer=5, get_length=lambda i: -i))
    # First buffer (0-4) in twos, longest (by -i: item 0) first; second buffer (5-9) in one batch.
    assert batches == [[0], [1, 2], [3, 4], [5, 6, 7, 8, 9]]


def test_a_batch_of_none_is_refused():
    with pytest.raises(ValueError, match="at least one item"):
        list(batch_by_length(["a"], size=0))
