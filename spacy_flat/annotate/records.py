"""Documents to annotate, read from plain text (a document a line), JSON lines
(a text field; the other fields are carried through), CSV (a text column),
plain or gzip/xz/bz2-compressed, and Parquet (a text column; needs pyarrow),
from files, directories or globs.

Every document has an id: the record's own (`id_field`), or `file:line`. A bad
record (bad UTF-8, not JSON, no text field, an empty or too long text) is
reported with its file and line, counted, and skipped; it never stops a run.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import lzma
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence

from ..errors import FlatError
from ..files import COMPRESSED, open_binary

FORMATS = (".txt", ".jsonl", ".csv", ".parquet")
# Parquet rows are read this many at a time, so a large file streams.
PARQUET_BATCH = 4096
# Problems listed one by one; beyond this they are only counted.
MAX_LISTED = 200


@dataclass
class Record:
    """One document: its id, its text, where it came from (file and line; file) and the fields it carries."""

    id: str
    text: str
    origin: str
    fields: Dict[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass
class ReadReport:
    """Documents read, and records skipped by reason, with their places."""

    read: int = 0
    skipped: Counter = field(default_factory=Counter)
    problems: List[str] = field(default_factory=list)

    def skip(self, where: str, reason: str, detail: Optional[str] = None) -> None:
        """Count a skipped record under `reason`; list it with `detail` (default: the reason)."""
        self.skipped[reason] += 1
        if len(self.problems) < MAX_LISTED:
            self.problems.append(f"{where}: {detail or reason}")


@dataclass(frozen=True)
class RecordFormat:
    """Where the text and id are in structured records.

    text_field (str): JSON field or CSV column of the text.
    id_field (Optional[str]): JSON field or CSV column of the id; None: `file:line`.
    max_chars (int): Longer texts are skipped (reported); 0 for no limit.
    """

    text_field: str = "text"
    id_field: Optional[str] = None
    max_chars: int = 1_000_000


def input_files(inputs: Sequence[str]) -> List[Path]:
    """Files, directories (every file below, sorted) and globs, in the order given;
    a file named twice is read once, where it first comes.

    RETURNS (List[Path]): The files; raises FileNotFoundError naming an input that matches none.
    """
    files: List[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            matched = sorted(Path(p) for p in glob.glob(item, recursive=True) if Path(p).is_file())
            if not matched:
                raise FileNotFoundError(f"{item}: no such file, directory or glob match")
            files.extend(matched)
    unique: Dict[Path, Path] = {}
    for path in files:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def read_records(files: Sequence[Path], fmt: RecordFormat, report: ReadReport) -> Iterator[Record]:
    """Stream the documents of `files`, skipping (and reporting) bad records."""
    for path in files:
        yield from file_records(path, fmt, report)


def file_records(path: Path, fmt: RecordFormat, report: ReadReport, name: Optional[str] = None) -> Iterator[Record]:
    """Stream the documents of one file, skipping (and reporting) bad records.

    name (Optional[str]): The file as ids and reports name it (default: `path`);
        Ray's reading tasks open the resolved path and name the file as given.
    """
    where = name or str(path)
    suffix, stem = path.suffix.lower(), path.name
    if suffix in COMPRESSED:
        stem = path.name[: -len(suffix)]
    kind = Path(stem).suffix.lower()
    if kind not in FORMATS or (kind == ".parquet" and suffix in COMPRESSED):
        report.skip(where, f"unknown format {kind!r} (.txt, .jsonl or .csv, plain or gz, xz, bz2; .parquet)")
        return
    try:
        for record in _file_records(path, where, kind, fmt, report):
            if not record.text.strip():
                report.skip(record.origin, "empty text")
            elif fmt.max_chars and len(record.text) > fmt.max_chars:
                report.skip(record.origin, f"text longer than {fmt.max_chars:,} characters")
            else:
                report.read += 1
                record.source = where
                yield record
    except (OSError, EOFError, lzma.LZMAError) as err:
        _damaged(report, where, err)


def require_pyarrow() -> Any:
    """RETURNS: pyarrow, with its parquet module loaded; a clear error without it."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:  # pragma: no cover - depends on the extra
        raise FlatError("Parquet needs pyarrow: pip install spacy-flat[parquet]") from None
    return pyarrow


