"""What a run keeps between steps and writes beside its checkpoints: the loop's
state, the checkpoint settings, the files and folders of a run's output, and
the stop that a signal asks for."""

import json
import shutil
import signal
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

from ..errors import FlatError

CHECKPOINTS = "checkpoints"
STATE = "state.json"
OPTIMIZER = "optimizer.msgpack"
RANDOM = "random.msgpack"
MODEL = "model"


class TrainingStopped(FlatError):
    """The run was asked to stop (SIGTERM or Ctrl-C) and wrote a checkpoint to go on from."""


@dataclass
class CheckpointSettings:
    """When to write checkpoints and how many to keep.

    steps (int): After every step whose index is a multiple of this (0: the config's `eval_frequency`,
        so right after each evaluation).
    minutes (float): Also once this many minutes have passed since the last one (0: never).
    keep (int): The newest checkpoints kept.
    """

    steps: int = 0
    minutes: float = 30.0
    keep: int = 2


@dataclass
class LoopState:
    """What `train_while_improving` keeps in local variables, kept here so it can be saved.

    steps (int): Steps taken (the next step's index).
    results (List[Tuple[float, int]]): (score, step) of every evaluation.
    losses (Dict[str, float]): Losses summed since the last evaluation.
    words (int): Words trained on.
    seconds (float): Seconds spent training, over all the run's processes.
    """

    steps: int = 0
    results: List[Tuple[float, int]] = field(default_factory=list)
    losses: Dict[str, float] = field(default_factory=dict)
    words: int = 0
    seconds: float = 0.0

    def stop_reached(self, patience: int, max_steps: int) -> bool:
        """spaCy's stopping rules, applied after the step `self.steps - 1`."""
        if not self.steps:
            return False
        step = self.steps - 1
        best_step = -max((score, -s) for score, s in self.results)[1]
        return bool((patience and step - best_step >= patience) or (max_steps and step >= max_steps))


def read_state(folder: Path) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): A checkpoint's state.json."""
    return json.loads((folder / STATE).read_text(encoding="utf8"))


def write_state(folder: Path, state: Dict[str, Any]) -> None:
    # The standard library's json, not srsly's: it writes floats (losses, scores, config values)
    # that read back to the same bits.
    (folder / STATE).write_text(json.dumps(state, indent=1, ensure_ascii=False), encoding="utf8")


def replace_dir(source: Path, target: Path, *, move: bool = False) -> None:
    """Put a copy of `source` (or `source` itself, with `move`) at `target`, replacing what is
    there by renames, so `target` is never a half-written folder; no `source` removes `target`."""
    parked = target.with_name(f".{target.name}-old-{uuid.uuid4().hex[:8]}")
    if target.exists():
        target.rename(parked)
    if source.exists():
        if move:
            source.rename(target)
        else:
            temp = target.with_name(f".{target.name}-new-{uuid.uuid4().hex[:8]}")
            shutil.copytree(source, temp)
            temp.rename(target)
    shutil.rmtree(parked, ignore_errors=True)


def device_name(gpu: int) -> str:
    return f"GPU {gpu}" if gpu >= 0 else "CPU"


class StopRequest:
    """Set to the signal's name when one asks the run to stop."""

    requested: str = ""


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Turn SIGTERM and the first Ctrl-C into a request to stop after the current step (with a
    checkpoint); a second Ctrl-C stops at once. Only the main thread can take signals."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def on_signal(signum: int, _: Any) -> None:
        if request.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        request.requested = signal.Signals(signum).name

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
