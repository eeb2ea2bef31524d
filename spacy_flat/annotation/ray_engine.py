"""`annotate --engine ray`: the same run as `local.py` on Ray Data, so the work
spreads over the actors of a local Ray or of a cluster (`--address`).

Records are read and checked on the driver by the same readers as the local
engine (ids, bad-record reports and counts are the local engine's), put into a
Ray `Dataset` one `nlp.pipe` batch a row (cut within each shard as the local
engine cuts it, so every doc meets the same batch-mates), and annotated by
`map_batches` over an actor pool in which each actor loads the pipeline once.
Each actor returns the documents' output lines as the local engine writes them,
and the driver writes the shards in input order (Ray Data keeps the order when
asked), so the two engines' outputs are equal line for line. A killed actor is restarted and its batch retried by Ray
(`max_restarts`, `max_task_retries`); a stopped run resumes shard by shard as
the local one does.

Ray is an optional extra: `pip install spacy-flat[ray]`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence

from ..errors import FlatError
from .local import AnnotateSettings, _bar, _check_manifest, _chunks, _write_atomically, entity_record, scores_key_of
from .records import ReadReport, Record, RecordFormat, input_files, read_records

if TYPE_CHECKING:
    import ray.data

# Set by the fault test: an actor exits hard after this many batches, once per marker file.
CRASH_AFTER_ENV = "SPACY_FLAT_TEST_CRASH_AFTER"
CRASH_MARKER_ENV = "SPACY_FLAT_TEST_CRASH_MARKER"


def require_ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the extra
        raise FlatError("--engine ray needs Ray: pip install spacy-flat[ray]") from None
    return ray


class Annotator:
    """A Ray Data actor: loads the pipeline once, then annotates batches of rows
    (`id`, `text`, `fields` as JSON) into their output lines (`line`).

    chunked (bool): Rows are whole `nlp.pipe` batches instead (`chunk`: the
        records as JSON), cut on the driver exactly as the local engine cuts its
        shards, so every doc meets the same batch-mates and the output is equal to
        the local engine's to the last digit of every probability.
    """

    def __init__(self, pipeline: str, batch_size: int, keep_text: bool, gpu: bool = False, chunked: bool = False):
        import spacy

        if gpu:  # Ray gives a GPU actor its device as CUDA_VISIBLE_DEVICES, so it is device 0
            spacy.require_gpu(0)
        self.nlp = spacy.load(pipeline)
        self.key = scores_key_of(self.nlp)
        self.batch_size = batch_size
        self.keep_text = keep_text
        self.chunked = chunked
        self.batches = 0

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        if self.chunked:
            out: Dict[str, List[Any]] = {"shard": [], "lines": [], "chars": []}
            for shard, chunk in zip(batch["shard"], batch["chunk"]):
                records = [Record(id=i, text=t, origin="", fields=f) for i, t, f in json.loads(str(chunk))]
                out["shard"].append(shard)
                out["lines"].append(json.dumps(self._lines(records), ensure_ascii=False))
                out["chars"].append(sum(len(r.text) for r in records))
        else:
            records = [
                Record(id=str(i), text=str(t), origin="", fields=json.loads(str(f)))
                for i, t, f in zip(batch["id"], batch["text"], batch["fields"])
            ]
            out = {"shard": list(batch["shard"]), "line": self._lines(records), "chars": [len(r.text) for r in records]}
        self.batches += 1
        self._maybe_crash()
        return out

    def _lines(self, records: List[Record]) -> List[str]:
        docs = self.nlp.pipe([r.text for r in records], batch_size=self.batch_size)
        return [
            json.dumps(entity_record(doc, record, self.key, self.keep_text), ensure_ascii=False)
            for doc, record in zip(docs, records)
        ]

    def _maybe_crash(self) -> None:
        after, marker = os.environ.get(CRASH_AFTER_ENV), os.environ.get(CRASH_MARKER_ENV)
        if after and marker and self.batches >= int(after) and not Path(marker).exists():
            Path(marker).write_text("crashed", encoding="utf8")
            os._exit(1)


def annotate_dataset(
    dataset: ray.data.Dataset,
    pipeline: str,
    *,
    batch_size: int = 64,
    actors: int = 2,
    num_gpus: float = 0.0,
    keep_text: bool = False,
    chunked: bool = False,
) -> ray.data.Dataset:
    """Annotate a Ray `Dataset` of rows with `id`, `text`, `fields` (a JSON object
    of the other fields) and `shard` (any int), for users who already have one.

    pipeline (str): A pipeline path or package name each actor loads.
    actors (int): Size of the actor pool.
    num_gpus (float): GPUs per actor (0: CPU actors).
    chunked (bool): Rows are whole batches (`shard`, `chunk`), as `annotate_with_ray` makes them.
    RETURNS (ray.data.Dataset): Rows with `shard`, `line` (the output record as
        JSON) and `chars` (chunked: `lines`, the chunk's records as a JSON list), in
        the input's order when the context preserves order.
    """
    ray = require_ray()
    return dataset.map_batches(
        Annotator,
        fn_constructor_kwargs={
            "pipeline": pipeline,
            "batch_size": batch_size,
            "keep_text": keep_text,
            "gpu": num_gpus > 0,
            "chunked": chunked,
        },
        batch_size=1 if chunked else batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_gpus=num_gpus,
        max_restarts=-1,
        max_task_retries=-1,
    )


def annotate_with_ray(
    pipeline: str,
    inputs: Sequence[str],
    output: Path,
    fmt: Optional[RecordFormat] = None,
    settings: Optional[AnnotateSettings] = None,
    *,
    actors: int = 2,
    address: Optional[str] = None,
    num_gpus: float = 0.0,
) -> Dict[str, Any]:
    """`local.annotate` on Ray: the same shards, summary and resumption.

    address (Optional[str]): A Ray cluster to join; None starts a local Ray for the run.
    RETURNS (Dict[str, Any]): The summary, also written to `output/summary.json`.
    """
    ray = require_ray()
    fmt = fmt or RecordFormat()
    settings = settings or AnnotateSettings()
    files = input_files(inputs)
    output.mkdir(parents=True, exist_ok=True)
    _check_manifest(output, files, fmt, settings, str(pipeline))
    report = ReadReport()
    counts = {"annotated": 0, "characters": 0, "shards_written": 0, "shards_reused": 0}
    start = time.perf_counter()
    pending: Dict[int, List[Record]] = {}
    for index, shard in enumerate(_chunks(read_records(files, fmt, report), settings.shard_size)):
        if (output / f"shard-{index:05d}.jsonl").exists():
            counts["shards_reused"] += 1
        else:
            pending[index] = shard
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        ray.data.DataContext.get_current().enable_progress_bars = False
        # One row per nlp.pipe batch, cut within each shard as the local engine cuts it.
        rows = [
            {"shard": index, "chunk": json.dumps([[r.id, r.text, r.fields] for r in chunk], ensure_ascii=False)}
            for index, shard in pending.items()
            for chunk in _chunks(shard, settings.batch_size)
        ]
        bar = _bar(settings.progress)
        if rows:
            done = annotate_dataset(
                ray.data.from_items(rows),
                str(pipeline),
                batch_size=settings.batch_size,
                actors=actors,
                num_gpus=num_gpus,
                keep_text=settings.keep_text,
                chunked=True,
            )
            for index, lines, chars in _shards(done.iter_rows(), pending):
                _write_atomically(output / f"shard-{index:05d}.jsonl", "".join(line + "\n" for line in lines))
                counts["annotated"] += len(lines)
                counts["characters"] += chars
                counts["shards_written"] += 1
                bar.update(len(lines))
        bar.close()
    finally:
        if started_here:
            ray.shutdown()
    seconds = time.perf_counter() - start
    summary = {
        "engine": "ray",
        "actors": actors,
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


def _shards(rows: Iterable[Dict[str, Any]], pending: Dict[int, List[Record]]) -> Iterator[tuple]:
    """Group the ordered output rows back into shards; each shard is yielded once
    all its records are there. A row count that does not match is an error, never
    a silently short shard."""
    expected = iter(pending.items())
    index, shard = next(expected, (None, []))
    lines: List[str] = []
    chars = 0
    for row in rows:
        if row["shard"] != index:
            raise FlatError(f"Ray returned a row of shard {row['shard']} while shard {index} was incomplete")
        lines.extend(json.loads(row["lines"]))
        chars += int(row["chars"])
        if len(lines) == len(shard):
            yield index, lines, chars
            index, shard = next(expected, (None, []))
            lines, chars = [], 0
    if index is not None:
        raise FlatError(f"Ray returned {len(lines)} of shard {index}'s {len(shard)} records")
