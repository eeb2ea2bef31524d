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
from .records import RecordFormat, require_pyarrow

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
        _write_parquet(partial, [json.loads(line) for line in lines])
    else:
        raise FlatError(f"unknown output format {output_format!r} (one of {', '.join(OUTPUT_FORMATS)})")
    os.replace(partial, path)


def read_shards(output: Path) -> List[Dict[str, Any]]:
    """RETURNS (List[Dict[str, Any]]): Every output record of a run, in input order."""
    records: List[Dict[str, Any]] = []
    for path in sorted(output.glob("shard-*.*")):
        if path.suffix == ".jsonl":
            records.extend(json.loads(line) for line in path.read_text(encoding="utf8").splitlines())
        elif path.suffix == ".parquet":
            pq = require_pyarrow().parquet
            for row in pq.read_table(path).to_pylist():
                # Parquet gives every entity every field: drop the probability where there is none.
                row["entities"] = [{k: v for k, v in e.items() if k != "p" or v is not None} for e in row["entities"]]
                records.append(row)
    return records


def _write_parquet(path: Path, rows: List[Dict[str, Any]]) -> None:
    pa = require_pyarrow()
    entity = pa.struct(
        [("start", pa.int64()), ("end", pa.int64()), ("text", pa.string()), ("label", pa.string()), ("p", pa.float64())]
    )
    # The id and entities columns have fixed types, so every shard has the same schema for them.
    columns = {
        "id": pa.array([row.pop("id") for row in rows], type=pa.string()),
        "entities": pa.array([row.pop("entities") for row in rows], type=pa.list_(entity)),
    }
    if any(rows):  # carried fields (and the text): types inferred
        rest = pa.Table.from_pylist(rows)
        columns.update(zip(rest.column_names, rest.columns))
    pa.parquet.write_table(pa.table(columns), path)


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
        before.setdefault("output_format", "jsonl")  # manifests written before Parquet output
        if before != manifest:
            changed = sorted(k for k in manifest if before.get(k) != manifest[k])
            raise FlatError(
                f"{output} holds shards of a run with other {', '.join(changed)}: resume with the same "
                "arguments, or write to a new --output"
            )
    else:
        path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf8")
