"""`annotate` on one machine: a pipeline over a corpus, written as JSON-lines
or Parquet shards (`shards.py`) that a re-run skips once complete, so a crash or a stop loses at most
the shard it was writing.

A shard is the next `shard_size` good records in input order, so the same
inputs always make the same shards; a `manifest.json` holds what a run was
given, and a re-run with other inputs or settings is refused rather than mixed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import spacy
from spacy.language import Language
from spacy.tokens import Doc

from ..errors import FlatError
from .batches import BatchResult, annotate_batch, output_line, scores_key_of
from .records import ReadReport, Record, RecordFormat, input_files, read_records
from .shards import OUTPUT_FORMATS, check_manifest, chunks, shard_path, write_shard, write_summary

logger = logging.getLogger("spacy.flat")


@dataclass(frozen=True)
class AnnotateSettings:
    """How a run annotates and writes.

    batch_size (int): Docs per `nlp.pipe` batch.
    n_process (int): Processes for `nlp.pipe` (CPU).
    shard_size (int): Documents per output shard.
    keep_text (bool): Write each document's text with its entities.
    progress (bool): Show a progress bar.
    output_format (str): "jsonl", or "parquet" (needs pyarrow).
    """

    batch_size: int = 64
    n_process: int = 1
    shard_size: int = 10_000
    keep_text: bool = False
    progress: bool = True
    output_format: str = "jsonl"

    def __post_init__(self) -> None:
        if self.output_format not in OUTPUT_FORMATS:
            raise FlatError(f"unknown output format {self.output_format!r} (one of {', '.join(OUTPUT_FORMATS)})")

    def shape(self) -> Dict[str, Any]:
        """RETURNS (Dict[str, Any]): The settings that decide what the shards hold, for the manifest."""
        # The batch size too: a document's probabilities depend on its batch-mates in their last digits.
        return {
            "shard_size": self.shard_size,
            "batch_size": self.batch_size,
            "keep_text": self.keep_text,
            "output_format": self.output_format,
        }


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
    check_manifest(output, files, fmt, settings.shape(), str(pipeline) if not isinstance(pipeline, Language) else "")
    report = ReadReport()
    key = scores_key_of(nlp)
    counts = {"annotated": 0, "characters": 0, "shards_written": 0, "shards_reused": 0}
    start = time.perf_counter()
    bar = _bar(settings.progress)
    for index, shard in enumerate(chunks(read_records(files, fmt, report), settings.shard_size)):
        if shard_path(output, index, settings.output_format).exists():
            counts["shards_reused"] += 1
            bar.update(len(shard))
            continue
        done = _annotate_shard(nlp, shard, settings, key)
        for origin, reason, detail in done.skipped:
            report.skip(origin, reason, detail)
        write_shard(output, index, done.lines, settings.output_format)
        counts["annotated"] += len(done.lines)
        counts["characters"] += done.chars
        counts["shards_written"] += 1
        bar.update(len(shard))
        bar.set_postfix_str(f"{counts['characters'] / max(1e-9, time.perf_counter() - start):,.0f} chars/s")
    bar.close()
    return write_summary(output, report, counts, time.perf_counter() - start)


def _annotate_shard(nlp: Language, shard: List[Record], settings: AnnotateSettings, key: Optional[str]) -> BatchResult:
    """One shard, batch by batch as the Ray engine cuts it (each file's records in the
    shard cut into batches from their first, since Ray reads each file in its own
    task); with `n_process` > 1, in spaCy's processes."""
    if settings.n_process > 1:
        try:
            return _annotate_in_processes(nlp, shard, settings, key)
        except Exception as err:
            # Processes that cannot start (a pipeline that does not pickle, say): the shard is done here.
            logger.warning(
                "annotating a shard with %d processes failed (%s); redoing it batch by batch", settings.n_process, err
            )
    result = BatchResult()
    batches = (b for _, part in groupby(shard, key=lambda r: r.source) for b in chunks(part, settings.batch_size))
    for batch in batches:
        done = annotate_batch(nlp, batch, key, settings.keep_text)
        result.lines.extend(done.lines)
        result.skipped.extend(done.skipped)
        result.chars += done.chars
    return result


def _annotate_in_processes(
    nlp: Language, shard: List[Record], settings: AnnotateSettings, key: Optional[str]
) -> BatchResult:
    """The shard in spaCy's processes; the records they return no doc for (a component
    failed on their batch) are then done here one by one, where each failure is named.

    The errors stay in the workers, whose error handler drops the failed batch: an error
    that reaches the parent makes spaCy stop its workers, and a forked worker blocked on
    sending a large batch then never exits (the other workers hold the pipe open).
    """
    lines: Dict[int, str] = {}
    result = BatchResult()
    previous = _set_error_handlers(nlp, {name: _drop_failed_docs for name in ["", *nlp.pipe_names]})
    try:
        pairs = ((record.text, k) for k, record in enumerate(shard))
        for doc, k in nlp.pipe(pairs, as_tuples=True, batch_size=settings.batch_size, n_process=settings.n_process):
            lines[k] = output_line(doc, shard[k], key, settings.keep_text)
            result.chars += len(shard[k].text)
    finally:
        _set_error_handlers(nlp, previous)
    for k, record in enumerate(shard):
        if k not in lines:
            done = annotate_batch(nlp, [record], key, settings.keep_text)
            result.skipped.extend(done.skipped)
            result.chars += done.chars
            if done.lines:
                lines[k] = done.lines[0]
    result.lines = [lines[k] for k in sorted(lines)]
    return result


def _drop_failed_docs(name: str, component: Any, docs: List[Doc], error: Exception) -> None:
    """A spaCy error handler that drops the docs a component failed on, to be redone and reported."""


def _set_error_handlers(nlp: Language, handlers: Dict[str, Callable[..., Any]]) -> Dict[str, Callable[..., Any]]:
    """Set the pipeline's ("") and its components' error handlers. RETURNS: Those they replace."""
    previous: Dict[str, Callable[..., Any]] = {"": nlp.default_error_handler}
    nlp.default_error_handler = handlers[""]
    for name, component in nlp.pipeline:
        if name in handlers and hasattr(component, "get_error_handler") and hasattr(component, "set_error_handler"):
            previous[name] = component.get_error_handler()
            component.set_error_handler(handlers[name])
    return previous


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
