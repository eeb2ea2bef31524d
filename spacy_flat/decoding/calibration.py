"""How well entity probabilities are calibrated, and the temperature that
calibrates them (plain NumPy).

An outcome is one predicted entity: its probability and whether it is right
(the gold data has the same span with the same label). Calibrated, entities
given 0.8 are right 80% of the time.
"""

from typing import Callable, Dict, List, Sequence, Tuple

import numpy

# (probability, correct) of one predicted entity.
Outcome = Tuple[float, bool]
# Temperatures tried when fitting, then refined around the best (log-spaced: 0.25 to 8).
GRID = tuple(float(t) for t in numpy.exp(numpy.linspace(numpy.log(0.25), numpy.log(8.0), 31)))


def reliability(outcomes: Sequence[Outcome], bins: int = 10) -> List[Dict[str, float]]:
    """Predicted entities in equal-width probability bins: count, mean probability, accuracy.

    RETURNS (List[Dict[str, float]]): One row per non-empty bin, lowest first.
    """
    probs = numpy.asarray([p for p, _ in outcomes], dtype=float)
    right = numpy.asarray([c for _, c in outcomes], dtype=float)
    index = numpy.minimum((probs * bins).astype(int), bins - 1)
    rows = []
    for k in range(bins):
        inside = index == k
        if inside.any():
            rows.append(
                {
                    "low": k / bins,
                    "high": (k + 1) / bins,
                    "count": int(inside.sum()),
                    "confidence": float(probs[inside].mean()),
                    "accuracy": float(right[inside].mean()),
                }
            )
    return rows


def expected_calibration_error(outcomes: Sequence[Outcome], bins: int = 10) -> float:
    """RETURNS (float): Σ over bins of (share of entities) × |accuracy − mean probability|."""
    total = len(outcomes)
    if not total:
        return 0.0
    return sum(row["count"] / total * abs(row["accuracy"] - row["confidence"]) for row in reliability(outcomes, bins))


def log_loss(outcomes: Sequence[Outcome]) -> float:
    """RETURNS (float): Mean negative log-likelihood of the outcomes under their probabilities."""
    probs = numpy.clip(numpy.asarray([p for p, _ in outcomes], dtype=float), 1e-9, 1 - 1e-9)
    right = numpy.asarray([c for _, c in outcomes], dtype=bool)
    return float(-numpy.where(right, numpy.log(probs), numpy.log1p(-probs)).mean()) if len(outcomes) else 0.0


def fit_temperature(outcomes_at: Callable[[float], Sequence[Outcome]], grid: Sequence[float] = GRID) -> float:
    """The temperature whose outcomes have the least log loss: a grid search, then
    a golden-section search between the best point's neighbours.

    outcomes_at (Callable[[float], Sequence[Outcome]]): The outcomes at a temperature.
    RETURNS (float): The fitted temperature.
    """
    losses = [log_loss(outcomes_at(t)) for t in grid]
    best = int(numpy.argmin(losses))
    low, high = grid[max(0, best - 1)], grid[min(len(grid) - 1, best + 1)]
    ratio = (5**0.5 - 1) / 2
    for _ in range(20):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if log_loss(outcomes_at(a)) <= log_loss(outcomes_at(b)):
            high = b
        else:
            low = a
    return (low + high) / 2


def precision_recall_at(outcomes: Sequence[Outcome], n_gold: int, threshold: float) -> Tuple[float, float, int]:
    """RETURNS (Tuple[float, float, int]): Precision, recall and entities kept at `threshold`."""
    kept = [c for p, c in outcomes if p >= threshold]
    right = sum(kept)
    return (right / len(kept) if kept else 0.0, right / n_gold if n_gold else 0.0, len(kept))
