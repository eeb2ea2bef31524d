"""Convert annotated Chinese NER files to spaCy DocBin files.

Reads character-per-line files (BMES, BIO or BIOES tags, space- or tab-separated,
Weibo's `char+index` tokens), word-per-line files with IOB2 tags over words (Universal NER's
`.iob2`), and CLUENER-style JSON lines. Docs are built one
token per character with `spaces=[False] * n`. Every repair is reported with its
line; a malformed line stops the conversion with an error naming file and line.
"""

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Callable, Dict, Iterator, List, Optional, TextIO, Tuple

from spacy.cli._util import Arg, Opt
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from ..errors import ConversionError
from ..types import CharSpan
from .app import flat_cli


class Scheme(str, Enum):
    BMES = "BMES"
    BIO = "BIO"
    BIOES = "BIOES"


SCHEMES = tuple(scheme.value for scheme in Scheme)
# Tag prefixes mapped to roles: begin, inside, end (last), single (unit).
PREFIX_ROLE = {"B": "B", "I": "I", "M": "I", "E": "L", "L": "L", "S": "U", "U": "U"}


@dataclass
class Sentence:
    chars: List[str]
    spans: List[CharSpan]
    first_line: int


@dataclass
class ConversionReport:
    """Counts read and written, and every repair made, with its line."""

    path: str
    sentences: int = 0
    entities_read: int = 0
    entities_written: int = 0
    repairs: List[str] = field(default_factory=list)
    repair_kinds: Counter = field(default_factory=Counter)

    def repair(self, line: int, kind: str, detail: str) -> None:
        self.repairs.append(f"{self.path}:{line}: {kind}: {detail}")
        self.repair_kinds[kind] += 1

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.repair_kinds.items())) or "none"
        return (
            f"{self.path}: {self.sentences} sentences, {self.entities_read} entities read, "
            f"{self.entities_written} written; repairs: {kinds}"
        )


def detect_scheme(prefixes: Counter) -> str:
    """RETURNS (str): BMES if M- tags occur, BIOES if E-/S- tags occur with I-, else BIO."""
    if prefixes["M"]:
        return "BMES"
    if prefixes["E"] or prefixes["S"]:
        return "BIOES" if prefixes["I"] or not prefixes["M"] else "BMES"
    return "BIO"


def read_conll(
    path: Path,
    *,
    scheme: Optional[str] = None,
    report: ConversionReport,
    progress: Optional[Callable[[int], None]] = None,
) -> Iterator[Sentence]:
    """Read a character-per-line file.

    path (Path): The file: `<token><space or tab><tag>` per line, blank lines between sentences.
    scheme (Optional[str]): BMES, BIO or BIOES; detected from the tags if None.
    report (ConversionReport): Collects counts and repairs.
    YIELDS (Sentence): Sentences with their character spans.
    """
    rows = list(_read_rows(path))
    prefixes = Counter(tag[0] for _, tag, _ in (r for sent in rows for r in sent) if tag != "O")
    used = scheme or detect_scheme(prefixes)
    if used not in SCHEMES:
        raise ConversionError(f"{path}: unknown scheme {used!r}; choose one of {SCHEMES}")
    index_tokens = _uses_index_tokens(rows)
    for sent in rows:
        chars = [_char_of(tok, line, index_tokens, path, report) for tok, _, line in sent]
        tags = [(tag, line) for _, tag, line in sent]
        spans = _tags_to_spans(tags, used, report)
        report.sentences += 1
        if progress is not None:
            progress(report.sentences)
        yield Sentence(chars, spans, sent[0][2])


