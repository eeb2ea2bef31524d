"""The learning-rate schedules the configs use."""

from typing import Iterator

from thinc.api import registry
from thinc.schedules import warmup_linear


@registry.schedules("spacy-flat.warmup_linear.v1")
def warmup_linear_from_first_step(initial_rate: float, warmup_steps: int, total_steps: int) -> Iterator[float]:
    """thinc's `warmup_linear.v1` one step on: step k trains at the rate thinc
    gives step k + 1. thinc's first rate is 0.0, an update that learns nothing,
    and `spacy train` opens its log with "Initial learn rate: 0.0", which reads
    like a broken config; here the first update already learns and the log
    shows its rate. Warm-up and decay keep their lengths in steps.

    initial_rate (float): The rate at the end of the warm-up.
    warmup_steps (int): Steps of linear warm-up.
    total_steps (int): The step at which the rate reaches zero.
    """
    rates = iter(warmup_linear(initial_rate, warmup_steps, total_steps))
    next(rates)
    yield from rates


@registry.schedules("spacy-flat.epoch_decay.v1")
def epoch_decay(initial_rate: float, decay: float, steps_per_epoch: int) -> Iterator[float]:
    """The Lattice LSTM paper's schedule (Zhang & Yang 2018; its released code's
    `lr_decay`): no warm-up, and the rate of epoch e is initial_rate * (1 - decay)^e.
    thinc's `decaying.v1` decays every step as 1 / (1 + decay * t), a different
    curve; this one holds each epoch's rate for `steps_per_epoch` steps, counted
    on the training corpus (`python -m spacy_flat schedule`).

    initial_rate (float): The rate of the first epoch.
    decay (float): The share of the rate dropped after each epoch (the paper's 0.05).
    steps_per_epoch (int): Batches in one epoch.
    """
    if steps_per_epoch < 1 or not 0.0 <= decay < 1.0:
        raise ValueError(f"epoch_decay needs steps_per_epoch >= 1 and 0 <= decay < 1 (got {steps_per_epoch}, {decay})")
    step = 0
    while True:
        yield initial_rate * (1.0 - decay) ** (step // steps_per_epoch)
        step += 1


@registry.schedules("spacy-flat.inverse_epoch_decay.v1")
def inverse_epoch_decay(
    initial_rate: float, decay: float, steps_per_epoch: int, warmup_epochs: float = 0.0
) -> Iterator[float]:
    """FLAT's schedule (Li et al. 2020, Table 5: decay 0.05; its released code's
    `LambdaLR(lambda epoch: 1 / (1 + 0.05 * epoch))`): the rate of epoch e (counted from
    the first step) is initial_rate / (1 + decay * e), held for the epoch's
    `steps_per_epoch` steps; over the first `warmup_epochs` epochs it is also scaled by a
    linear warm-up from the first step (the released code's `WarmupCallback`, schedule
    "constant"), so with a decay the full initial rate is never reached: the rate peaks at
    the end of the warm-up at initial_rate / (1 + decay * (ceil(warmup_epochs) - 1)).
    thinc's `decaying.v1` divides by (1 + decay * t) at every step t instead.

    The released code sets the rate at every update from the initial rate and the
    warm-up factor, which overrides its per-epoch decay: `decay = 0` is what it trains with.

    initial_rate (float): The rate before decay and warm-up.
    decay (float): The per-epoch decay (the paper's 0.05).
    steps_per_epoch (int): Batches in one epoch (`python -m spacy_flat schedule` counts them).
    warmup_epochs (float): Epochs of linear warm-up; 0 for none.
    """
    if steps_per_epoch < 1 or decay < 0.0 or warmup_epochs < 0.0:
        raise ValueError(
            "inverse_epoch_decay needs steps_per_epoch >= 1, decay >= 0 and warmup_epochs >= 0 "
            f"(got {steps_per_epoch}, {decay}, {warmup_epochs})"
        )
    warmup_steps = warmup_epochs * steps_per_epoch
    step = 0
    while True:
        warm = min(1.0, (step + 1) / warmup_steps) if warmup_steps > 0 else 1.0
        yield warm * initial_rate / (1.0 + decay * (step // steps_per_epoch))
        step += 1
