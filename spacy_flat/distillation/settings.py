"""Settings of distillation and self-training, importable without loading a pipeline."""

from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Tuple

from ..errors import FlatError

# The kinds of soft target a teacher gives (DistillationSettings.targets).
TARGETS = ("marginals", "top_k")


@dataclass
class SilverSettings:
    """Which sentences a teacher's annotation keeps.

    min_probability (float): Every entity's confidence (the least marginal of
        its tags) must reach this.
    empty_share (float): Share of the sure sentences without entities that are
        kept (chosen by a hash of the text, so a re-run keeps the same ones).
    max_sentences (int): Stop after this many kept sentences; 0 for no limit.
    max_with_entities (int): Stop after this many kept sentences with entities;
        0 for no limit. On text far from the training data most sure sentences
        are empty, and a cap on all of them fills with the empty ones.
    min_han (int): Shorter sentences (in Han characters) are not read.
    max_length (int): Longer sentences (in characters) are passed over.
    batch_size (int): Sentences the teacher scores at once.
    """

    min_probability: float = 0.9
    empty_share: float = 0.2
    max_sentences: int = 0
    max_with_entities: int = 0
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
    targets (str): "marginals": each character's tag marginals, the student
        learning their cross-entropy; "top_k": the teachers' `top_k` best paths
        with their probabilities renormalised over them, the student learning
        their weighted negative log-likelihood (Wang et al., 2020, Top-WK).
    top_k (int): How many best paths with targets = "top_k" (per teacher: an
        ensemble pools its members' paths).
    target_store (Optional[str]): An SQLite file that keeps the teachers' targets
        beyond the run: a resumed run, another seed or a student trained beside it
        read them there rather than run the teachers again. None: in memory only.
    """

    teachers: List[str] = field(default_factory=list)
    component: str = "flat_ner"
    soft_weight: float = 0.5
    temperature: float = 1.0
    targets: str = "marginals"
    top_k: int = 3
    target_store: Optional[str] = None

    def __post_init__(self) -> None:
        if self.targets not in TARGETS:
            raise FlatError(f"[flat_distillation] targets must be one of {list(TARGETS)}, got {self.targets!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise FlatError(f"[flat_distillation] top_k must be a whole number of paths, 1 or more, got {self.top_k!r}")

    @property
    def teacher_top_k(self) -> int:
        """RETURNS (int): The paths each teacher gives; 0 for tag marginals."""
        return self.top_k if self.targets == "top_k" else 0

    @property
    def target_source(self) -> Tuple[Tuple[str, ...], str, float, int]:
        """RETURNS: What a teacher's soft targets depend on (teachers, component, temperature, paths per
        teacher): two students with the same source may share one cache of targets."""
        return tuple(self.teachers), self.component, float(self.temperature), self.teacher_top_k

    def describe(self) -> str:
        """RETURNS (str): The soft targets, in words."""
        return "tag marginals" if self.targets == "marginals" else f"the {self.top_k} best paths of each teacher"

    @classmethod
    def from_config(cls, block: Dict[str, Any], where: str) -> "DistillationSettings":
        """Read the block, refusing keys it does not know (a typo would silently train without a teacher)."""
        unknown = set(block) - {f.name for f in fields(cls)}
        if unknown:
            raise FlatError(f"{where}: [flat_distillation] has unknown settings {sorted(unknown)}")
        try:
            settings = cls(**block)
        except FlatError as err:
            raise FlatError(f"{where}: {err}") from None
        settings.teachers = [str(path) for path in settings.teachers]
        # An empty string, as a command line gives it, keeps the targets in memory.
        settings.target_store = str(settings.target_store) if settings.target_store else None
        return settings
