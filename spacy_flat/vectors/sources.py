"""Streaming raw text out of corpus files, whatever their format, never the whole
corpus in memory.

Plain text and Markdown (a document per line), JSON lines (a field of each
record), one JSON document per file (an array or an object), CSV (a column) and
zip archives (each member by its own name) are read, xz-, gzip- or bz2-compressed
or not. A field is a dotted path through nested objects that walks every item
of a list on its way (`videoList.video_detail.content`). Bad input (bad UTF-8, a
line that is not JSON, a record without the field, a corrupt zip member, an
empty file) is reported with its file and line or member, counted and skipped:
one bad record never loses a run.
"""

from __future__ import annotations

import csv
import io
import json
import lzma
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Dict, Iterable, Iterator, List, Optional, Tuple

from ..files import COMPRESSED, decompressed

# (text, where it came from: "file:line" or "archive!member:line")
Text = Tuple[str, str]
PLAIN = {".txt", ".md", ".text", ""}
# Problems listed one by one in a report; beyond this, only counted.
MAX_LISTED = 200


@dataclass
class SourceReport:
    """What the readers read and skipped, and why, with where."""

    documents: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    problems: List[str] = field(default_factory=list)

    def skip(self, where: str, reason: str, detail: str = "") -> None:
        """Count a skipped record or file under `reason`; list it with `where` and `detail`."""
        self.skipped[reason] += 1
        if len(self.problems) < MAX_LISTED:
            self.problems.append(f"{where}: {reason}" + (f" ({detail})" if detail else ""))

    def summary(self) -> Dict[str, Any]:
        return {
            "documents": dict(self.documents),
            "skipped": dict(self.skipped),
            "problems": self.problems,
            "problems_not_listed": max(0, sum(self.skipped.values()) - len(self.problems)),
        }


@dataclass(frozen=True)
class TextFields:
    """Where the text is in structured files.

    json_field (str): Dotted path of the text in JSON records; alternatives separated
        by commas, the first a record has wins (corpora of several layouts in one run).
    csv_column (str): Header of the text column in CSV files; comma-separated
        alternatives, the first a file has wins.
    """

    json_field: str = "text"
    csv_column: str = "text"


def read_texts(paths: Iterable[Path], fields: TextFields, report: SourceReport) -> Iterator[Text]:
    """Stream the documents of every file (a directory: every file below it, sorted).

    YIELDS (Text): Each document's text with its origin.
    """
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file_path in files:
            if not file_path.exists():
                report.skip(str(file_path), "no such file")
                continue
            with file_path.open("rb") as raw:
                yield from _read_stream(raw, file_path.name, str(file_path), fields, report)


def _read_stream(raw: IO[bytes], name: str, where: str, fields: TextFields, report: SourceReport) -> Iterator[Text]:
    suffix = Path(name).suffix.lower()
    if suffix in COMPRESSED:
        try:
            with decompressed(raw, suffix) as stream:
                yield from _read_stream(stream, Path(name).stem, where, fields, report)
        except (OSError, EOFError, lzma.LZMAError) as err:
            report.skip(where, f"damaged {suffix} stream, read up to the damage", str(err))
        return
    before = report.documents[where]
    if suffix == ".zip":
        yield from _read_zip(raw, where, fields, report)
    elif suffix == ".jsonl":
        yield from _read_json_lines(raw, where, fields.json_field, report)
    elif suffix == ".json":
        yield from _read_json(raw, where, fields.json_field, report)
    elif suffix == ".csv":
        yield from _read_csv(raw, where, fields.csv_column, report)
    elif suffix in PLAIN:
        yield from _read_lines(raw, where, report)
    else:
        report.skip(where, "unknown format", f"{suffix!r}: plain text, .md, .jsonl, .json, .csv, .zip; .xz/.gz/.bz2")
        return
    if report.documents[where] == before and suffix != ".zip":
        report.skip(where, "no documents in the file")


def _lines(raw: IO[bytes], where: str, report: SourceReport) -> Iterator[Tuple[int, str]]:
    for line_no, line in enumerate(raw, 1):
        try:
            yield line_no, line.decode("utf-8-sig" if line_no == 1 else "utf8")
        except UnicodeDecodeError as err:
            report.skip(f"{where}:{line_no}", "not valid UTF-8", err.reason)


