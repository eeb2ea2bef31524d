"""The learning-rate schedule the configs use."""

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
