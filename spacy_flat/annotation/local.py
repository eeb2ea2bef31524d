"""`annotate` on one machine: a pipeline over a corpus, written as JSON-lines
shards that a re-run skips once complete, so a crash or a stop loses at most
the shard it was writing.

A shard is the next `shard_size` good records in input order, so the same
inputs always make the same shards; a `manifest.json` holds what a run was
given, and a re-run with other inputs or settings is refused rather than mixed.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from ..errors import FlatError
from .records import ReadReport, Record, RecordFormat, input_files, read_records


@dataclass(frozen=True)
class AnnotateSettings:
    """How a run annotates and writes.

    batch_size (int): Docs per `nlp.pipe` batch.
    n_process (int): Processes for `nlp.pipe` (CPU).
    shard_size (int): Documents per output shard.
    keep_text (bool): Write each document's text with its entities.
    progress (bool): Show a progress bar.
    """

    batch_size: int = 64
    n_process: int = 1
    shard_size: int = 10_000
    keep_text: bool = False
    progress: bool = True


def entity_record(doc: Doc, record: Record, scores_key: Optional[str], keep_text: bool = False) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): The output record of one document: its id, its
    entities (character offsets, text, label and, where the pipeline gives it,
    probability), the record's other fields and, if asked, its text."""
    group = doc.spans.get(scores_key) if scores_key else None
    probs = list(group.attrs.get("scores", [])) if group is not None else []
    entities = []
    for k, ent in enumerate(doc.ents):
        entity: Dict[str, Any] = {"start": ent.start_char, "end": ent.end_char, "text": ent.text, "label": ent.label_}
        if k < len(probs):
            entity["p"] = round(float(probs[k]), 6)
        entities.append(entity)
    out: Dict[str, Any] = {"id": record.id, "entities": entities, **record.fields}
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


def annotate(
    pipeline: Union[str, Path, Language],
    inputs: Sequence[str],
    output: Path,
    fmt: Optional[RecordFormat] = None,
    settings: Optional[AnnotateSettings] = None,
) -> Dict[str, Any]:
    """Annotate every document of `inputs` into shards in `output`.

    pipeline: A pipeline or the path or name to load it from.
    fmt (Optional[RecordFormat]): Where text and id are in records; defaults if None.
    settings (Optional[AnnotateSettings]): Batching, processes, shards; defaults if None.
    RETURNS (Dict[str, Any]): The summary, also written to `output/summary.json`.
    """
    fmt = fmt or RecordFormat()
    settings = settings or AnnotateSettings()
    nlp = pipeline if isinstance(pipeline, Language) else spacy.load(pipeline)
    files = input_files(inputs)
    output.mkdir(parents=True, exist_ok=True)
    _check_manifest(output, files, fmt, settings, str(pipeline) if not isinstance(pipeline, Language) else "")
    report = ReadReport()
    key = scores_key_of(nlp)
    counts = {"annotated": 0, "characters": 0, "shards_written": 0, "shards_reused": 0}
    start = time.perf_counter()
    bar = _bar(settings.progress)
    for index, shard in enumerate(_chunks(read_records(files, fmt, report), settings.shard_size)):
        path = output / f"shard-{index:05d}.jsonl"
        if path.exists():
            counts["shards_reused"] += 1
            bar.update(len(shard))
            continue
        lines = []
        for doc, record in _pipe(nlp, shard, settings):
            lines.append(json.dumps(entity_record(doc, record, key, settings.keep_text), ensure_ascii=False))
            counts["characters"] += len(record.text)
            bar.update(1)
        _write_atomically(path, "".join(line + "\n" for line in lines))
        counts["annotated"] += len(lines)
        counts["shards_written"] += 1
        bar.set_postfix_str(f"{counts['characters'] / max(1e-9, time.perf_counter() - start):,.0f} chars/s")
    bar.close()
    seconds = time.perf_counter() - start
    summary = {
        "read": report.read,
        **counts,
        "skipped": sum(report.skipped.values()),
        "skipped_by_reason": dict(report.skipped),
        "problems": report.problems,
        "seconds": round(seconds, 2),
        "characters_per_second": round(counts["characters"] / seconds, 1) if seconds > 0 else 0.0,
    }
    (output / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf8")
    return summary


def _pipe(nlp: Language, shard: List[Record], settings: AnnotateSettings) -> Iterator[Tuple[Doc, Record]]:
    pairs = ((record.text, record) for record in shard)
    yield from nlp.pipe(pairs, as_tuples=True, batch_size=settings.batch_size, n_process=settings.n_process)


def _chunks(records: Iterable[Record], size: int) -> Iterator[List[Record]]:
    if size < 1:
        raise FlatError(f"shard_size must be at least 1, got {size}")
    iterator = iter(records)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _write_atomically(path: Path, text: str) -> None:
    # A shard exists only once complete: written beside, then renamed (atomic on POSIX).
    partial = path.with_suffix(".partial")
    partial.write_text(text, encoding="utf8")
    os.replace(partial, path)


def _check_manifest(output: Path, files: List[Path], fmt: RecordFormat, settings: AnnotateSettings, model: str) -> None:
    manifest = {
        "inputs": [str(p.resolve()) for p in files],
        "format": asdict(fmt),
        "shard_size": settings.shard_size,
        "keep_text": settings.keep_text,
        "pipeline": model,
    }
    path = output / "manifest.json"
    if path.exists():
        before = json.loads(path.read_text(encoding="utf8"))
        if before != manifest:
            changed = sorted(k for k in manifest if before.get(k) != manifest[k])
            raise FlatError(
                f"{output} holds shards of a run with other {', '.join(changed)}: resume with the same "
                "arguments, or write to a new --output"
            )
    else:
        path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf8")


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(unit="doc", unit_scale=True, mininterval=1.0)
