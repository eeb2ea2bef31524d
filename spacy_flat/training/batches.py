"""spaCy's stream of training batches, with a position that can be saved and gone back to.

`spacy.training.loop.create_train_batches` is an endless generator: it reads the corpus into a list
once, then at each epoch's start shuffles that list in place with Python's `random` and runs the
batcher over it. It cannot be positioned, so this keeps what it takes to rebuild it at the same place:
the order of the examples before the current epoch's shuffle (each shuffle permutes the previous
epoch's order), Python's random state just before that shuffle, and how many batches of the epoch were
taken. Going back there feeds the generator the examples in that order, sets that state, and draws the
batches already trained on without training on them; the caller then restores the random states of
the moment the checkpoint was taken.
"""

import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

from spacy.language import Language
from spacy.training import Example
from spacy.training.loop import create_train_batches

from .randomness import PythonState, python_state, set_python_state

Batch = List[Example]


@dataclass
class StreamPosition:
    """Where a batch stream stands, as saved in a checkpoint.

    epoch (int): The epoch of the last batch taken.
    batches (int): Batches taken in that epoch.
    order (Optional[List[int]]): Corpus indices in the order the epoch's shuffle started from; None
        for a streamed corpus (`max_epochs = -1`), which is read afresh and never shuffled.
    epoch_random (PythonState): Python's random state just before the epoch's shuffle.
    """

    epoch: int
    batches: int
    order: Optional[List[int]]
    epoch_random: PythonState


class BatchStream:
    """Iterate `(epoch, batch)` as `create_train_batches` does, keeping the position.

    nlp (Language): The pipeline (the corpus reader takes it).
    corpus (Callable[[Language], Iterable[Example]]): The training corpus.
    batcher (Callable): The config's batcher.
    max_epochs (int): As in `[training]`: 0 for no limit, -1 for a streamed corpus.
    start (Optional[StreamPosition]): Go on from here; None starts at the first batch.
    """

    def __init__(
        self,
        nlp: Language,
        corpus: Callable[[Language], Iterable[Example]],
        batcher: Callable[[Iterable[Example]], Iterable[Batch]],
        max_epochs: int,
        start: Optional[StreamPosition] = None,
    ) -> None:
        self.shuffles = max_epochs >= 0
        self._corpus = corpus
        self._start_order = start.order if start is not None else None
        self._start_random = start.epoch_random if start is not None else None
        self._order: Optional[List[int]] = None
        self._epoch_offset = start.epoch if start is not None else 0
        self.epoch = -1
        self.batches = 0
        self.epoch_order: Optional[List[int]] = None
        self.epoch_random: PythonState = python_state()
        self._pending_random: Optional[PythonState] = None
        remaining = max_epochs - self._epoch_offset if max_epochs > 0 else max_epochs
        self._batches: Iterator[Tuple[int, Batch]] = iter(())
        if max_epochs <= 0 or remaining > 0:
            # spaCy types the batcher as yielding examples; it yields lists of them.
            self._batches = create_train_batches(nlp, self._read, batcher, remaining)  # type: ignore[arg-type]
        if start is not None:
            for _ in range(start.batches):
                if next(self, None) is None:
                    break

    def _read(self, nlp: Language) -> Iterator[Example]:
        if not self.shuffles:
            yield from self._corpus(nlp)
            return
        examples = list(self._corpus(nlp))
        order = self._start_order if self._start_order is not None else list(range(len(examples)))
        if len(order) != len(examples):
            raise ValueError(f"the corpus has {len(examples)} examples, the saved order {len(order)}")
        self._order = list(order)
        self._start_order = None
        examples = [examples[i] for i in order]
        yield from examples
        # create_train_batches shuffles right after reading the corpus: going back, the epoch's state is
        # set here, so a reader that draws random numbers cannot move the shuffle.
        if self._start_random is not None:
            set_python_state(self._start_random)
            self._start_random = None
        self._pending_random = python_state()

    def __iter__(self) -> "BatchStream":
        return self

    def __next__(self) -> Tuple[int, Batch]:
        before = python_state()
        epoch, batch = next(self._batches)
        epoch += self._epoch_offset
        if epoch != self.epoch:
            self._start_epoch(epoch, self._pending_random or before)
        self._pending_random = None
        self.batches += 1
        return epoch, batch

    def _start_epoch(self, epoch: int, state: PythonState) -> None:
        self.epoch, self.batches, self.epoch_random = epoch, 0, state
        if self.shuffles and self._order is not None:
            # The permutation create_train_batches just applied: the same draws on a list of the same length.
            self.epoch_order = list(self._order)
            shuffler = random.Random()
            shuffler.setstate((state[0], tuple(state[1]), state[2]))
            shuffler.shuffle(self._order)

    def position(self) -> StreamPosition:
        """RETURNS (StreamPosition): Where the stream stands now."""
        return StreamPosition(self.epoch, self.batches, self.epoch_order, self.epoch_random)

    @staticmethod
    def position_to_dict(position: StreamPosition) -> Any:
        return {
            "epoch": position.epoch,
            "batches": position.batches,
            "order": position.order,
            "epoch_random": position.epoch_random,
        }

    @staticmethod
    def position_from_dict(data: Any) -> StreamPosition:
        return StreamPosition(data["epoch"], data["batches"], data["order"], data["epoch_random"])
