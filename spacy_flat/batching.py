"""Grouping texts into encoder batches under an attention budget."""

from typing import Iterator, List, Sequence

# Most docs encoded together, and the attention budget of one batch in rows x
# characters^2: ten 300-character texts, a training step of about 1 GB.
MAX_BATCH = 64
PAIR_BUDGET = 10 * 300 * 300


def budget_batches(
    lengths: Sequence[int], pair_budget: int = PAIR_BUDGET, max_batch: int = MAX_BATCH
) -> Iterator[List[int]]:
    """Group indices, sorted by length to keep padding small, into batches whose
    attention cost (rows x longest^2) stays under `pair_budget`, at most
    `max_batch` each. A text over the budget on its own gets a batch of its own.

    lengths (Sequence[int]): Characters per text.
    YIELDS (List[int]): Indices into `lengths`, shortest first.
    """
    batch: List[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        longest = lengths[i]  # sorted: the newest is the longest
        if batch and ((len(batch) + 1) * longest * longest > pair_budget or len(batch) >= max_batch):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch
