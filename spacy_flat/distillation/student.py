"""A student pipeline set up to learn from its teachers during training."""

from typing import Optional

from spacy.language import Language

from ..pipeline.flat_ner import FlatNER
from ..pipeline.teaching import Teaching, check_labels
from .settings import DistillationSettings
from .store import TargetStore, store_source
from .teachers import CachedTargets, EnsembleTeacher, PipelineTeacher


def attach_teachers(
    nlp: Language, settings: DistillationSettings, cache: Optional[CachedTargets] = None
) -> CachedTargets:
    """Load the teachers and set them on the student's component, behind a
    cache, so each training segment's soft targets are computed once.

    nlp (Language): The student, initialized (its labels known).
    cache (Optional[CachedTargets]): The cache of another student of the same
        teachers and settings (another seed or variant in the same process),
        whose targets are reused rather than computed again; None: a new one,
        backed by the settings' `target_store` file where one is set.
    RETURNS (CachedTargets): The cache, whose counts say what the teachers computed.
    """
    if not settings.teachers:
        raise ValueError("no teacher: set [flat_distillation] teachers or give --teacher")
    student = nlp.get_pipe(settings.component)
    if not isinstance(student, FlatNER):
        raise ValueError(f"'{settings.component}' is a {type(student).__name__}, not flat_ner")
    if cache is None:
        members = [
            PipelineTeacher.from_disk(path, settings.component, settings.temperature, settings.teacher_top_k)
            for path in settings.teachers
        ]
        teacher = members[0] if len(members) == 1 else EnsembleTeacher(members)
        store = None
        if settings.target_store:
            store = TargetStore(settings.target_store, store_source(settings))
        cache = CachedTargets(teacher, source=settings.target_source, store=store)
    elif cache.source != settings.target_source:
        raise ValueError(
            f"the cached targets come from {cache.source}, this student's teachers are {settings.target_source}"
        )
    check_labels(student.labels, cache.labels)
    student.teaching = Teaching(cache, weight=settings.soft_weight, temperature=settings.temperature)
    return cache
