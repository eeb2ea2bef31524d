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
    """(digits, value) of every number the records hold or the tables compute from them (the dev-curves
    table's means), rounded to 0-4 digits."""
    values = [*results.numbers(records.values()), *render.derived_numbers(records)]
    return {(digits, round(abs(value), digits)) for value in values for digits in range(5)}


def unknown_numbers(text: str, records: dict) -> List[str]:
    """The numbers of text's tables that no record holds (at the table's precision), nor the tables compute
    from the records."""
    known = known_numbers(records)
    missing = []
    for number, line in table_rows(text):
        for token in NUMBER.findall(line.replace("`", " ")):
            token = token.rstrip(",")
            digits = len(token.split(".")[1]) if "." in token else 0
            if (digits, round(float(token.replace(",", "")), digits)) not in known:
                missing.append(f"line {number}: {token} in {line[:90]}")
    return missing


@pytest.mark.parametrize("rid", sorted(RECORDS))
def test_every_result_record_is_complete(rid):
    record = RECORDS[rid]
    assert record.get("id") == rid, "a record's id is its file name"
    assert results.validate(record) == []


def test_the_documents_are_what_their_data_renders():
    assert render.main(["--check"]) == 0, "re-render with: python benchmarks/render.py"


@pytest.mark.parametrize("name", ["README.md", "BENCHMARKS.md"])
def test_every_number_in_a_table_comes_from_a_result_record(name):
    text = (ROOT / name).read_text(encoding="utf8")
    assert list(table_rows(text)), f"{name} has no table"
    assert unknown_numbers(text, RECORDS) == []


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


def test_a_figure_a_table_computes_counts_as_known():
    """The dev-curves table's means over the seeds are in no record, yet count as known; an edited one does not."""
    from test_records import made_up

    curves = [
        [[1.0, 60.1], [2.0, 63.2], [3.0, 64.0], [5.0, 65.2]],
        [[1.0, 60.5], [2.0, 63.8], [3.0, 64.4], [5.0, 64.8]],
    ]
    rec = made_up(
        "accuracy-weibo-flat-defaults-5ep-s01",
        "accuracy",
        {"test_f1": {"mean": 58.0, "sd": 0.6, "per_seed": [57.6, 58.4]}, "dev_curve": curves},
        title="Weibo, FLAT, embedded defaults, 5 epochs",
        dataset="weibo",
        seeds=[0, 1],
        setup={"architecture": "FLAT", "inputs": "embedded defaults", "epochs": 5},
    )
    made = {rec["id"]: rec}
    text = render.TABLES["dev-curves"](render.Tables(made))
    assert "| 63.5 |" in text, "the seeds' mean at epoch 2"
    assert (1, 63.5) not in {(1, round(x, 1)) for x in results.numbers(made.values())}
    assert unknown_numbers(text, made) == []
    assert unknown_numbers(text.replace("63.5", "63.7"), made), "an edited mean went unnoticed"


def test_every_record_is_shown_somewhere():
    """A record no table reads is a measurement nobody sees: place it in the template or delete it."""
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf8")
    unseen = [rid for rid in RECORDS if f"`{rid}`" not in benchmarks and not rid.startswith("reference-")]
    assert unseen == []
