"""Readers of lexicon and vector files: word lists, word2vec (text and binary),
Baidu LAC's character table.

Malformed input raises a `LexiconError` naming the file and line; repairs
(blank lines, duplicates, single characters) are counted and logged, never silent.
"""

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy

from ..errors import LexiconError
from .char_vocab import CharVocab

logger = logging.getLogger("spacy.flat")

PathLike = Union[str, Path]


@dataclass
class LoadReport:
    """What a loader read, kept and repaired."""

    path: str
    read: int = 0
    kept: int = 0
    repairs: Dict[str, int] = field(default_factory=dict)

    def repair(self, what: str) -> None:
        self.repairs[what] = self.repairs.get(what, 0) + 1

    def log(self) -> None:
        fixes = ", ".join(f"{n} {what}" for what, n in sorted(self.repairs.items()))
        logger.info(
            "%s: read %d entries, kept %d%s",
            self.path,
            self.read,
            self.kept,
            f"; skipped {fixes}" if fixes else "",
        )


def jieba_dir() -> Path:
    """RETURNS (Path): The installed jieba package's directory."""
    import jieba

    return Path(os.path.dirname(jieba.__file__))


def _decode(raw: bytes, path: PathLike, line_no: int) -> str:
    try:
        return raw.decode("utf8")
    except UnicodeDecodeError as err:
        raise LexiconError(f"{path}:{line_no}: not valid UTF-8 ({err.reason})") from None


def read_word_list(path: PathLike, *, column: int = 0) -> Tuple[List[str], LoadReport]:
    """Read one word per line (the `column`-th whitespace-separated field).

    path (PathLike): The file.
    column (int): Which field holds the word (jieba's dict.txt: `word freq pos`).
    RETURNS (Tuple[List[str], LoadReport]): The words of 2+ characters and a report.
    """
    report = LoadReport(str(path))
    found: List[str] = []
    with open(path, "rb") as file_:
        for line_no, raw in enumerate(file_, 1):
            line = _decode(raw, path, line_no).strip()
            if not line:
                report.repair("blank lines")
                continue
            fields = line.split()
            if len(fields) <= column:
                raise LexiconError(f"{path}:{line_no}: expected at least {column + 1} fields, got {line!r}")
            report.read += 1
            found.append(fields[column])
    return keep_words(found, report), report


def keep_words(words: Iterable[str], report: LoadReport) -> List[str]:
    """The words of two or more characters, each once, in order; the others are
    counted in `report` as repairs (blank lines, single characters, duplicates).

    RETURNS (List[str]): The kept words; `report.kept` is set and the report logged.
    """
    kept: List[str] = []
    seen = set()
    for word in words:
        if not word:
            report.repair("blank lines")
        elif len(word) < 2:
            report.repair("single characters")
        elif word in seen:
            report.repair("duplicates")
        else:
            seen.add(word)
            kept.append(word)
    report.kept = len(kept)
    report.log()
    return kept


def _parse_header(line: bytes, path: PathLike) -> Optional[Tuple[int, int]]:
    fields = line.split()
    if len(fields) == 2 and all(f.isdigit() for f in fields):
        return int(fields[0]), int(fields[1])
    return None


def read_word2vec(
    path: PathLike, *, binary: Optional[bool] = None, min_length: int = 2, max_length: int = 0
) -> Tuple[List[str], numpy.ndarray, LoadReport]:
    """Read word2vec vectors, in text or binary format.

    path (PathLike): The file. A `count width` header line is required for the
        binary format and optional for text.
    binary (Optional[bool]): Force the format; None detects it.
    min_length (int): Skip words shorter than this (counted in the report).
    max_length (int): Skip words longer than this (counted); 0 for no limit.
    RETURNS (Tuple[List[str], numpy.ndarray, LoadReport]): Words, float32 vectors, report.
    """
    lengths = (min_length, max_length)
    with open(path, "rb") as file_:
        data = file_.read()
    first_end = data.find(b"\n")
    first = data[: first_end if first_end >= 0 else len(data)]
    header = _parse_header(first, path)
    if binary is None:
        binary = header is not None and not _looks_like_text_row(data, first_end + 1, header[1])
    if binary:
        if header is None:
            raise LexiconError(f"{path}:1: binary word2vec needs a 'count width' header, got {first[:80]!r}")
        return _read_word2vec_binary(data, first_end + 1, header, path, lengths)
    return _read_word2vec_text(data, header, path, lengths)


def _looks_like_text_row(data: bytes, start: int, width: int) -> bool:
    """Whether the line after the header is `word` and `width` numbers (text format)."""
    end = data.find(b"\n", start)
    fields = data[start : end if end >= 0 else len(data)].split()
    if len(fields) != width + 1:
        return False
    try:
        [float(f) for f in fields[1:]]
    except ValueError:
        return False
    return True


def _keep(
    word: str,
    vector: numpy.ndarray,
    words: List[str],
    rows: List[numpy.ndarray],
    seen: set,
    report: LoadReport,
    lengths: Tuple[int, int],
) -> None:
    min_length, max_length = lengths
    if not word.strip():
        report.repair("blank words")
    elif len(word) < min_length:
        report.repair(f"words shorter than {min_length} characters")
    elif max_length and len(word) > max_length:
        report.repair(f"words longer than {max_length} characters")
    elif word in seen:
        report.repair("duplicates (first kept)")
    elif not numpy.isfinite(vector).all():
        report.repair("vectors with NaN or infinity")
    else:
        seen.add(word)
        words.append(word)
        rows.append(vector)


