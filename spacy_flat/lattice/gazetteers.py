"""Typed word lists (gazetteers): files of place names, people, companies or a
user's brands, each word given a type that the lattice carries to the model.

A gazetteer is read whole: such lists are small (THUOCL's largest is 45k words),
and reading the decompressed bytes at once lets one reader take every line end
(THUOCL's place names end lines with CR only) and name the line of bad UTF-8.
"""

from __future__ import annotations

import csv
import io
import lzma
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from ..errors import LexiconError
from ..files import COMPRESSED, open_binary
from .lexicon import Lexicon
from .readers import LoadReport, keep_words

PathLike = Union[str, Path]
# CSV columns that hold the name (the administrative divisions' files), in order of preference.
NAME_COLUMNS = ("name", "word", "text")


def read_gazetteer(path: PathLike) -> Tuple[List[str], LoadReport]:
    """Read the words of one list, xz-, gzip- or bz2-compressed or not.

    Plain lists: the word is the first tab- or space-separated field of a line
    (THUOCL's `word<TAB>count`, jieba's `word freq pos`). CSV: the first column
    named `name`, `word` or `text`, else the first column.

    path (PathLike): The file.
    RETURNS (Tuple[List[str], LoadReport]): Words of two or more characters,
        each once, in file order, and what was read and skipped.
    """
    path = Path(path)
    report = LoadReport(str(path))
    lines = read_lines(path)
    name = path.name[: -len(path.suffix)] if path.suffix in COMPRESSED else path.name
    rows = _csv_words(lines, path) if name.endswith(".csv") else _plain_words(lines)
    report.read = len(rows)
    return keep_words(rows, report), report


def read_typed_words(path: PathLike) -> Tuple[Dict[str, List[str]], LoadReport]:
    """Read a list that gives each word its own types: `word<TAB>type[,type...]`.

    RETURNS (Tuple[Dict[str, List[str]], LoadReport]): The words of each type.
    """
    path = Path(path)
    report = LoadReport(str(path))
    by_type: Dict[str, List[str]] = {}
    for line_no, line in enumerate(read_lines(path), 1):
        if not line.strip():
            report.repair("blank lines")
            continue
        fields = line.strip().split("\t")
        if len(fields) != 2 or not fields[1].strip():
            raise LexiconError(f"{path}:{line_no}: expected 'word<TAB>type[,type...]', got {line.strip()!r}")
        report.read += 1
        word = fields[0].strip()
        if len(word) < 2:
            report.repair("single characters")
            continue
        for type_name in fields[1].split(","):
            if type_name.strip():
                by_type.setdefault(type_name.strip(), []).append(word)
        report.kept += 1
    report.log()
    return by_type, report


def read_tagged_words(path: PathLike, tag_types: Dict[str, str]) -> Tuple[Dict[str, List[str]], LoadReport]:
    """Read a dictionary of `word freq tag` lines (jieba's dict.txt, whose tags
    are parts of speech: `nr` a person's name, `ns` a place, `nt` an organization)
    and type the words whose tag `tag_types` names.

    path (PathLike): The file.
    tag_types (Dict[str, str]): Tag to type name, e.g. {"nr": "person", "ns": "place"};
        words of other tags are skipped; a tag no line carries is an error (a typo
        would otherwise type nothing).
    RETURNS (Tuple[Dict[str, List[str]], LoadReport]): The words of each type.
    """
    path = Path(path)
    report = LoadReport(str(path))
    by_type: Dict[str, List[str]] = {}
    seen_tags = set()
    for line_no, line in enumerate(read_lines(path), 1):
        fields = line.split()
        if not fields:
            report.repair("blank lines")
            continue
        if len(fields) != 3:
            raise LexiconError(f"{path}:{line_no}: expected 'word freq tag', got {line.strip()!r}")
        report.read += 1
        word, _, tag = fields
        seen_tags.add(tag)
        type_name = tag_types.get(tag)
        if type_name is None:
            report.repair("other tags")
        elif len(word) < 2:
            report.repair("single characters")
        else:
            by_type.setdefault(type_name, []).append(word)
            report.kept += 1
    unknown = sorted(set(tag_types) - seen_tags)
    if unknown:
        raise LexiconError(f"{path}: no word is tagged {', '.join(map(repr, unknown))} (tags: {sorted(seen_tags)})")
    report.log()
    return by_type, report


def add_gazetteers(
    lexicon: Lexicon,
    gazetteers: Dict[str, str],
    typed_words: Optional[str] = None,
    tagged_words: Optional[Tuple[PathLike, Dict[str, str]]] = None,
) -> None:
    """Add typed words to `lexicon`: every word of each file gets the file's type.

    gazetteers (Dict[str, str]): Type name to one path, or several separated by commas.
    typed_words (Optional[str]): A list giving each word its types (`read_typed_words`).
    tagged_words (Optional[Tuple[PathLike, Dict[str, str]]]): A tagged dictionary
        and the types of its tags (`read_tagged_words`).
    """
    for type_name, paths in gazetteers.items():
        for path in (p.strip() for p in paths.split(",") if p.strip()):
            words, _ = read_gazetteer(path)
            lexicon.extend(words, types=(type_name,))
    typed: List[Dict[str, List[str]]] = []
    if typed_words is not None:
        typed.append(read_typed_words(typed_words)[0])
    if tagged_words is not None:
        typed.append(read_tagged_words(*tagged_words)[0])
    for by_type in typed:
        for type_name, words in by_type.items():
            lexicon.extend(words, types=(type_name,))


def read_lines(path: Path) -> List[str]:
    """RETURNS (List[str]): The lines of a small text file (xz/gz/bz2 or not), any line end;
    LexiconError names the file (and line, for bad UTF-8)."""
    if not path.exists():
        raise LexiconError(f"{path}: no such word list")
    try:
        with open_binary(path) as f:
            data = f.read()
    except (OSError, EOFError, lzma.LZMAError) as err:
        raise LexiconError(f"{path}: damaged file ({err})") from None
    lines = data.splitlines()  # \n, \r\n and a bare \r alike
    out: List[str] = []
    for line_no, raw in enumerate(lines, 1):
        try:
            out.append(raw.decode("utf-8-sig" if line_no == 1 else "utf8"))
        except UnicodeDecodeError as err:
            raise LexiconError(f"{path}:{line_no}: not valid UTF-8 ({err.reason})") from None
    return out


def _plain_words(lines: List[str]) -> List[str]:
    return [line.split()[0] if line.split() else "" for line in lines]


def _csv_words(lines: List[str], path: Path) -> List[str]:
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header = next(reader, None)
    if header is None:
        raise LexiconError(f"{path}: empty CSV")
    column = next((header.index(c) for c in NAME_COLUMNS if c in header), 0)
    words = []
    for line_no, row in enumerate(reader, 2):
        if len(row) <= column:
            raise LexiconError(f"{path}:{line_no}: expected column {header[column]!r}, got {row!r}")
        words.append(row[column].strip())
    return words