def _read_lines(raw: IO[bytes], where: str, report: SourceReport) -> Iterator[Text]:
    for line_no, line in _lines(raw, where, report):
        if line.strip():
            report.documents[where] += 1
            yield line.strip(), f"{where}:{line_no}"


def _read_json_lines(raw: IO[bytes], where: str, path: str, report: SourceReport) -> Iterator[Text]:
    for line_no, line in _lines(raw, where, report):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            report.skip(f"{where}:{line_no}", "not JSON", err.msg)
            continue
        yield from _field_texts(record, path, f"{where}:{line_no}", where, report)


def _read_json(raw: IO[bytes], where: str, path: str, report: SourceReport) -> Iterator[Text]:
    try:
        document = json.loads(raw.read().decode("utf-8-sig"))
    except UnicodeDecodeError as err:
        report.skip(where, "not valid UTF-8", err.reason)
        return
    except ValueError as err:
        report.skip(where, "not JSON", str(err))
        return
    records = document if isinstance(document, list) else [document]
    for index, record in enumerate(records):
        yield from _field_texts(record, path, f"{where}:[{index}]", where, report)


def _field_texts(record: Any, paths: str, origin: str, where: str, report: SourceReport) -> Iterator[Text]:
    found: List[str] = []
    for path in paths.split(","):
        found = [value for value in _walk(record, path.strip().split(".")) if isinstance(value, str)]
        if found:
            break
    if not found:
        report.skip(origin, "record without the text field", repr(paths))
    for value in found:
        if value.strip():
            report.documents[where] += 1
            yield value, origin


def _walk(value: Any, keys: List[str]) -> Iterator[Any]:
    if isinstance(value, list):
        for item in value:
            yield from _walk(item, keys)
    elif not keys:
        yield value
    elif isinstance(value, dict) and keys[0] in value:
        yield from _walk(value[keys[0]], keys[1:])


def _read_csv(raw: IO[bytes], where: str, columns: str, report: SourceReport) -> Iterator[Text]:
    text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")
    try:
        rows = csv.DictReader(text)
        if rows.fieldnames is None:
            return
        column = next((c.strip() for c in columns.split(",") if c.strip() in rows.fieldnames), None)
        if column is None:
            report.skip(where, "CSV without the text column", f"{columns!r}; columns: {', '.join(rows.fieldnames)}")
            return
        for row in rows:
            value = row.get(column) or ""
            if value.strip():
                report.documents[where] += 1
                yield value, f"{where}:{rows.line_num}"
    except UnicodeDecodeError as err:
        report.skip(where, "not valid UTF-8, read up to the bad bytes", err.reason)
    except csv.Error as err:
        report.skip(where, "malformed CSV, read up to the bad row", str(err))
    finally:
        text.detach()


def _read_zip(raw: IO[bytes], where: str, fields: TextFields, report: SourceReport) -> Iterator[Text]:
    try:
        archive = zipfile.ZipFile(raw)
    except zipfile.BadZipFile as err:
        report.skip(where, "not a zip archive", str(err))
        return
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            member = f"{where}!{info.filename}"
            try:
                with archive.open(info) as stream:
                    # A member is read to its end before its texts count, so a CRC
                    # error (found at the end) never leaves half a member behind.
                    texts = list(_read_stream(stream, info.filename, member, fields, report))
            except (zipfile.BadZipFile, OSError, EOFError, lzma.LZMAError) as err:
                report.documents.pop(member, None)
                report.skip(member, "damaged zip member", str(err))
                continue
            report.documents[where] += report.documents.pop(member, 0)
            yield from texts


def describe(report: SourceReport, limit: Optional[int] = 20) -> List[str]:
    """RETURNS (List[str]): Lines for a person: documents per file, then what was skipped and why."""
    lines = [f"{n:,} documents from {where}" for where, n in sorted(report.documents.items())]
    lines += [f"skipped {n:,}: {reason}" for reason, n in report.skipped.most_common()]
    lines += report.problems[:limit]
    return lines
