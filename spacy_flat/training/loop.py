"""The resumable training driver behind `python -m spacy_flat train`.

It is `spacy train` (`spacy.cli.train.train` and `spacy.training.loop.train`) with checkpoints: the
same `init_nlp`, the same `[training]` block resolved the same way, spaCy's batch stream
(`create_train_batches`), evaluation callback, `before_to_disk` callback, `update_meta`, loggers and
`model-last`/`model-best`. A run never stopped gives the same weights as `spacy train` with the same
config; a run stopped (even by SIGKILL) and started again with the same command goes on from its newest
complete checkpoint and ends with the same weights and scores as if it had never stopped (on CPU).
"""

import sys
import uuid
from pathlib import Path
from timeit import default_timer as timer
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple

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
from thinc.api import Model, Optimizer, constant, fix_random_seed, require_gpu, set_gpu_allocator
from wasabi import Printer

from ..errors import FlatError
from ..layers.featurizer import set_feature_cache
from ..layers.losses import DeviceLosses
from .batches import BatchStream
from .checkpoints import Checkpoint, CheckpointStore
from .fingerprint import CHANGES_THE_RUN, Fingerprint, check_resumable, fingerprint
from .snapshot import restore_run, save_checkpoint
from .state import (
    CHECKPOINTS,
    CheckpointSettings,
    LoopState,
    TrainingStopped,
    read_state,
    replace_dir,
    stop_on_signals,
)

__all__ = ["CheckpointSettings", "TrainingRun", "TrainingStopped", "train"]


def train(
    config_path: Path,
    output_path: Path,
    *,
    overrides: Optional[Dict[str, Any]] = None,
    use_gpu: int = -1,
    settings: Optional[CheckpointSettings] = None,
    stdout: Optional[IO] = None,
    stderr: Optional[IO] = None,
) -> Path:
    """Train a pipeline from a config, going on from the output directory's newest checkpoint.

    config_path (Path): The config file.
    output_path (Path): model-last, model-best and checkpoints/ go here.
    overrides (Optional[Dict[str, Any]]): Config overrides, as `spacy train` takes them.
    use_gpu (int): GPU id, -1 for CPU.
    settings (Optional[CheckpointSettings]): When to checkpoint.
    stdout (Optional[IO]): Where the log goes (default: sys.stdout, as it is at the call).
    stderr (Optional[IO]): Where the loggers' second stream goes (default: sys.stderr).
    RETURNS (Path): The final model-last.
    """
    settings = settings or CheckpointSettings()
    out, err = stdout or sys.stdout, stderr or sys.stderr
    msg = Printer(no_print=True)

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

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
        for _, proc in nlp.pipeline:  # training texts' ids beyond memory: under the output (shared by seeds)
            model = getattr(proc, "model", None)
            if isinstance(model, Model) and model.has_ref("features"):
                set_feature_cache(model, output_path / "feature-cache")
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
        return run.loop(settings, say, out, err)


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
        notes = restore_run(self, checkpoint, replay_check=replay_check)
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
        with stop_on_signals() as stop:
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
        # flat_ner leaves its loss on the device (`DeviceLosses`): read when logged or saved.
        state.losses = DeviceLosses(state.losses)
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
                if isinstance(state.losses, DeviceLosses):
                    state.losses.read()
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
                state.losses = DeviceLosses()  # spaCy starts a new dict; `info` keeps the old one for the logger
            stop = state.stop_reached(T["patience"], T["max_steps"])
            yield batch, info, is_best
            if stop:
                break

    def _save_models(self, is_best: bool) -> None:
        """spaCy's `save_checkpoint`, writing each folder beside its place and renaming it in."""
        with self.nlp.use_params(self.optimizer.averages):
            temp = self.output / f".{DIR_MODEL_LAST}-{uuid.uuid4().hex[:8]}"
            self.before_to_disk(self.nlp).to_disk(temp)
        replace_dir(temp, self.output / DIR_MODEL_LAST, move=True)
        if is_best:
            replace_dir(self.output / DIR_MODEL_LAST, self.output / DIR_MODEL_BEST)

    def checkpoint(self) -> Checkpoint:
        """Write everything the run needs to go on after the last step taken."""
        if isinstance(self.state.losses, DeviceLosses):
            self.state.losses.read()
        written = save_checkpoint(self)
        self.last_checkpoint = self.state.steps
        return written
