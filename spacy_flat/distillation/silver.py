"""Silver sentences for self-training: raw text that a teacher annotates, kept
where the teacher is sure of every entity, never a sentence of a dev or test set.

The raw text is read by the pretraining readers (plain text, Markdown, JSON
lines, JSON, CSV, zip; xz, gzip or bz2), cleaned, cut into sentences and
de-duplicated by `SentenceFilter`, which also drops every sentence of the
held-back files, as `pretrain-vectors` does. A kept sentence becomes a doc
marked silver (`teaching.SILVER`) that carries the teacher's entities: a
student learns from the teacher's soft targets on it, never from those
entities as gold.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Union

from spacy.tokens import Doc
from spacy.util import filter_spans

from ..pipeline.teaching import SILVER
from ..vectors.sentences import SentenceFilter
from ..vectors.sources import SourceReport
from .settings import SilverSettings
from .teachers import EnsembleTeacher, PipelineTeacher, ensemble_entities


@dataclass
class SilverReport:
    """What was read, kept and dropped, and why."""

    sources: SourceReport = field(default_factory=SourceReport)
    # Sentences past the de-duplication and held-back filter, and those the teacher judged.
    read: int = 0
    judged: int = 0
    kept: int = 0
    kept_without_entities: int = 0
    dropped: Counter = field(default_factory=Counter)
    entities: Counter = field(default_factory=Counter)

    def summary(self, sentence_filter: SentenceFilter) -> Dict[str, Any]:
        dropped = Counter(self.dropped)
        dropped.update(sentence_filter.dropped)
        unjudged = self.read - self.judged - self.dropped["longer than max_length"]
        if unjudged:
            dropped["read after the cap (max_sentences or max_with_entities) was reached"] = unjudged
        return {
            "documents": sum(self.sources.documents.values()),
            "skipped_records": dict(self.sources.skipped),
            "problems": self.sources.problems,
            "sentences": self.read + sum(sentence_filter.dropped.values()),
            "judged": self.judged,
            "kept": self.kept,
            "kept_without_entities": self.kept_without_entities,
            "dropped": dict(dropped),
            "entities": dict(self.entities),
        }


def silver_docs(
    teacher: Union[PipelineTeacher, EnsembleTeacher],
    texts: Iterable[str],
    sentence_filter: SentenceFilter,
    settings: SilverSettings,
    report: SilverReport,
) -> Iterator[Doc]:
    """Annotate raw documents sentence by sentence and keep the sure ones.

    teacher: The teacher; its (first member's) `flat_ner` gives the windows,
        tags and boundary rules of decoding.
    texts (Iterable[str]): Raw documents (e.g. from `pretraining.sources.read_texts`).
    sentence_filter (SentenceFilter): Holds the held-back sentences; counts
        what it drops.
    YIELDS (Doc): Kept sentences, marked silver, with the teacher's entities.
    """
    first = teacher.members[0] if isinstance(teacher, EnsembleTeacher) else teacher
    nlp, reference = first.nlp, first.component
    batch: List[str] = []
    for sentence in sentence_filter.sentences(texts, settings.min_han):
        report.read += 1
        if len(sentence) > settings.max_length:
            report.dropped["longer than max_length"] += 1
            continue
        batch.append(sentence)
        if len(batch) == settings.batch_size:
            yield from _judge(teacher, reference, [nlp.make_doc(s) for s in batch], settings, report)
            batch = []
        if _full(settings, report):
            return
    if batch:
        yield from _judge(teacher, reference, [nlp.make_doc(s) for s in batch], settings, report)


def _judge(
    teacher: Union[PipelineTeacher, EnsembleTeacher],
    reference: Any,
    docs: List[Doc],
    settings: SilverSettings,
    report: SilverReport,
) -> Iterator[Doc]:
    for doc, spans in zip(docs, ensemble_entities(teacher, reference, docs)):
        if _full(settings, report):
            return
        report.judged += 1
        if any(p < settings.min_probability for *_, p in spans):
            report.dropped["an entity below min_probability"] += 1
            continue
        if not spans and not _sampled(doc.text, settings.empty_share):
            report.dropped["no entities, not sampled"] += 1
            continue
        entities = [doc.char_span(s, e, label=label, alignment_mode="expand") for s, e, label, _ in spans]
        doc.ents = filter_spans([ent for ent in entities if ent is not None])
        doc.user_data[SILVER] = True
        report.kept += 1
        report.kept_without_entities += not spans
        report.entities.update(label for _, _, label, _ in spans)
        yield doc


def _full(settings: SilverSettings, report: SilverReport) -> bool:
    """Whether a cap on the kept sentences, all of them or those with entities, is reached."""
    if settings.max_sentences and report.kept >= settings.max_sentences:
        return True
    with_entities = report.kept - report.kept_without_entities
    return bool(settings.max_with_entities) and with_entities >= settings.max_with_entities


def _sampled(text: str, share: float) -> bool:
    """Whether `text` falls in a fixed `share` of all texts (by its hash)."""
    if share >= 1.0:
        return True
    digest = hashlib.blake2b(text.encode("utf8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") < share * 2**64
