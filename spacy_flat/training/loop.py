"""The resumable training driver behind `python -m spacy_flat train`.

It is `spacy train` (`spacy.cli.train.train` and `spacy.training.loop.train`) with checkpoints: the
same `init_nlp`, the same `[training]` block resolved the same way, spaCy's batch stream
(`create_train_batches`), evaluation callback, `before_to_disk` callback, `update_meta`, loggers and
`model-last`/`model-best`. A run never stopped gives the same weights as `spacy train` with the same
config; a run stopped (even by SIGKILL) and started again with the same command goes on from its newest
complete checkpoint and ends with the same weights and scores as if it had never stopped (on CPU).
"""

import json
import shutil
import signal
import sys
import threading
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from timeit import default_timer as timer
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple

import srsly
from spacy.language import Language
from spacy.schemas import ConfigSchemaTraining
from spacy.training import Example
from spacy.training.initialize import init_nlp
from spacy.training.loop import (
    DIR_MODEL_BEST,
    DIR_MODEL_LAST,
    clean_output_dir,
    create_before_to_disk_callback,
    create_evaluation_callback,
    subdivide_batch,
    update_meta,
)
from spacy.util import load_config, registry, resolve_dot_names
from thinc.api import Optimizer, constant, fix_random_seed, require_gpu, set_gpu_allocator
from wasabi import Printer

from ..errors import FlatError
from . import randomness
from .batches import BatchStream
from .checkpoints import Checkpoint, CheckpointStore
from .fingerprint import CHANGES_THE_RUN, Fingerprint, ResumeRefusedError, check_resumable, fingerprint
from .optimizer_state import (
    grad_scaler_state,
    optimizer_state,
    parameter_names,
    restore_grad_scalers,
    restore_optimizer,
)

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


def train(
    config_path: Path,
    output_path: Path,
    *,
    overrides: Optional[Dict[str, Any]] = None,
    use_gpu: int = -1,
    settings: Optional[CheckpointSettings] = None,
    stdout: IO = sys.stdout,
    stderr: IO = sys.stderr,
) -> Path:
    """Train a pipeline from a config, going on from the output directory's newest checkpoint.

    config_path (Path): The config file.
    output_path (Path): model-last, model-best and checkpoints/ go here.
    overrides (Optional[Dict[str, Any]]): Config overrides, as `spacy train` takes them.
    use_gpu (int): GPU id, -1 for CPU.
    settings (Optional[CheckpointSettings]): When to checkpoint.
    stdout (IO): Where the log goes.
    stderr (IO): Where the loggers' second stream goes.
    RETURNS (Path): The final model-last.
    """
    settings = settings or CheckpointSettings()
    msg = Printer(no_print=True)

    def say(text: str) -> None:
        stdout.write(text + "\n")
        stdout.flush()

    if not config_path.exists():
        raise FlatError(f"{config_path}: no such config")
    if use_gpu >= 0:
        require_gpu(use_gpu)
    config = load_config(config_path, overrides=dict(overrides or {}), interpolate=False)
    output_path.mkdir(parents=True, exist_ok=True)
    store = CheckpointStore(output_path / CHECKPOINTS, keep=settings.keep)
    with store.lock():
        for path in store.remove_incomplete():
            say(msg.warn(f"Removed a checkpoint left incomplete: {path}"))
        current = fingerprint(config)
        checkpoint = store.latest(log=lambda text: say(msg.warn(text[:1].upper() + text[1:])))
        for path in store.discard_newer(checkpoint):
            say(msg.warn(f"Deleted {path}, which failed verification"))
        allowed: List[str] = []
        if checkpoint is not None:
            saved = Fingerprint.from_dict(read_state(checkpoint.path)["fingerprint"])
            allowed = check_resumable(saved, current, checkpoint.path)
        nlp = init_nlp(config, use_gpu=use_gpu)
        run = TrainingRun(nlp, output_path, store, current, use_gpu)
        if checkpoint is None:
            clean_output_dir(output_path)
            say(msg.info(f"Checkpoints every {run.describe(settings)} in {store.path}"))
        else:
            say(msg.info(f"Resuming from {checkpoint.path} (after step {checkpoint.step - 1})"))
            for change in allowed:
                say(msg.warn(f"Allowed on resume: {change}"))
            if any(change.startswith(CHANGES_THE_RUN) for change in allowed):
                say(msg.warn("The schedule changed: from here on the run differs from one run from the start"))
        for line in run.start(checkpoint, replay_check=not any(c.startswith(CHANGES_THE_RUN) for c in allowed)):
            say(msg.warn(line))
        return run.loop(settings, say, stdout, stderr)


