"""Grouping texts into encoder batches under an attention budget."""

from typing import Iterator, List, Optional, Sequence

# Most docs encoded together, and the attention budget of one batch in rows x
# characters^2: ten 300-character texts, a training step of about 1 GB.
MAX_BATCH = 64
PAIR_BUDGET = 10 * 300 * 300
# In prediction, a batch's padded attention (rows x longest^2) may exceed the sum
# of its rows' own (length^2) by at most this factor. Without it, nlp.pipe's
# batches of 64 Resume test docs, whose lengths run from 2 to 150+ characters,
# computed 7.7 times the attention they needed (4.4 on MSRA); 1.5 cuts that to
# 1.2-1.5 at about one encoder call per eight docs.
PADDING_SLACK = 1.5
# On a GPU, prediction groups for the device instead: padding costs little there and
# every encoder call pays launches and a round trip, so a batch is encoded in one call
# when it fits DEVICE_PAIR_BUDGET (no activations are kept for a backward pass). A full
# group, 80 texts of 300 characters, takes several times the memory of the CPU's groups,
# about a gigabyte for FLAT (benchmarks/archive/device-groups/ measured it).
DEVICE_MAX_BATCH = 1024
DEVICE_PAIR_BUDGET = 8 * PAIR_BUDGET


def budget_batches(
    lengths: Sequence[int],
    pair_budget: int = PAIR_BUDGET,
    max_batch: int = MAX_BATCH,
    padding_slack: Optional[float] = None,
) -> Iterator[List[int]]:
    """Group indices, sorted by length to keep padding small, into batches whose
    attention cost (rows x longest^2) stays under `pair_budget`, at most
    `max_batch` each. A text over the budget on its own gets a batch of its own.

    lengths (Sequence[int]): Characters per text.
    padding_slack (Optional[float]): Also start a new batch when the batch's
        padded cost would pass this multiple of its rows' own (PADDING_SLACK in
        prediction); None leaves batches as large as the budget allows (training).
    YIELDS (List[int]): Indices into `lengths`, shortest first.
    """
    batch: List[int] = []
    own = 0  # the sum of the batch's length^2
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        longest = lengths[i]  # sorted: the newest is the longest
        padded = (len(batch) + 1) * longest * longest
        wasteful = padding_slack is not None and padded > padding_slack * (own + longest * longest)
        if batch and (padded > pair_budget or len(batch) >= max_batch or wasteful):
            yield batch
            batch, own = [], 0
        batch.append(i)
        own += longest * longest
    if batch:
        yield batch
