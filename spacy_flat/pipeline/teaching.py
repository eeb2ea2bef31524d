"""The student's side of distillation: a teacher's soft targets beside the gold
loss, from one forward pass of the student.

A teacher is anything that gives soft targets for the segments the student
encodes (`SoftTargets`): per-character tag marginals, or its best tag paths with
their probabilities (`TopPaths`); one trained pipeline, an ensemble, or a cache
of either (`spacy_flat.distillation`). Docs marked silver (raw text the teacher
annotated) have no gold: they are learned from the teacher alone.
"""

from dataclasses import dataclass
from typing import List, Optional, Protocol, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from thinc.types import Floats3d

from ..lattice.windows import Segment
from ..layers import TorchTagger
from ..types import SoftTarget, TopPaths

# doc.user_data key of a doc without gold entities, learned from the teacher alone.
SILVER = "spacy_flat.silver"


class SoftTargets(Protocol):
    """A teacher as the student sees it."""

    labels: Tuple[str, ...]

    def targets(self, segments: Sequence[Segment]) -> List[SoftTarget]:
        """RETURNS: Per segment, (length, n_tags) tag marginals or the best paths
        (`TopPaths`), in the student's tag order."""
        ...


def is_silver(doc: Doc) -> bool:
    """RETURNS (bool): Whether `doc` is raw text with no gold, to learn from the teacher alone."""
    return bool(doc.user_data.get(SILVER, False))


@dataclass
class Teaching:
    """How a student learns from a teacher.

    teacher (SoftTargets): The teacher.
    weight (float): The soft loss's share on gold docs, α in (1 - α) gold + α soft.
    temperature (float): Both CRFs' potentials are divided by it, the
        teacher's for the soft targets and the student's in the soft loss (the
        teacher must have been given the same one).
    """

    teacher: SoftTargets
    weight: float = 0.5
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"the soft loss's weight must lie in [0, 1], got {self.weight}")
        if self.temperature <= 0:
            raise ValueError(f"the temperature must be positive, got {self.temperature}")

    def loss(
        self,
        tagger: TorchTagger,
        segments: Sequence[Segment],
        scores: Floats3d,
        gold: Sequence[Sequence[int]],
    ) -> Tuple[float, Floats3d]:
        """(1 - α) times the gold loss plus α times the soft loss on rows with
        gold; the soft loss alone, at full weight, on silver rows (no gold).
        Each loss is averaged over its own rows.

        RETURNS (Tuple[float, Floats3d]): The loss and the gradient of `scores`.
        """
        targets = self.teacher.targets(segments)
        alpha = self.weight
        loss, d_scores = 0.0, scores * 0
        parts = [
            (1.0 - alpha, lambda w: tagger.loss(scores, gold, weight=w)),
            (alpha, lambda w: soft_loss(tagger, scores, _rows(targets, gold, True), self.temperature, weight=w)),
            (1.0, lambda w: soft_loss(tagger, scores, _rows(targets, gold, False), self.temperature, weight=w)),
        ]
        for weight, compute in parts:
            if weight > 0.0:
                # Each loss backpropagates its weighted value (the CRF's own gradients too), so its
                # gradient of the scores comes weighted; the loss it reports does not.
                part, d_part = compute(weight)
                loss, d_scores = loss + weight * float(part), d_scores + d_part
        return loss, d_scores


def soft_loss(
    tagger: TorchTagger,
    scores: Floats3d,
    targets: Sequence[Optional[SoftTarget]],
    temperature: float = 1.0,
    weight: float = 1.0,
) -> Tuple[float, Floats3d]:
    """The student's loss against a teacher's soft targets, averaged over the rows
    that have them, and its gradient: the cross-entropy of the CRF's marginals
    against tag marginals (`TorchTagger.soft_loss`), or the weighted NLL of the
    teacher's best paths (`TorchTagger.path_loss`).

    targets: Per row, the teacher's targets, all of one kind, or None.
    RETURNS (Tuple[float, Floats3d]): The loss and the gradient of `scores`.
    """
    given = [target for target in targets if target is not None]
    paths = [target for target in given if isinstance(target, TopPaths)]
    if paths and len(paths) < len(given):
        raise ValueError("a batch's soft targets mix tag marginals and best paths: give one kind")
    if paths:
        return tagger.path_loss(scores, [t if isinstance(t, TopPaths) else None for t in targets], temperature, weight)
    marginals = [t if isinstance(t, numpy.ndarray) else None for t in targets]
    return tagger.soft_loss(scores, marginals, temperature, weight)


def _rows(targets: Sequence[SoftTarget], gold: Sequence[Sequence[int]], with_gold: bool) -> List[Optional[SoftTarget]]:
    """The targets of the rows that have gold (or of those that have none), None elsewhere."""
    return [target if bool(len(row)) == with_gold else None for target, row in zip(targets, gold)]


def check_labels(student: Sequence[str], teacher: Sequence[str], what: str = "the teacher") -> None:
    """Raise ValueError unless `teacher` has the student's labels: marginals are
    read tag by tag in one order, which the labels fix."""
    if sorted(set(student)) != sorted(set(teacher)):
        raise ValueError(
            f"{what} has labels {sorted(set(teacher))} but the student has {sorted(set(student))}: "
            "a teacher must tag the same labels (rename them with `convert --rename-labels`)"
        )
