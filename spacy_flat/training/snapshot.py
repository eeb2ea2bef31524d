"""Writing a run's checkpoint and going on from one: the weights, `model-best`,
the optimizer's state, the batch stream's position and every random state."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol

import srsly
from spacy.language import Language
from spacy.training import Example
from spacy.training.loop import DIR_MODEL_BEST
from thinc.api import Optimizer

from . import randomness
from .batches import BatchStream
from .checkpoints import Checkpoint, CheckpointStore
from .fingerprint import Fingerprint, ResumeRefusedError
from .optimizer_state import (
    grad_scaler_state,
    optimizer_state,
    parameter_names,
    restore_grad_scalers,
    restore_optimizer,
    restore_row_averages,
    row_average_state,
)
from .state import MODEL, OPTIMIZER, RANDOM, LoopState, device_name, read_state, replace_dir, write_state


class Run(Protocol):
    """What of a training process (`loop.TrainingRun`) a checkpoint saves and restores."""

    nlp: Language
    output: Path
    store: CheckpointStore
    fingerprint: Fingerprint
    gpu: int
    seed: Optional[int]
    T: Dict[str, Any]
    train_corpus: Callable[[Language], Iterable[Example]]
    optimizer: Optimizer
    dropouts: Iterator[float]
    state: LoopState
    stream: Optional[BatchStream]
    last_checkpoint: int


def save_checkpoint(run: Run) -> Checkpoint:
    """Write everything `run` needs to go on after its last step, atomically (`CheckpointStore.write`)."""
    assert run.stream is not None
    now = randomness.capture()
    stream = run.stream

    def fill(folder: Path) -> None:
        run.nlp.to_disk(folder / MODEL)  # the trained weights, not the averages
        if (run.output / DIR_MODEL_BEST).exists():
            shutil.copytree(run.output / DIR_MODEL_BEST, folder / DIR_MODEL_BEST)
        names = parameter_names(run.nlp)
        srsly.write_msgpack(
            folder / OPTIMIZER,
            {
                "optimizer": optimizer_state(run.optimizer, names, run.state.steps),
                "grad_scalers": grad_scaler_state(run.nlp, names),
                "row_averages": row_average_state(run.nlp, run.optimizer, names),
            },
        )
        position = BatchStream.position_to_dict(stream.position())
        srsly.write_msgpack(folder / RANDOM, {"now": now, "stream": position})
        best = max(run.state.results, default=None)
        write_state(
            folder,
            {
                "step": run.state.steps - 1,
                "epoch": stream.epoch,
                "batches_in_epoch": stream.batches,
                "best": {"score": best[0], "step": best[1]} if best else None,
                "loop": asdict(run.state),
                "gpu": run.gpu,
                "fingerprint": run.fingerprint.to_dict(),
            },
        )

    return run.store.write(run.state.steps, fill)


def restore_run(run: Run, checkpoint: Checkpoint, *, replay_check: bool) -> List[str]:
    """Bring `run` (fresh from `init_nlp`) to where `checkpoint` left it.

    RETURNS (List[str]): What could not be restored exactly.
    """
    folder = checkpoint.path
    saved = read_state(folder)
    # The live config stays: it may extend the run (see fingerprint.ALLOWED_ON_RESUME).
    run.nlp.from_disk(folder / MODEL, exclude=["config"])
    optimizer_data = srsly.read_msgpack(folder / OPTIMIZER)
    notes = restore_optimizer(
        run.optimizer, optimizer_data["optimizer"], parameter_names(run.nlp), replay_check=replay_check
    )
    restore_grad_scalers(run.nlp, optimizer_data["grad_scalers"])
    restore_row_averages(run.nlp, run.optimizer, optimizer_data.get("row_averages", {}), parameter_names(run.nlp))
    run.state = LoopState(**{**saved["loop"], "results": [tuple(r) for r in saved["loop"]["results"]]})
    for _ in range(run.state.steps):
        next(run.dropouts)
    replace_dir(folder / DIR_MODEL_BEST, run.output / DIR_MODEL_BEST)
    rng = srsly.read_msgpack(folder / RANDOM)
    position = BatchStream.position_from_dict(rng["stream"])
    if (position.order is None) != (run.T["max_epochs"] < 0):
        raise ResumeRefusedError(
            f"cannot resume from {folder}: training.max_epochs cannot change between -1 (a streamed, "
            "unshuffled corpus) and a shuffled one"
        )
    run.stream = BatchStream(run.nlp, run.train_corpus, run.T["batcher"], run.T["max_epochs"], position)
    if saved["gpu"] != run.gpu:
        notes.append(f"the run was on {device_name(saved['gpu'])}, it goes on on {device_name(run.gpu)}")
    notes.extend(randomness.restore(rng["now"], fallback_seed=(run.seed or 0) + run.state.steps))
    run.last_checkpoint = run.state.steps
    return notes
