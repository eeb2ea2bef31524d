"""Output shards of `annotate`: JSON lines or Parquet, written whole or not at
all, and the manifest that keeps a resumed run from mixing other inputs in.

A shard exists only once complete (written beside, then renamed: atomic on
POSIX), so a re-run skips every shard it finds and redoes at most the one a
crash interrupted.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, TypeVar

from ..errors import FlatError
from .records import ReadReport, RecordFormat, require_pyarrow

OUTPUT_FORMATS = ("jsonl", "parquet")
T = TypeVar("T")


def shard_path(output: Path, index: int, output_format: str) -> Path:
    return output / f"shard-{index:05d}.{output_format}"


def write_shard(output: Path, index: int, lines: List[str], output_format: str) -> None:
    """Write one shard of output lines (each a JSON record) in `output_format`."""
    path = shard_path(output, index, output_format)
    partial = path.with_suffix(".partial")
    if output_format == "jsonl":
        partial.write_text("".join(line + "\n" for line in lines), encoding="utf8")
    elif output_format == "parquet":
        pa = require_pyarrow()
        try:
            _write_parquet(pa, partial, [json.loads(line) for line in lines])
        except pa.ArrowException as err:
            raise FlatError(f"{path}: the shard's records do not fit Parquet ({err})") from err
    else:
        raise FlatError(f"unknown output format {output_format!r} (one of {', '.join(OUTPUT_FORMATS)})")
    # On disk before the rename, so that a power cut never leaves an empty shard that counts as complete.
    descriptor = os.open(partial, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(partial, path)


def read_shards(output: Path) -> List[Dict[str, Any]]:
    """RETURNS (List[Dict[str, Any]]): Every output record of a run, in input order.
    From Parquet, a carried field that some records lack is None in those."""
    records: List[Dict[str, Any]] = []
    shards = sorted(output.glob("shard-*.*"), key=lambda p: (int(p.stem.split("-")[1]), p.suffix))
    for path in shards:
        if path.suffix == ".jsonl":
            records.extend(json.loads(line) for line in path.read_text(encoding="utf8").splitlines())
        elif path.suffix == ".parquet":
            pq = require_pyarrow().parquet
            for row in pq.read_table(path).to_pylist():
                # Parquet gives every entity every field: drop the probability where there is none.
                row["entities"] = [{k: v for k, v in e.items() if k != "p" or v is not None} for e in row["entities"]]
                records.append(row)
    return records


def _write_parquet(pa: Any, path: Path, rows: List[Dict[str, Any]]) -> None:
    entity = pa.struct(
        [("start", pa.int64()), ("end", pa.int64()), ("text", pa.string()), ("label", pa.string()), ("p", pa.float64())]
    )
    # The id and entities columns have fixed types, so every shard has the same schema for them.
    columns = {
        "id": pa.array([row.pop("id") for row in rows], type=pa.string()),
        "entities": pa.array([row.pop("entities") for row in rows], type=pa.list_(entity)),
    }
    names: Dict[str, None] = {}
    for row in rows:  # every carried field (and the text), in the order first seen
        names.update(dict.fromkeys(row))
    for name in names:
        columns[name] = _carried_column(pa, [row.get(name) for row in rows])
    pa.parquet.write_table(pa.table(columns), path)


def _carried_column(pa: Any, values: List[Any]) -> Any:
    """A carried field's column: its own type where Arrow infers one, else JSON text
    (mixed types, empty objects), and text for a field null in the whole shard, so
    that shards agree wherever they can."""
    try:
        column = pa.array(values)
        if pa.types.is_null(column.type):
            return pa.array(values, type=pa.string())
        if not _has_empty_struct(pa, column.type):
            return column
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    return pa.array([None if v is None else json.dumps(v, ensure_ascii=False) for v in values], type=pa.string())


def _has_empty_struct(pa: Any, kind: Any) -> bool:
    if pa.types.is_struct(kind):
        return kind.num_fields == 0 or any(_has_empty_struct(pa, kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return bool(_has_empty_struct(pa, kind.value_type))
    return False


def chunks(items: Iterable[T], size: int) -> Iterator[List[T]]:
    """Consecutive lists of `size` items (the last may be shorter)."""
    if size < 1:
        raise FlatError(f"shard and batch sizes must be at least 1, got {size}")
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def check_manifest(output: Path, files: List[Path], fmt: RecordFormat, shape: Dict[str, Any], model: str) -> None:
    """Write the run's manifest, or refuse to resume a run given other arguments.

    shape (Dict[str, Any]): The settings that shape the shards (`AnnotateSettings.shape`).
    """
    manifest = {"inputs": [str(p.resolve()) for p in files], "format": asdict(fmt), **shape, "pipeline": model}
    path = output / "manifest.json"
    if path.exists():
        before = json.loads(path.read_text(encoding="utf8"))
        # Manifests written before Parquet output: JSON lines, and the batch size was not kept.
        before.setdefault("output_format", "jsonl")
        before.setdefault("batch_size", shape.get("batch_size"))
        if before != manifest:
            changed = sorted(k for k in manifest if before.get(k) != manifest[k])
            raise FlatError(
                f"{output} holds shards of a run with other {', '.join(changed)}: resume with the same "
                "arguments, or write to a new --output"
            )
    else:
        path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf8")


def write_summary(
    output: Path, report: ReadReport, counts: Dict[str, int], seconds: float, **engine: Any
) -> Dict[str, Any]:
    """Write `summary.json`, the same for both engines: what was read, annotated,
    skipped (by reason, with places) and how fast, after the engine's own fields.

    RETURNS (Dict[str, Any]): The summary.
    """
    summary = {
        **engine,
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
