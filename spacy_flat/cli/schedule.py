"""Learning-rate schedules counted in epochs of the corpus a config trains on.

thinc schedules count optimizer steps and never see the corpus, so a config's
`warmup_steps` and `total_steps` are right only for the corpus they were counted
on. With `batch_by_padded` a batch holds as many sentences as fit its padded size,
so the count depends on sentence lengths: 362 batches make an epoch of Resume,
216 one of Weibo. A schedule that ends early trains its last epochs at a zero
rate; one that ends late never decays. This module counts the batches the way
`spacy train` makes them, for the configs' `warmup_linear.v1` (warm-up and decay
in steps) and for schedules counted in epochs, which take the epoch's length as
`steps_per_epoch` (a schedule of one's own, registered in a `--code` file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Dict, Optional, Union

import spacy
from spacy.cli._util import Arg, Opt
from spacy.tokens import DocBin
from spacy.util import load_config, registry
from thinc.api import Config

from ..errors import FlatError
from .app import flat_cli

WARMUP = "training.optimizer.learn_rate.warmup_steps"
TOTAL = "training.optimizer.learn_rate.total_steps"
PER_EPOCH = "training.optimizer.learn_rate.steps_per_epoch"
EVAL = "training.eval_frequency"
MAX_STEPS = "training.max_steps"
MAX_EPOCHS = "training.max_epochs"


def _config(config: Union[Path, Config]) -> Config:
    return load_config(config) if isinstance(config, Path) else config


def count_batches(config: Union[Path, Config], train: Path) -> int:
    """Count the batches the config's `[training.batcher]` makes of a DocBin.

    spaCy shuffles the examples each epoch, and `batch_by_padded` groups by length
    within its buffer, so an epoch's count can move by a few batches.

    config (Union[Path, Config]): A training config.
    train (Path): The training DocBin.
    RETURNS (int): Batches in one epoch.
    """
    if not train.exists():
        raise FlatError(f"{train}: no such training DocBin")
    cfg = _config(config)
    batcher = registry.resolve({"batcher": cfg["training"]["batcher"]})["batcher"]
    # spacy train batches Examples whose length is that of `nlp.make_doc(text)`,
    # so a word segmenter makes fewer, longer-text batches than the characters.
    nlp = spacy.blank(cfg["nlp"]["lang"], config={"nlp": {"tokenizer": cfg["nlp"]["tokenizer"]}})
    texts = [doc.text for doc in DocBin().from_disk(train).get_docs(nlp.vocab)]
    if not texts:
        raise FlatError(f"{train}: the DocBin holds no documents")
    try:
        docs = [nlp.make_doc(text) for text in texts]
    except Exception as err:  # e.g. a pkuseg segmenter, which needs its model from [initialize]
        msg = f"the config's tokenizer cannot run before initialization, so batches cannot be counted: {err}"
        raise FlatError(msg) from err
    return sum(1 for _ in batcher(docs))


def epoch_schedule(steps_per_epoch: int, epochs: int, eval_frequency: int, warmup: bool = True) -> Dict[str, int]:
    """Overrides for a `warmup_linear.v1` schedule of `epochs` epochs: warm-up for
    one epoch (at most a tenth of the run, as Table 6's 1-10 epochs of 100), linear
    decay to zero at the last step, and at least one evaluation per epoch. For a
    schedule counted in epochs (`warmup` False), its epoch's length in steps and the
    same run length and evaluations.

    The run is counted in steps, not epochs: `spacy train` evaluates at steps 0,
    f, 2f, … and never after its last update, so a run of whole epochs (steps 0
    to N - 1) leaves the end of its last epoch, where the rate reaches zero,
    unevaluated and out of `model-best` (a one-epoch run evaluated every half
    epoch kept its half-way model). Here it stops at step N, a multiple of the
    evaluation interval, after evaluating it; that step's update is at rate zero.

    steps_per_epoch (int): Batches in one epoch (`count_batches`).
    epochs (int): Epochs in the run.
    eval_frequency (int): The config's evaluation interval, capped at an epoch
        and lowered, if need be, to divide the run's steps.
    warmup (bool): True for a `warmup_linear.v1` schedule, False for one counted in epochs.
    RETURNS (Dict[str, int]): Dotted config keys and their values.
    """
    if steps_per_epoch < 1 or epochs < 1:
        raise FlatError(f"a schedule needs at least one step and one epoch (got {steps_per_epoch}, {epochs})")
    total = steps_per_epoch * epochs
    every = min(eval_frequency, steps_per_epoch)
    while total % every:
        every -= 1
    rate = {WARMUP: min(steps_per_epoch, total // 10), TOTAL: total} if warmup else {PER_EPOCH: steps_per_epoch}
    return {**rate, EVAL: every, MAX_STEPS: total, MAX_EPOCHS: 0}


def schedule_for(config: Union[Path, Config], train: Path, epochs: int = 0) -> Dict[str, int]:
    """The schedule overrides for training `config` on `train`.

    config (Union[Path, Config]): A training config with a `warmup_linear.v1` rate, or
        one counted in epochs (with `steps_per_epoch`).
    train (Path): The training DocBin.
    epochs (int): Epochs in the run; 0 for the config's `max_epochs`.
    RETURNS (Dict[str, int]): Dotted config keys and their values.
    """
    cfg = _config(config)
    rate = cfg["training"]["optimizer"].get("learn_rate")
    rate = rate if isinstance(rate, dict) else {}
    warmup = "warmup_steps" in rate and "total_steps" in rate
    if not warmup and "steps_per_epoch" not in rate:
        name = config if isinstance(config, Path) else "the config"
        raise FlatError(
            f"{name}: [training.optimizer.learn_rate] is neither a warm-up schedule with warmup_steps and "
            "total_steps (such as warmup_linear.v1) nor one with steps_per_epoch, so there is no step count to set"
        )
    epochs = epochs or int(cfg["training"]["max_epochs"])
    if epochs < 1:
        raise FlatError(f"the config sets max_epochs = {epochs}: pass the number of epochs the run trains (--epochs)")
    return epoch_schedule(count_batches(cfg, train), epochs, int(cfg["training"]["eval_frequency"]), warmup)


def apply_overrides(config: Config, overrides: Dict[str, int]) -> Config:
    """RETURNS (Config): A copy of `config` with the dotted keys set."""
    out = Config(config).copy()
    for key, value in overrides.items():
        *sections, last = key.split(".")
        node = out
        for section in sections:
            node = node[section]
        node[last] = value
    return out


@flat_cli.command("schedule")
def schedule_cli(
    config: Annotated[Path, Arg()],
    train: Annotated[Path, Arg(help="the training DocBin")],
    epochs: Annotated[int, Opt("--epochs", help="epochs in the run (default: the config's max_epochs)")] = 0,
    output: Annotated[Optional[Path], Opt("--output", help="write the config with the schedule set here")] = None,
) -> None:
    """count a config's batches on your training data and set its warm-up and decay in epochs"""
    if not config.exists():
        raise FlatError(f"{config}: no such config")
    cfg = load_config(config)
    epochs = epochs or int(cfg["training"]["max_epochs"])
    overrides = schedule_for(cfg, train, epochs)
    print(
        f"{overrides[MAX_STEPS] // epochs} batches per epoch of {train} with the batcher of {config}; {epochs} epochs"
    )
    if PER_EPOCH in overrides:
        print(
            f"the rate decays after every {overrides[PER_EPOCH]} steps, evaluate every {overrides[EVAL]}; "
            f"the run stops at step {overrides[MAX_STEPS]}, after evaluating it"
        )
    else:
        print(
            f"warm-up {overrides[WARMUP]} steps, rate zero at step {overrides[TOTAL]}, evaluate every "
            f"{overrides[EVAL]}; the run stops at that step, after evaluating it"
        )
    if output is None:
        print(" ".join(f"--{key} {value}" for key, value in overrides.items()))
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        apply_overrides(cfg, overrides).to_disk(output)
        print(f"wrote {output}")