def _file_records(path: Path, where: str, kind: str, fmt: RecordFormat, report: ReadReport) -> Iterator[Record]:
    if kind == ".parquet":
        yield from _parquet_rows(path, where, fmt, report)
        return
    with open_binary(path) as raw:
        reader = {".txt": _text_lines, ".jsonl": _json_lines, ".csv": _csv_rows}[kind]
        yield from reader(raw, where, fmt, report)


def _decoded(raw: IO[bytes], where: str, report: ReadReport) -> Iterator[tuple]:
    for line_no, line in enumerate(raw, 1):
        try:
            yield line_no, line.decode("utf-8-sig" if line_no == 1 else "utf8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            report.skip(f"{where}:{line_no}", f"not valid UTF-8 ({err.reason})")


def _text_lines(raw: IO[bytes], where: str, fmt: RecordFormat, report: ReadReport) -> Iterator[Record]:
    for line_no, line in _decoded(raw, where, report):
        yield Record(f"{where}:{line_no}", line, f"{where}:{line_no}")


def _json_lines(raw: IO[bytes], where: str, fmt: RecordFormat, report: ReadReport) -> Iterator[Record]:
    for line_no, line in _decoded(raw, where, report):
        origin = f"{where}:{line_no}"
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            report.skip(origin, f"not JSON ({err.msg})")
            continue
        if not isinstance(value, dict) or not isinstance(value.get(fmt.text_field), str):
            report.skip(origin, f"no text field {fmt.text_field!r}")
            continue
        yield _record(value, origin, fmt)


def _csv_rows(raw: IO[bytes], where: str, fmt: RecordFormat, report: ReadReport) -> Iterator[Record]:
    # Shaped like pretraining's CSV reader on purpose, not shared: this one keeps
    # every column of a row (carried fields) and reports into the annotation's
    # `ReadReport`; the other keeps one column's text and counts documents.
    text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")
    try:
        rows = csv.DictReader(text)
        if rows.fieldnames is None:
            return
        if fmt.text_field not in rows.fieldnames:
            report.skip(where, f"no text column {fmt.text_field!r} (columns: {', '.join(rows.fieldnames)})")
            return
        for row in rows:
            yield _record(dict(row), f"{where}:{rows.line_num}", fmt)
    except UnicodeDecodeError as err:
        report.skip(where, f"not valid UTF-8, read up to the bad bytes ({err.reason})")
    except csv.Error as err:
        report.skip(where, f"malformed CSV, read up to the bad row ({err})")
    finally:
        text.detach()


def _damaged(report: ReadReport, where: str, err: Exception) -> None:
    report.skip(where, "damaged file, read up to the damage", f"damaged file, read up to the damage ({err})")


def _parquet_rows(path: Path, where: str, fmt: RecordFormat, report: ReadReport) -> Iterator[Record]:
    pa = require_pyarrow()
    try:
        yield from _parquet_records(pa, path, where, fmt, report)
    except pa.ArrowException as err:  # not Parquet, or a damaged page: what was read stays read
        _damaged(report, where, err)


def _parquet_records(pa: Any, path: Path, where: str, fmt: RecordFormat, report: ReadReport) -> Iterator[Record]:
    source = pa.parquet.ParquetFile(path)
    names = source.schema_arrow.names
    if fmt.text_field not in names:
        report.skip(where, f"no text column {fmt.text_field!r} (columns: {', '.join(names)})")
        return
    kind = source.schema_arrow.field(fmt.text_field).type
    if pa.types.is_dictionary(kind):  # categorical text, as pandas writes it
        kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        report.skip(where, f"text column {fmt.text_field!r} holds {kind}, not strings")
        return
    row_no = 0
    for batch in source.iter_batches(batch_size=PARQUET_BATCH):
        for value in batch.to_pylist():
            row_no += 1
            origin = f"{where}:{row_no}"
            if value.get(fmt.text_field) is None:
                report.skip(origin, f"no text field {fmt.text_field!r}")
                continue
            yield _record({k: _plain(v) for k, v in value.items()}, origin, fmt)


def _plain(value: Any) -> Any:
    """A Parquet value as JSON can hold it (dates as ISO text, bytes and decimals as
    text, NaN and infinities as null)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf8", errors="replace")
    return str(value)


def _record(value: Dict[str, Any], origin: str, fmt: RecordFormat) -> Record:
    text = str(value.pop(fmt.text_field) or "")
    given = value.pop(fmt.id_field, None) if fmt.id_field else None
    return Record(str(given) if given not in (None, "") else origin, text, origin, value)