def _read_word2vec_binary(
    data: bytes, offset: int, header: Tuple[int, int], path: PathLike, lengths: Tuple[int, int]
) -> Tuple[List[str], numpy.ndarray, LoadReport]:
    count, width = header
    report = LoadReport(str(path))
    words: List[str] = []
    rows: List[numpy.ndarray] = []
    seen: set = set()
    nbytes = 4 * width
    for i in range(count):
        entry = i + 1
        space = data.find(b" ", offset)
        if space < 0 or space + 1 + nbytes > len(data):
            raise LexiconError(
                f"{path}: truncated at vector {entry} of {count} (byte {offset}): header says {count} x {width}"
            )
        word = _decode(data[offset:space].lstrip(b"\n"), path, entry).strip()
        vector = numpy.frombuffer(data, dtype="<f4", count=width, offset=space + 1)
        offset = space + 1 + nbytes
        report.read += 1
        _keep(word, vector, words, rows, seen, report, lengths)
    if data[offset:].strip():
        raise LexiconError(f"{path}: {len(data) - offset} bytes after the {count} vectors the header announces")
    report.kept = len(words)
    report.log()
    return words, _stack(rows, width), report


def _read_word2vec_text(
    data: bytes, header: Optional[Tuple[int, int]], path: PathLike, lengths: Tuple[int, int]
) -> Tuple[List[str], numpy.ndarray, LoadReport]:
    report = LoadReport(str(path))
    words: List[str] = []
    rows: List[numpy.ndarray] = []
    seen: set = set()
    width = header[1] if header else None
    lines = data.split(b"\n")
    start = 1 if header else 0
    for line_no in range(start + 1, len(lines) + 1):
        raw = lines[line_no - 1]
        line = _decode(raw, path, line_no).rstrip("\r")
        if not line.strip():
            if line_no < len(lines):
                report.repair("blank lines")
            continue
        fields = line.rstrip().split(" ")
        if width is None:
            width = len(fields) - 1
        if len(fields) != width + 1:
            raise LexiconError(f"{path}:{line_no}: expected a word and {width} numbers, got {len(fields) - 1} numbers")
        try:
            vector = numpy.asarray(fields[1:], dtype="float32")
        except ValueError:
            raise LexiconError(f"{path}:{line_no}: a vector value is not a number") from None
        report.read += 1
        _keep(fields[0], vector, words, rows, seen, report, lengths)
    if header and report.read != header[0]:
        raise LexiconError(f"{path}: header announces {header[0]} vectors, the file holds {report.read}")
    report.kept = len(words)
    report.log()
    return words, _stack(rows, width or 0), report


def _stack(rows: List[numpy.ndarray], width: int) -> numpy.ndarray:
    if not rows:
        return numpy.zeros((0, width), dtype="float32")
    return numpy.vstack(rows).astype("float32")


def read_lac_char_table(directory: Optional[PathLike] = None) -> Tuple[CharVocab, numpy.ndarray]:
    """Read Baidu LAC's character embeddings shipped inside jieba.

    directory (Optional[PathLike]): The `lac_small` folder; jieba's by default.
    RETURNS (Tuple[CharVocab, numpy.ndarray]): The vocabulary and its
        (rows, 128) float32 table.
    """
    folder = Path(directory) if directory else jieba_dir() / "lac_small"
    dic_path = folder / "word.dic"
    emb_path = folder / "model_baseline" / "word_emb"
    entries: Dict[int, str] = {}
    with open(dic_path, "rb") as file_:
        for line_no, raw in enumerate(file_, 1):
            line = _decode(raw, dic_path, line_no).rstrip("\n")
            if not line:
                continue
            row, sep, char = line.partition("\t")
            if not sep or not row.isdigit():
                raise LexiconError(f"{dic_path}:{line_no}: expected 'id<TAB>char', got {line!r}")
            entries[int(row)] = char
    raw_table = emb_path.read_bytes()
    # The file is a Paddle tensor: a 29-byte header, then little-endian float32.
    n_rows = max(entries) + 1
    values = numpy.frombuffer(raw_table[29:], dtype="<f4")
    if values.size % n_rows:
        raise LexiconError(f"{emb_path}: {values.size} floats do not split into {n_rows} rows")
    table = values.reshape(n_rows, -1).astype("float32")
    return _char_table([entries.get(i, f"<unused {i}>") for i in range(n_rows)], table)


def read_word2vec_chars(path: PathLike, *, binary: Optional[bool] = None) -> Tuple[CharVocab, numpy.ndarray]:
    """Read the single-character entries of a word2vec file as character vectors.

    path (PathLike): The word2vec file (text or binary), e.g. the file a
        word2vec lexicon is read from, so characters and words share one space.
    binary (Optional[bool]): Force the format; None detects it.
    RETURNS (Tuple[CharVocab, numpy.ndarray]): The vocabulary and its float32 table.
    """
    chars, table, _ = read_word2vec(path, binary=binary, min_length=1, max_length=1)
    if not chars:
        raise LexiconError(f"{path}: no single-character entries to use as character vectors")
    return _char_table(chars, table)


def _char_table(chars: List[str], table: numpy.ndarray) -> Tuple[CharVocab, numpy.ndarray]:
    vocab = CharVocab(chars)
    # CharVocab appends the OOV class rows a table lacks; they start at the mean.
    if len(vocab) > len(table):
        extra = numpy.repeat(table.mean(0, keepdims=True), len(vocab) - len(table), axis=0)
        table = numpy.vstack([table, extra])
    return vocab, table