def _read_rows(path: Path) -> Iterator[List[Tuple[str, str, int]]]:
    sent: List[Tuple[str, str, int]] = []
    with open(path, "rb") as file_:
        for line_no, raw in enumerate(file_, 1):
            try:
                line = raw.decode("utf8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise ConversionError(f"{path}:{line_no}: not valid UTF-8 ({err.reason})") from None
            if not line.strip():
                if sent:
                    yield sent
                    sent = []
                continue
            # The tag is the last field; the token may itself be a space in some corpora.
            sep = "\t" if "\t" in line else " "
            token, _, tag = line.rpartition(sep)
            if not token or not tag:
                raise ConversionError(f"{path}:{line_no}: expected '<char> <tag>', got {line!r}")
            if tag != "O" and (len(tag) < 3 or tag[1] != "-" or tag[0] not in PREFIX_ROLE):
                raise ConversionError(f"{path}:{line_no}: malformed tag {tag!r} in {line!r}")
            sent.append((token, tag, line_no))
    if sent:
        yield sent


def read_words(
    path: Path, *, report: ConversionReport, progress: Optional[Callable[[int], None]] = None
) -> Iterator[Sentence]:
    """Read a word-per-line file with IOB2 tags over words, as Universal NER ships it.

    path (Path): The file: `<id><TAB><word><TAB><tag>[<TAB>...]` per line, `#` comment lines (a
        `# text = ...` line is checked against the words), blank lines between sentences.
    report (ConversionReport): Collects counts and repairs.
    YIELDS (Sentence): Sentences of the words' characters, each word's characters in its entity.
    """
    words: List[Tuple[str, str, int]] = []
    text: Optional[Tuple[str, int]] = None
    with open(path, "rb") as file_:
        lines = list(enumerate(file_, 1))
    for line_no, raw in [*lines, (len(lines) + 1, b"")]:
        try:
            line = raw.decode("utf8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise ConversionError(f"{path}:{line_no}: not valid UTF-8 ({err.reason})") from None
        if line.startswith("#"):
            if line.startswith("# text = "):
                text = (line[len("# text = ") :], line_no)
            continue
        if line.strip():
            cells = line.split("\t")
            if len(cells) < 3 or not cells[1]:
                raise ConversionError(f"{path}:{line_no}: expected '<id><TAB><word><TAB><tag>', got {line!r}")
            tag = cells[2]
            if tag != "O" and (len(tag) < 3 or tag[1] != "-" or tag[0] not in "BI"):
                raise ConversionError(f"{path}:{line_no}: malformed IOB2 tag {tag!r} in {line!r}")
            words.append((cells[1], tag, line_no))
            continue
        if not words:
            continue
        chars = [c for word, _, _ in words for c in word]
        if text is not None and "".join(chars) != text[0].replace(" ", ""):
            raise ConversionError(f"{path}:{text[1]}: the words of this sentence do not spell its text")
        tags: List[Tuple[str, int]] = []
        for word, tag, number in words:
            inside = "O" if tag == "O" else f"I-{tag[2:]}"
            tags += [(tag, number)] + [(inside, number)] * (len(word) - 1)
        spans = _tags_to_spans(tags, "BIO", report)
        report.sentences += 1
        if progress is not None:
            progress(report.sentences)
        yield Sentence(chars, spans, words[0][2])
        words, text = [], None


def _uses_index_tokens(rows: List[List[Tuple[str, str, int]]]) -> bool:
    """Weibo's tokens are a character followed by its word-position index (`科0`):
    every token then has two or more code points and ends in a digit."""
    tokens = [tok for sent in rows[:50] for tok, _, _ in sent]
    return bool(tokens) and all(len(t) >= 2 and t[-1].isdigit() for t in tokens)


def _char_of(token: str, line: int, index_tokens: bool, path: Path, report: ConversionReport) -> str:
    if index_tokens:
        # The character is the first code point; the rest must be the index.
        if not token[1:].isdigit():
            report.repair(line, "token of several characters reduced to its first", f"{token!r} -> {token[0]!r}")
        return token[0]
    if len(token) != 1:
        raise ConversionError(f"{path}:{line}: expected one character, got token {token!r}")
    return token


def _tags_to_spans(tags: List[Tuple[str, int]], scheme: str, report: ConversionReport) -> List[CharSpan]:
    """Decode one sentence's tags, reporting each repair. spaCy's iob_to_biluo
    repairs such sequences silently, so this is written out to report them."""
    spans: List[CharSpan] = []
    explicit_end = scheme != "BIO"
    start, label = -1, ""

    def close(end: int) -> None:
        nonlocal start
        spans.append((start, end, label))
        start = -1

    for i, (tag, line) in enumerate(tags):
        if tag == "O":
            if start >= 0:
                if explicit_end:
                    report.repair(line, "entity with no end tag closed", f"{label} before O")
                close(i)
            continue
        role, typ = PREFIX_ROLE[tag[0]], tag[2:]
        if role in "BU":
            report.entities_read += 1
        switched = False
        if start >= 0 and (role in "BU" or typ != label):
            if role not in "BU":
                report.repair(line, "entity type switched mid-span", f"{label} -> {tag}")
                switched = True
            elif explicit_end:
                report.repair(line, "entity with no end tag closed", f"{label} before {tag}")
            close(i)
        if start < 0:
            if role in "IL" and not switched:
                kind = "entity cut by a sentence break" if i == 0 else "inside tag with no begin tag"
                report.repair(line, kind, f"{tag} starts an entity")
            start, label = i, typ
        if role in "LU":
            close(i + 1)
    if start >= 0:
        if explicit_end:
            report.repair(tags[-1][1], "entity cut by a sentence break", f"{label} closed at sentence end")
        close(len(tags))
    return spans


def read_jsonl(path: Path, *, report: ConversionReport) -> Iterator[Sentence]:
    """Read CLUENER-style JSON lines: {"text": ..., "label": {type: {surface: [[start, end_inclusive]]}}}."""
    with open(path, "rb") as file_:
        for line_no, raw in enumerate(file_, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf8"))
                text = record["text"]
                labels = record.get("label") or {}
            except (UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
                raise ConversionError(f"{path}:{line_no}: not a JSON object with 'text': {err}") from None
            spans: List[CharSpan] = []
            for typ, surfaces in labels.items():
                for surface, positions in surfaces.items():
                    for pos in positions:
                        report.entities_read += 1
                        if not (isinstance(pos, list) and len(pos) == 2 and 0 <= pos[0] <= pos[1] < len(text)):
                            raise ConversionError(f"{path}:{line_no}: bad span {pos!r} for {surface!r}")
                        if text[pos[0] : pos[1] + 1] != surface:
                            raise ConversionError(
                                f"{path}:{line_no}: span {pos} is {text[pos[0] : pos[1] + 1]!r}, not {surface!r}"
                            )
                        spans.append((pos[0], pos[1] + 1, typ))
            spans.sort()
            kept: List[CharSpan] = []
            for span in spans:
                if kept and span[0] < kept[-1][1]:
                    report.repair(line_no, "overlapping entity dropped", f"{span} overlaps {kept[-1]}")
                    continue
                kept.append(span)
            report.sentences += 1
            yield Sentence(list(text), kept, line_no)


def to_doc(vocab: Vocab, sentence: Sentence) -> Doc:
    """One token per character, no spaces; entities from character spans."""
    doc = Doc(vocab, words=sentence.chars, spaces=[False] * len(sentence.chars))
    ents = []
    for start, end, label in sentence.spans:
        span = doc.char_span(start, end, label=label)
        if span is None:  # one token per character, so only an empty or out-of-range span
            raise ConversionError(f"line {sentence.first_line}: entity {start}-{end} {label} is outside the text")
        ents.append(span)
    doc.ents = ents
    return doc


def parse_renames(text: str) -> Dict[str, str]:
    """RETURNS (Dict[str, str]): `NR=PER,NS=LOC` as {"NR": "PER", "NS": "LOC"}."""
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    if any(len(pair) != 2 or not pair[0].strip() or not pair[1].strip() for pair in pairs):
        raise ConversionError(f"--rename-labels takes OLD=NEW pairs separated by commas, got {text!r}")
    return {old.strip(): new.strip() for old, new in pairs}


def _renamed(sentence: Sentence, rename: Dict[str, str], report: ConversionReport) -> Sentence:
    spans = []
    for start, end, label in sentence.spans:
        if label in rename:
            report.repair_kinds[f"label {label} renamed {rename[label]}"] += 1
        spans.append((start, end, rename.get(label, label)))
    return Sentence(sentence.chars, spans, sentence.first_line)


def parse_labels(text: str) -> List[str]:
    """RETURNS (List[str]): `PER,LOC,ORG` as ["PER", "LOC", "ORG"]."""
    return [label.strip() for label in text.split(",") if label.strip()]


def _kept(sentence: Sentence, keep: List[str], report: ConversionReport) -> Sentence:
    spans = []
    for span in sentence.spans:
        if span[2] in keep:
            spans.append(span)
        else:
            report.repair_kinds[f"label {span[2]} left out"] += 1
    return Sentence(sentence.chars, spans, sentence.first_line)


def convert(
    input_path: Path,
    output_path: Path,
    *,
    scheme: Optional[str] = None,
    file_format: str = "auto",
    dev_last: int = 0,
    dev_output: Optional[Path] = None,
    rename: Optional[Dict[str, str]] = None,
    keep: Optional[List[str]] = None,
    log: Optional[TextIO] = None,
) -> Tuple[ConversionReport, int, int]:
    """Convert one file to a DocBin, optionally splitting its last sentences off as dev.

    file_format (str): "conll" (a character and its tag a line), "words" (a word a line, IOB2 tags
        over words, as Universal NER's `.iob2`), "jsonl", or "auto" (.json and .jsonl are JSON lines,
        any other file characters a line).
    rename (Optional[Dict[str, str]]): Labels to rename (MSRA's NR, NS, NT to PER, LOC, ORG);
        each renamed entity is counted in the report.
    keep (Optional[List[str]]): After renaming, keep only entities of these labels (all: None);
        each entity left out is counted in the report.

    RETURNS (Tuple[ConversionReport, int, int]): The report, docs written to
        `output_path` and to `dev_output`.
    """
    log = log or sys.stderr
    report = ConversionReport(str(input_path))
    fmt = file_format if file_format != "auto" else ("jsonl" if input_path.suffix in (".json", ".jsonl") else "conll")

    def progress(n: int) -> None:
        if n % 10000 == 0:
            print(f"  ... {n} sentences", file=log, flush=True)

    vocab = Vocab()
    if fmt == "jsonl":
        sentences = list(read_jsonl(input_path, report=report))
    elif fmt == "words":
        sentences = list(read_words(input_path, report=report, progress=progress))
    else:
        sentences = list(read_conll(input_path, scheme=scheme, report=report, progress=progress))
    if rename:
        sentences = [_renamed(s, rename, report) for s in sentences]
    if keep:
        sentences = [_kept(s, keep, report) for s in sentences]
    docs = [to_doc(vocab, s) for s in sentences]
    report.entities_written = sum(len(d.ents) for d in docs)
    if dev_last and dev_output is None:
        raise ConversionError("--dev-last needs --dev-output")
    cut = len(docs) - dev_last if dev_last else len(docs)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=docs[:cut], store_user_data=False).to_disk(output_path)
    if dev_last and dev_output is not None:
        dev_output.parent.mkdir(parents=True, exist_ok=True)
        DocBin(docs=docs[cut:], store_user_data=False).to_disk(dev_output)
    for line in report.repairs:
        print(f"  repair {line}", file=log)
    print(report.summary(), file=log)
    print(
        f"wrote {cut} docs to {output_path}" + (f" and {len(docs) - cut} to {dev_output}" if dev_last else ""),
        file=log,
    )
    return report, cut, len(docs) - cut


class FileFormat(str, Enum):  # auto: .json and .jsonl files are JSON lines, any other tagged characters
    auto = "auto"
    conll = "conll"
    words = "words"
    jsonl = "jsonl"


@flat_cli.command("convert")
def convert_cli(
    input_path: Annotated[Path, Arg(metavar="INPUT")],
    output_path: Annotated[Path, Arg(metavar="OUTPUT")],
    scheme: Annotated[Optional[Scheme], Opt("--scheme", help="force the tag scheme")] = None,
    file_format: Annotated[
        FileFormat, Opt("--format", help="conll: a character a line; words: a word a line (Universal NER's .iob2)")
    ] = FileFormat.auto,
    dev_last: Annotated[int, Opt("--dev-last", help="write the last N sentences to --dev-output")] = 0,
    dev_output: Annotated[Optional[Path], Opt("--dev-output")] = None,
    rename_labels: Annotated[
        str, Opt("--rename-labels", metavar="OLD=NEW,...", help="rename entity labels, e.g. NR=PER,NS=LOC,NT=ORG")
    ] = "",
    keep_labels: Annotated[
        str, Opt("--keep-labels", metavar="LABEL,...", help="after renaming, keep only these labels, e.g. PER,LOC,ORG")
    ] = "",
) -> None:
    """convert NER data (BMES/BIO/BIOES, Weibo, Universal NER, JSON lines) to a DocBin"""
    convert(
        input_path,
        output_path,
        scheme=scheme.value if scheme else None,
        file_format=file_format.value,
        dev_last=dev_last,
        dev_output=dev_output,
        rename=parse_renames(rename_labels),
        keep=parse_labels(keep_labels) or None,
    )
