"""A `[training.batcher]` for models whose step costs what their longest sequence costs.

spaCy's `spacy.batch_by_padded.v1` caps a batch's padded size (its longest sequence times its rows), so
long sequences go a few to a batch. That suits models whose cost follows the padded size. A recurrence
(the Lattice LSTM) runs a loop step per character of the longest row, and at a few rows a step costs
little more than at one: there, batches of a fixed number of sequences of like length train the same
sentences in fewer loop steps (a third fewer on Resume at about ten a batch). spaCy has no batcher that
groups by length and cuts by count, so this one does, with spaCy's `minibatch` for the buffers.
"""

import itertools
from functools import partial
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, TypeVar, Union

from spacy.util import minibatch, registry

ItemT = TypeVar("ItemT")
Sizing = Union[Sequence[int], int]


@registry.batchers("spacy-flat.batch_by_length.v1")
def configure_batch_by_length(
    *, size: Sizing, buffer: int = 256, get_length: Optional[Callable[[ItemT], int]] = None
) -> Callable[[Iterable[ItemT]], Iterator[List[ItemT]]]:
    """Create a batcher of `size` items a batch, items of like length together.

    size (int or Sequence[int]): Items a batch; a sequence gives each buffer its own.
    buffer (int): Items read before sorting them by length, as `spacy.batch_by_padded.v1`'s.
    get_length (Callable or None): An item's length; `len` by default.
    """
    return partial(batch_by_length, size=size, buffer=buffer, get_length=get_length or len)


def batch_by_length(
    items: Iterable[ItemT], *, size: Sizing, buffer: int = 256, get_length: Callable[[Any], int] = len
) -> Iterator[List[ItemT]]:
    """Read `buffer` items at a time, sort them by length and cut them into
    batches of `size` (the buffer's last batch may be smaller), longest first as
    spaCy's padded batcher yields them; each batch keeps its items' reading order.
    Every item is in exactly one batch.
    """
    sizes = itertools.repeat(size) if isinstance(size, int) else iter(size)
    for outer in minibatch(items, size=buffer):
        target = next(sizes)
        if target < 1:
            raise ValueError(f"spacy-flat.batch_by_length.v1 needs at least one item a batch, not {target}")
        by_length = sorted(range(len(outer)), key=lambda i: (get_length(outer[i]), i))
        cuts = [sorted(by_length[k : k + target]) for k in range(0, len(by_length), target)]
        for indices in reversed(cuts):
            yield [outer[i] for i in indices]
