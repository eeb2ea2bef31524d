"""Settings of distillation and self-training, importable without loading a pipeline."""

from dataclasses import dataclass, field, fields
from typing import Any, Dict, List

from ..errors import FlatError


@dataclass
class SilverSettings:
    """Which sentences a teacher's annotation keeps.

    min_probability (float): Every entity's confidence (the least marginal of
        its tags) must reach this.
    empty_share (float): Share of the sure sentences without entities that are
        kept (chosen by a hash of the text, so a re-run keeps the same ones).
    max_sentences (int): Stop after this many kept sentences; 0 for no limit.
    min_han (int): Shorter sentences (in Han characters) are not read.
    max_length (int): Longer sentences (in characters) are passed over.
    batch_size (int): Sentences the teacher scores at once.
    """

    min_probability: float = 0.9
    empty_share: float = 0.2
    max_sentences: int = 0
    min_han: int = 4
    max_length: int = 200
    batch_size: int = 64


@dataclass
class DistillationSettings:
    """The `[flat_distillation]` block of a student's config.

    teachers (List[str]): Teacher pipelines (paths or package names); several
        make an ensemble.
    component (str): The student's (and the teachers') `flat_ner` component.
    soft_weight (float): α: the soft loss's share on gold docs, (1 - α) gold + α soft.
    temperature (float): Divides both CRFs' potentials for the soft targets.
    """

    teachers: List[str] = field(default_factory=list)
    component: str = "flat_ner"
    soft_weight: float = 0.5
    temperature: float = 1.0

    @classmethod
    def from_config(cls, block: Dict[str, Any], where: str) -> "DistillationSettings":
        """Read the block, refusing keys it does not know (a typo would silently train without a teacher)."""
        unknown = set(block) - {f.name for f in fields(cls)}
        if unknown:
            raise FlatError(f"{where}: [flat_distillation] has unknown settings {sorted(unknown)}")
        settings = cls(**block)
        settings.teachers = [str(path) for path in settings.teachers]
        return settings
