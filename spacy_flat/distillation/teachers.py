"""Teachers: trained pipelines, alone or as an ensemble, that give a student
soft targets for the very segments it encodes: per-character tag marginals, or
the best tag paths with their probabilities."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Hashable, List, Optional, Sequence, Tuple, Union, cast

import numpy
import spacy
from spacy.language import Language
from spacy.tokens import Doc

from ..decoding.posterior import posterior_decode
from ..lattice.windows import Segment
from ..pipeline.flat_ner import FlatNER
from ..pipeline.teaching import check_labels
from ..types import ScoredSpan, SoftTarget, TopPaths
from .store import TargetStore, segment_key


class PipelineTeacher:
    """A trained pipeline's `flat_ner` (any architecture, with or without a
    transformer) as a teacher.

    The teacher reads each segment in its own doc, made from the student's doc
    text and run through the teacher's components before `flat_ner` (a
    transformer, say), so it sees the same characters and context as the student.

    nlp (Language): The teacher pipeline.
    name (str): Its `flat_ner` component.
    temperature (float): Divides the teacher CRF's potentials.
    top_k (int): 0: tag marginals; k > 0: the k best paths (`FlatNER.soft_targets`).
    """

    def __init__(self, nlp: Language, name: str = "flat_ner", temperature: float = 1.0, top_k: int = 0) -> None:
        component = nlp.get_pipe(name)
        if not isinstance(component, FlatNER):
            raise ValueError(f"'{name}' in the teacher pipeline is a {type(component).__name__}, not flat_ner")
        if top_k < 0:
            raise ValueError(f"top_k must be 0 (tag marginals) or more, got {top_k}")
        self.nlp = nlp
        self.component = component
        self.temperature = temperature
        self.top_k = top_k
        self.labels: Tuple[str, ...] = component.labels
        self._upstream = nlp.pipe_names[: nlp.pipe_names.index(name)]

    @classmethod
    def from_disk(
        cls, path: Union[str, Path], name: str = "flat_ner", temperature: float = 1.0, top_k: int = 0
    ) -> PipelineTeacher:
        """Load a saved or packaged pipeline (a path or an installed package's name)."""
        return cls(spacy.load(path), name, temperature, top_k)

    @property
    def reads_whole_docs(self) -> bool:
        """Whether a segment's marginals depend on its doc beyond its own text (a transformer reads it)."""
        return bool(self._upstream)

    def targets(self, segments: Sequence[Segment]) -> List[SoftTarget]:
        """RETURNS: Per segment, (length, n_tags) tag marginals, or the `top_k` best
        paths (`TopPaths`), under the teacher's boundary rules."""
        own = list(segments)
        if any(len(s) for s in segments):
            texts: Dict[int, str] = {}
            for segment in segments:
                texts.setdefault(id(segment.doc), segment.doc.text)
            with self.nlp.select_pipes(enable=self._upstream):
                docs = dict(zip(texts, self.nlp.pipe(texts.values())))
            own = [Segment(docs[id(s.doc)], s.start, s.end, s.text) for s in segments]
        return self.component.soft_targets(own, temperature=self.temperature, top_k=self.top_k)


class EnsembleTeacher:
    """Several teachers with the same labels whose distributions are mixed, each
    member weighing the same: each character's tag marginals are the mean of the
    members'; with best paths, the members' paths are pooled, each with the mean
    of its probability under every member (0 under a member that did not keep
    it), so up to k paths per member (`pool_paths`).

    members (Sequence): Teachers (`PipelineTeacher`, or anything with `labels`,
        `top_k` and `targets`), all giving marginals or all giving paths.
    """

    def __init__(self, members: Sequence[PipelineTeacher]) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = list(members)
        self.labels = members[0].labels
        for k, member in enumerate(members[1:], start=2):
            check_labels(self.labels, member.labels, f"ensemble member {k}")
        kinds = {bool(member.top_k) for member in members}
        if len(kinds) > 1:
            raise ValueError("an ensemble's members must all give tag marginals or all give best paths (top_k)")
        self.top_k = max(member.top_k for member in members)

    @property
    def reads_whole_docs(self) -> bool:
        return any(member.reads_whole_docs for member in self.members)

    def targets(self, segments: Sequence[Segment]) -> List[SoftTarget]:
        """RETURNS: Per segment, the mean of the members' marginals, or their pooled paths."""
        per_member = [member.targets(segments) for member in self.members]
        if self.top_k:
            return [pool_paths([cast(TopPaths, row) for row in rows]) for rows in zip(*per_member)]
        return [numpy.mean(rows, axis=0).astype("float32") for rows in zip(*per_member)]


def pool_paths(members: Sequence[TopPaths]) -> TopPaths:
    """The mixture of several teachers' best paths through one segment: every path
    any of them kept, with the mean of its probabilities under them (0 where a
    teacher did not keep it), most probable first (ties in the order met). The
    probabilities still sum to 1, as each teacher's do.

    RETURNS (TopPaths): The pooled paths.
    """
    found: Dict[bytes, numpy.ndarray] = {}
    mass: Dict[bytes, float] = {}
    for member in members:
        for path, probability in zip(member.paths, member.probabilities):
            key = path.astype("int16").tobytes()
            found.setdefault(key, path)
            mass[key] = mass.get(key, 0.0) + float(probability) / len(members)
    if not found:
        return members[0]
    order = sorted(found, key=lambda key: -mass[key])
    paths = numpy.stack([found[key] for key in order]).astype("int16")
    return TopPaths(paths, numpy.array([mass[key] for key in order], dtype="float32"))


class CachedTargets:
    """A teacher's targets computed once per segment and kept (in memory) for
    every later epoch: the teacher runs once over the training data, not once
    an epoch, and once for every student that shares the cache.

    teacher: A `PipelineTeacher` or `EnsembleTeacher`.
    source: What the targets depend on (`DistillationSettings.target_source`),
        checked when another student reuses the cache; None where unknown.
    store (Optional[TargetStore]): A file that keeps the targets beyond this
        process: those found there are read, not computed, and those computed
        are added to it.
    """

    def __init__(
        self,
        teacher: Union[PipelineTeacher, EnsembleTeacher],
        source: Optional[Hashable] = None,
        store: Optional[TargetStore] = None,
    ) -> None:
        self.teacher = teacher
        self.source = source
        self.store = store
        self.labels = teacher.labels
        self._cache: Dict[Tuple[str, int, str], SoftTarget] = {}
        self.computed = 0
        self.reused = 0
        self.loaded = 0

    def targets(self, segments: Sequence[Segment]) -> List[SoftTarget]:
        """RETURNS: Per segment, the teacher's targets, computed only for segments not seen
        before (in this process or, with a store, in its file)."""
        keys = [self._key(s) for s in segments]
        missing: Dict[Tuple[str, int, str], int] = {}
        for k, key in enumerate(keys):
            if key not in self._cache:
                missing.setdefault(key, k)
        found = 0
        if missing and self.store is not None:
            digests = {segment_key(*key): key for key in missing}
            for digest, target in self.store.get(digests).items():
                self._cache[digests[digest]] = target
                del missing[digests[digest]]
                found += 1
        if missing:
            computed: Dict[Tuple[str, int, str], SoftTarget] = {}
            for key, rows in zip(missing, self.teacher.targets([segments[k] for k in missing.values()])):
                # float16 halves the memory of a large corpus; marginals need no more precision.
                # Paths come as int16 tag ids with one probability each: small already.
                computed[key] = rows if isinstance(rows, TopPaths) else rows.astype("float16")
            self._cache.update(computed)
            if self.store is not None:
                self.store.put({segment_key(*key): target for key, target in computed.items()})
        self.computed += len(missing)
        self.loaded += found
        self.reused += len(segments) - len(missing) - found
        return [_unpacked(self._cache[key]) for key in keys]

    def _key(self, segment: Segment) -> Tuple[str, int, str]:
        # A teacher that reads the whole doc sees context beyond the segment's text.
        context = segment.doc.text if self.teacher.reads_whole_docs else ""
        return segment.text, segment.start if context else 0, context


def _unpacked(target: SoftTarget) -> SoftTarget:
    return target if isinstance(target, TopPaths) else target.astype("float32")


def ensemble_entities(
    teacher: Union[PipelineTeacher, EnsembleTeacher], reference: FlatNER, docs: Sequence[Doc]
) -> List[List[ScoredSpan]]:
    """The entities a teacher predicts for `docs` by posterior decoding: the best
    valid path under the BILUO transitions and boundary rules, scored by the
    teacher's (mean) marginals, since an ensemble has no CRF of its own.

    Each entity's confidence is the least marginal of its tags over its
    characters: it is at least that sure of every character of the entity.

    reference (FlatNER): A component with the teacher's labels (a member, or the
        student), whose windows, tag set and boundary rules are used.
    RETURNS (List[List[ScoredSpan]]): Each doc's entities with their confidence, doc offsets.
    """
    if teacher.top_k:
        raise ValueError("entities are decoded from a teacher's tag marginals: give a teacher with top_k = 0")
    segmenter, tag_set, rules = reference.segmenter, reference.tag_set, reference.boundary_rules
    segments, plans = segmenter.segments(list(docs))
    marginals = [cast(numpy.ndarray, rows) for rows in teacher.targets(segments)]
    width = max([len(s) for s in segments] + [1])
    forbidden: Optional[numpy.ndarray] = None
    if rules is not None:
        forbidden = rules.forbidden((s.text for s in segments), tag_set, width)
    spans: List[List[ScoredSpan]] = []
    for k, rows in enumerate(marginals):
        ids = posterior_decode(rows, tag_set, None if forbidden is None else forbidden[k])
        sure = rows[numpy.arange(len(ids)), ids] if ids else rows[:0, 0]
        spans.append([(s, e, label, float(sure[s:e].min())) for s, e, label in tag_set.decode(ids)])
    return segmenter.merge(plans, spans)
