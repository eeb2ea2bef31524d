"""Benchmark figures come from their data: every result record is complete, BENCHMARKS.md and the
README's result tables are what `benchmarks/render.py` makes of the records, and no number in a table
of either document is missing from the records (a figure edited by hand fails here)."""

import re
from pathlib import Path
from typing import Iterator, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]

import render  # noqa: E402
import results  # noqa: E402

RECORDS = results.load_all()
ARCHIVED = results.load_archive()
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def table_rows(text: str) -> Iterator[Tuple[int, str]]:
    """(line number, line) of every table row but the separator, outside HTML comments."""
    in_comment = False
    for number, line in enumerate(text.splitlines(), 1):
        if "<!--" in line and "-->" not in line:
            in_comment = True
        if "-->" in line:
            in_comment = False
            continue
        if not in_comment and line.startswith("|") and not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
            yield number, line


def known_numbers(records: dict) -> Set[Tuple[int, float]]:
    """(digits, value) of every number the records hold, rounded to 0-4 digits."""
    values = results.numbers(records.values())
    return {(digits, round(abs(value), digits)) for value in values for digits in range(5)}


def unknown_numbers(text: str, records: dict) -> List[str]:
    """The numbers of text's tables that no record holds (at the table's precision)."""
    known = known_numbers(records)
    missing = []
    for number, line in table_rows(text):
        for token in NUMBER.findall(line.replace("`", " ")):
            token = token.rstrip(",")
            digits = len(token.split(".")[1]) if "." in token else 0
            if (digits, round(float(token.replace(",", "")), digits)) not in known:
                missing.append(f"line {number}: {token} in {line[:90]}")
    return missing


@pytest.mark.parametrize("rid", sorted({**RECORDS, **ARCHIVED}))
def test_every_result_record_is_complete(rid):
    record = RECORDS.get(rid) or ARCHIVED[rid]
    assert record.get("id") == rid, "a record's id is its file name"
    assert results.validate(record) == []


def test_the_documents_are_what_their_data_renders():
    assert render.main(["--check"]) == 0, "re-render with: python benchmarks/render.py"


@pytest.mark.parametrize("name", ["README.md", "BENCHMARKS.md", "benchmarks/archive/DECISIONS.md"])
def test_every_number_in_a_table_comes_from_a_result_record(name):
    text = (ROOT / name).read_text(encoding="utf8")
    assert list(table_rows(text)), f"{name} has no table"
    # The settled experiments' page compares archived records with the standing ones.
    records = {**RECORDS, **ARCHIVED} if "archive" in name else RECORDS
    assert unknown_numbers(text, records) == []


def test_a_figure_edited_by_hand_is_caught():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf8")
    figure = "90.12 ± 0.39"
    assert figure in text
    # The edit writes a value no record holds (the records' dev curves hold many).
    known = known_numbers(RECORDS)
    unheld = next(x / 100 for x in range(9013, 9999) if (2, round(x / 100, 2)) not in known)
    edited = text.replace(figure, f"{unheld:.2f} ± 0.39", 1)
    assert unknown_numbers(edited, RECORDS), "a number no record holds went unnoticed"
    assert render.differences("BENCHMARKS.md", edited, text), "the check did not see the edit"


@pytest.mark.parametrize(
    "records,index", [(RECORDS, "benchmarks/results/INDEX.md"), (ARCHIVED, "benchmarks/archive/INDEX.md")]
)
def test_every_record_is_shown_somewhere(records, index):
    """A record no table reads is a measurement nobody sees: place it in a template or delete it. Each index
    lists the records its page's sections read."""
    listed = (ROOT / index).read_text(encoding="utf8")
    unseen = [rid for rid in records if f"`{rid}`" not in listed]
    assert unseen == []


def test_the_page_a_user_reads_holds_what_ships():
    """BENCHMARKS.md reads standing records only, and stays short enough to take in."""
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf8")
    assert not [rid for rid in ARCHIVED if f"`{rid}`" in text or f"#{rid}" in text]
    lines = text.splitlines()
    assert len(lines) <= 300 and max(map(len, lines)) <= 400
    assert len((ROOT / "README.md").read_text(encoding="utf8").splitlines()) <= 150


def test_records_notes_say_what_the_run_was():
    """Notes stay under 1,000 characters: the history of earlier records is in git."""
    long = {rid: len(rec.get("notes") or "") for rid, rec in {**RECORDS, **ARCHIVED}.items()}
    assert {rid: n for rid, n in long.items() if n >= 1000} == {}


def test_a_record_is_standing_or_archived_never_both():
    assert set(RECORDS) & set(ARCHIVED) == set()


TIMED = ("speed-cpu", "speed-gpu", "memory", "long-docs", "annotation", "training-cost", "accuracy-peers")


def test_every_timing_section_says_its_load():
    """A table of timings or memory says the load average its runs started at, beside the table."""
    template = render.TEMPLATE.read_text(encoding="utf8")
    cuts = [m.start() for m in render.HEADING.finditer(template)]
    t = render.Tables(RECORDS)
    for piece in (template[i:j] for i, j in zip([0, *cuts], [*cuts, len(template)])):
        t.used = []
        render.fill(piece, t)
        if any(RECORDS[rid]["question"] in TIMED for rid in t.used):
            assert "{{load}}" in piece, piece.splitlines()[0]


def test_the_load_is_said_from_the_records():
    from test_records import made_up

    made = {
        "a": {**made_up("a", "speed-cpu", {"rows": []}), "load": {"before": 0.4, "after": 0.9}},
        "b": {**made_up("b", "speed-cpu", {"rows": []}), "load": {"before": 0.2, "after": None, "note": "alone"}},
        "c": {**made_up("c", "memory", {"rows": []}), "load": {"before": None, "after": None}},
    }
    t = render.Tables(made)
    assert render.loads(t, ["a"]) == "Load average 0.40"
    assert render.loads(t, ["a", "b"]) == "Load average 0.20 to 0.40 (alone)"
    assert render.loads(t, ["c"]) == "Load average not recorded"
