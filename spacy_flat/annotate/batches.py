"""One `nlp.pipe` batch of records into output lines, shared by the local and
the Ray engine so both write the same records and report the same failures.

A batch that raises is redone one document at a time: the documents that still
raise are reported (by file and line) and skipped, the others are annotated, so
one bad document never stops a run nor takes its batch-mates with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc

from .records import Record

PIPELINE_FAILED = "the pipeline failed on it"
# Output keys of our own: a carried input field of the same name is written as `input_<name>`.
OWN_KEYS = ("id", "entities", "text")
WORKER_DIED = "its worker died on it"


@dataclass
class BatchResult:
    """Output lines of the annotated records, and (origin, reason, detail) of the skipped ones."""

    lines: List[str] = field(default_factory=list)
    skipped: List[Tuple[str, str, str]] = field(default_factory=list)
    chars: int = 0


def entity_record(doc: Doc, record: Record, scores_key: Optional[str], keep_text: bool = False) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): The output record of one document: its id, its
    entities (character offsets, text, label and, where the pipeline gives it,
    probability), the record's other fields (`input_id`, `input_entities`,
    `input_text` for fields of those names) and, if asked, its text."""
    group = doc.spans.get(scores_key) if scores_key else None
    probs = list(group.attrs.get("scores", [])) if group is not None else []
    entities = []
    for k, ent in enumerate(doc.ents):
        entity: Dict[str, Any] = {"start": ent.start_char, "end": ent.end_char, "text": ent.text, "label": ent.label_}
        if k < len(probs):
            entity["p"] = round(float(probs[k]), 6)
        entities.append(entity)
    out: Dict[str, Any] = {"id": record.id, "entities": entities}
    out.update((f"input_{k}" if k in OWN_KEYS else k, v) for k, v in record.fields.items())
    if keep_text:
        out["text"] = record.text
    return out


def scores_key_of(nlp: Language) -> Optional[str]:
    """RETURNS (Optional[str]): The `doc.spans` key of a flat_ner's entity probabilities, if any."""
    for _, component in nlp.pipeline:
        key = getattr(component, "cfg", {}).get("scores_key")
        if key:
            return str(key)
    return None


def output_line(doc: Doc, record: Record, scores_key: Optional[str], keep_text: bool) -> str:
    return json.dumps(entity_record(doc, record, scores_key, keep_text), ensure_ascii=False, default=str)


def annotate_batch(
    nlp: Language, records: List[Record], scores_key: Optional[str], keep_text: bool, skip: Tuple[int, ...] = ()
) -> BatchResult:
    """Annotate `records` as one `nlp.pipe` batch.

    skip (Tuple[int, ...]): Positions of records to skip unannotated (the Ray
        engine's documents that killed their worker), reported as such.
    RETURNS (BatchResult): Lines in input order, and the skipped records.
    """
    result = BatchResult()
    todo = [r for k, r in enumerate(records) if k not in skip]
    try:
        docs = list(nlp.pipe([r.text for r in todo], batch_size=max(1, len(todo))))
    except Exception:  # redone doc by doc below, where each failure is reported
        docs = []
    if len(docs) == len(todo):
        done = iter(zip(docs, todo))
        for k, record in enumerate(records):
            if k in skip:
                result.skipped.append((record.origin, WORKER_DIED, WORKER_DIED))
                continue
            doc, _ = next(done)
            result.lines.append(output_line(doc, record, scores_key, keep_text))
            result.chars += len(record.text)
        return result
    return annotate_one_by_one(nlp, records, scores_key, keep_text, skip)


def annotate_one_by_one(
    nlp: Language, records: List[Record], scores_key: Optional[str], keep_text: bool, skip: Tuple[int, ...] = ()
) -> BatchResult:
    """`annotate_batch` a document at a time: each failure is reported with its reason."""
    result = BatchResult()
    for k, record in enumerate(records):
        if k in skip:
            result.skipped.append((record.origin, WORKER_DIED, WORKER_DIED))
            continue
        try:
            doc = nlp(record.text)
        except Exception as err:
            detail = f"{PIPELINE_FAILED} ({type(err).__name__}: {err})"[:300]
            result.skipped.append((record.origin, PIPELINE_FAILED, detail))
            continue
        result.lines.append(output_line(doc, record, scores_key, keep_text))
        result.chars += len(record.text)
    return result