class TrainingRun:
    """One training process of a run: spaCy's `loop.train` set-up, then the steps.

    nlp (Language): The pipeline from `init_nlp`.
    output (Path): The run's output directory.
    store (CheckpointStore): Its checkpoints.
    current (Fingerprint): The run's fingerprint, saved in each checkpoint.
    gpu (int): GPU id, -1 for CPU.
    """

    def __init__(self, nlp: Language, output: Path, store: CheckpointStore, current: Fingerprint, gpu: int):
        self.nlp, self.output, self.store, self.fingerprint, self.gpu = nlp, output, store, current, gpu
        output.mkdir(parents=True, exist_ok=True)
        # As spacy.training.loop.train, in its order: the seed, the allocator, then the training block.
        config = nlp.config.interpolate()
        self.seed = config["training"]["seed"]
        if self.seed is not None:
            fix_random_seed(self.seed)
        if gpu >= 0 and config["training"]["gpu_allocator"]:
            set_gpu_allocator(config["training"]["gpu_allocator"])
        self.T = registry.resolve(config["training"], schema=ConfigSchemaTraining)
        self.train_corpus, self.dev_corpus = resolve_dot_names(config, [self.T["train_corpus"], self.T["dev_corpus"]])
        self.optimizer: Optimizer = self.T["optimizer"]
        self.before_to_disk = create_before_to_disk_callback(self.T["before_to_disk"])
        self.evaluate = create_evaluation_callback(nlp, self.dev_corpus, self.T["score_weights"])
        dropout = self.T["dropout"]
        self.dropouts: Iterator[float] = iter(constant(dropout) if isinstance(dropout, float) else dropout)
        self.state = LoopState()
        self.stream: Optional[BatchStream] = None
        self.last_checkpoint = -1

    def describe(self, settings: CheckpointSettings) -> str:
        steps = settings.steps or self.T["eval_frequency"]
        minutes = f" and {settings.minutes:g} minutes" if settings.minutes else ""
        return f"{steps} steps{minutes}, keeping {settings.keep}"

    def start(self, checkpoint: Optional[Checkpoint], *, replay_check: bool) -> List[str]:
        """Build the batch stream, at the checkpoint's place if there is one.

        RETURNS (List[str]): What could not be restored exactly.
        """
        nlp, T = self.nlp, self.T
        if checkpoint is None:
            self.stream = BatchStream(nlp, self.train_corpus, T["batcher"], T["max_epochs"])
            return []
        folder = checkpoint.path
        saved = read_state(folder)
        # The live config stays: it may extend the run (see fingerprint.ALLOWED_ON_RESUME).
        nlp.from_disk(folder / MODEL, exclude=["config"])
        optimizer_data = srsly.read_msgpack(folder / OPTIMIZER)
        notes = restore_optimizer(
            self.optimizer, optimizer_data["optimizer"], parameter_names(nlp), replay_check=replay_check
        )
        restore_grad_scalers(nlp, optimizer_data["grad_scalers"])
        self.state = LoopState(**{**saved["loop"], "results": [tuple(r) for r in saved["loop"]["results"]]})
        for _ in range(self.state.steps):
            next(self.dropouts)
        _replace_dir(folder / DIR_MODEL_BEST, self.output / DIR_MODEL_BEST)
        rng = srsly.read_msgpack(folder / RANDOM)
        position = BatchStream.position_from_dict(rng["stream"])
        if (position.order is None) != (T["max_epochs"] < 0):
            raise ResumeRefusedError(
                f"cannot resume from {folder}: training.max_epochs cannot change between -1 (a streamed, "
                "unshuffled corpus) and a shuffled one"
            )
        self.stream = BatchStream(nlp, self.train_corpus, T["batcher"], T["max_epochs"], position)
        if saved["gpu"] != self.gpu:
            notes.append(f"the run was on {_device(saved['gpu'])}, it goes on on {_device(self.gpu)}")
        notes.extend(randomness.restore(rng["now"], fallback_seed=(self.seed or 0) + self.state.steps))
        self.last_checkpoint = self.state.steps
        return [f"Not restored exactly: {note}" for note in notes]

    def loop(self, settings: CheckpointSettings, say: Callable[[str], None], stdout: IO, stderr: IO) -> Path:
        """Run the steps as `spacy.training.loop.train` does, checkpointing as `settings` say."""
        nlp, T = self.nlp, self.T
        frozen = T["frozen_components"]
        every = settings.steps or T["eval_frequency"]
        last_time = timer()
        msg = Printer(no_print=True)
        say(msg.info(f"Pipeline: {nlp.pipe_names}"))
        say(msg.info(f"{'Learn rate' if self.state.steps else 'Initial learn rate'}: {self.optimizer.learn_rate}"))
        with nlp.select_pipes(disable=frozen):
            log_step, finalize_logger = T["logger"](nlp, stdout, stderr)
        with _stop_on_signals() as stop:
            try:
                for _, info, is_best in self.steps():
                    if is_best is not None:
                        with nlp.select_pipes(disable=frozen):
                            update_meta(T, nlp, info)
                        self._save_models(is_best)
                        info["output_path"] = str(self.output / DIR_MODEL_LAST)
                    log_step(info if is_best is not None else None)
                    minutes_passed = settings.minutes and timer() - last_time >= settings.minutes * 60
                    if stop.requested or minutes_passed or (info["step"] and not info["step"] % every):
                        self.checkpoint()
                        last_time = timer()
                    if stop.requested:
                        raise TrainingStopped(
                            f"stopped after step {info['step']} ({stop.requested}); checkpoint written: run the "
                            "same command to go on"
                        )
            finally:
                finalize_logger()
                self._save_models(False)
        if self.last_checkpoint != self.state.steps:
            self.checkpoint()
        say(msg.good(f"Saved pipeline to output directory {self.output / DIR_MODEL_LAST}"))
        return self.output / DIR_MODEL_LAST

    def steps(self) -> Iterator[Tuple[List[Example], Dict[str, Any], Optional[bool]]]:
        """`spacy.training.loop.train_while_improving`, from `self.state` on.

        spaCy's generator counts steps with `enumerate` from 0 and keeps its results, losses and
        word count in locals, so it cannot start at a later step; this is the same loop over state
        that a checkpoint saves. The state is brought up to date before each yield, so a
        checkpoint taken while the caller handles a step holds everything after it.
        """
        nlp, T, state, optimizer = self.nlp, self.T, self.state, self.optimizer
        assert self.stream is not None
        exclude, annotating = T["frozen_components"], T["annotating_components"]
        if state.stop_reached(T["patience"], T["max_steps"]):
            return
        start_time = timer() - state.seconds
        for epoch, batch in self.stream:
            step = state.steps
            if T["before_update"]:
                T["before_update"](nlp, {"step": step, "epoch": epoch})
            dropout = next(self.dropouts)
            for subbatch in subdivide_batch(batch, T["accumulate_gradient"]):
                nlp.update(
                    subbatch,
                    drop=dropout,
                    losses=state.losses,
                    sgd=False,  # type: ignore[arg-type]
                    exclude=exclude,
                    annotates=annotating,
                )
            for name, proc in nlp.pipeline:
                if (
                    name not in exclude
                    and getattr(proc, "is_trainable", False)
                    and getattr(proc, "model", None) not in (True, False, None)
                ):
                    proc.finish_update(optimizer)  # type: ignore[attr-defined]
            optimizer.step_schedules()
            score: Optional[float] = None
            other_scores: Optional[Dict[str, Any]] = None
            is_best: Optional[bool] = None
            if not step % T["eval_frequency"]:
                if optimizer.averages:
                    with nlp.use_params(optimizer.averages):
                        score, other_scores = self.evaluate()
                else:
                    score, other_scores = self.evaluate()
                state.results.append((score, step))
                is_best = score == max(state.results)[0]
            state.words += sum(len(eg) for eg in batch)
            state.steps = step + 1
            state.seconds = timer() - start_time
            info = {
                "epoch": epoch,
                "step": step,
                "score": score,
                "other_scores": other_scores,
                "losses": state.losses,
                "checkpoints": state.results,
                "seconds": int(state.seconds),
                "words": state.words,
            }
            if is_best is not None:
                state.losses = {}  # spaCy starts a new dict; `info` keeps the old one for the logger
            stop = state.stop_reached(T["patience"], T["max_steps"])
            yield batch, info, is_best
            if stop:
                break

    def _save_models(self, is_best: bool) -> None:
        """spaCy's `save_checkpoint`, writing each folder beside its place and renaming it in."""
        with self.nlp.use_params(self.optimizer.averages):
            temp = self.output / f".{DIR_MODEL_LAST}-{uuid.uuid4().hex[:8]}"
            self.before_to_disk(self.nlp).to_disk(temp)
        _replace_dir(temp, self.output / DIR_MODEL_LAST, move=True)
        if is_best:
            _replace_dir(self.output / DIR_MODEL_LAST, self.output / DIR_MODEL_BEST)

    def checkpoint(self) -> Checkpoint:
        """Write everything the run needs to go on after the last step taken."""
        assert self.stream is not None
        now = randomness.capture()
        stream = self.stream

        def fill(folder: Path) -> None:
            self.nlp.to_disk(folder / MODEL)  # the trained weights, not the averages
            if (self.output / DIR_MODEL_BEST).exists():
                shutil.copytree(self.output / DIR_MODEL_BEST, folder / DIR_MODEL_BEST)
            names = parameter_names(self.nlp)
            srsly.write_msgpack(
                folder / OPTIMIZER,
                {
                    "optimizer": optimizer_state(self.optimizer, names, self.state.steps),
                    "grad_scalers": grad_scaler_state(self.nlp, names),
                },
            )
            position = BatchStream.position_to_dict(stream.position())
            srsly.write_msgpack(folder / RANDOM, {"now": now, "stream": position})
            best = max(self.state.results, default=None)
            write_state(
                folder,
                {
                    "step": self.state.steps - 1,
                    "epoch": stream.epoch,
                    "batches_in_epoch": stream.batches,
                    "best": {"score": best[0], "step": best[1]} if best else None,
                    "loop": asdict(self.state),
                    "gpu": self.gpu,
                    "fingerprint": self.fingerprint.to_dict(),
                },
            )

        written = self.store.write(self.state.steps, fill)
        self.last_checkpoint = self.state.steps
        return written


def read_state(folder: Path) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): A checkpoint's state.json."""
    return json.loads((folder / STATE).read_text(encoding="utf8"))


def write_state(folder: Path, state: Dict[str, Any]) -> None:
    # The standard library's json, not srsly's: it writes floats (losses, scores, config values)
    # that read back to the same bits.
    (folder / STATE).write_text(json.dumps(state, indent=1, ensure_ascii=False), encoding="utf8")


def _replace_dir(source: Path, target: Path, *, move: bool = False) -> None:
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


def _device(gpu: int) -> str:
    return f"GPU {gpu}" if gpu >= 0 else "CPU"


class _StopRequest:
    requested: str = ""


@contextmanager
def _stop_on_signals() -> Iterator[_StopRequest]:
    """Turn SIGTERM and the first Ctrl-C into a request to stop after the current step (with a
    checkpoint); a second Ctrl-C stops at once. Only the main thread can take signals."""
    request = _StopRequest()
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
