"""`annotate` on one machine (annotation/): every input format, ids, bad records
reported and counted, a document the pipeline fails on, shards that a stopped run
resumes, Parquet in and out (skipped without pyarrow), output equal to nlp.pipe."""

import csv
import gzip
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from spacy.language import Language

import spacy_flat.annotate.local as local
from spacy_flat.annotate.batches import PIPELINE_FAILED
from spacy_flat.annotate.local import AnnotateSettings, annotate
from spacy_flat.annotate.ray_actor import AttemptLedger
from spacy_flat.annotate.ray_reading import _count, _file_batches
from spacy_flat.annotate.records import RecordFormat
from spacy_flat.annotate.shards import read_shards as read_any_shards
from spacy_flat.cli.main import main
from spacy_flat.errors import FlatError

from ..util import SHARED, needs_shared

QUIET = AnnotateSettings(batch_size=16, shard_size=40, progress=False)


def sentences(n: int):
    """The first n sentences of MSRA's test set, as text."""
    out, chars = [], []
    for line in (SHARED / "data" / "msra" / "test.char.bmes").read_text(encoding="utf8").splitlines():
        if line.strip():
            chars.append(line.split()[0])
        elif chars:
            out.append("".join(chars))
            chars = []
            if len(out) == n:
                break
    return out


def read_shards(out: Path):
    return [json.loads(line) for path in sorted(out.glob("shard-*.jsonl")) for line in path.read_text().splitlines()]


@needs_shared
def test_text_jsonl_and_csv_give_nlp_pipes_entities_with_ids(trained_nlp, tmp_path):
    texts = sentences(120)
    (tmp_path / "a.txt").write_text("\n".join(texts[:40]) + "\n", encoding="utf8")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf8") as f:
        for k, text in enumerate(texts[40:80]):
            f.write(json.dumps({"doc_id": f"b{k}", "body": text, "source": "news"}, ensure_ascii=False) + "\n")
    with open(tmp_path / "c.csv", "w", encoding="utf8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["doc_id", "body"])
        writer.writerows([(f"c{k}", text) for k, text in enumerate(texts[80:])])
    txt = annotate(trained_nlp, [str(tmp_path / "a.txt")], tmp_path / "out_txt", settings=QUIET)
    fmt = RecordFormat(text_field="body", id_field="doc_id")
    rest = annotate(trained_nlp, [str(tmp_path / "b.jsonl.gz"), str(tmp_path / "c.csv")], tmp_path / "out", fmt, QUIET)
    assert (txt["read"], txt["annotated"], rest["read"], rest["annotated"]) == (40, 40, 80, 80)
    records = read_shards(tmp_path / "out_txt") + read_shards(tmp_path / "out")
    assert records[0]["id"] == f"{tmp_path / 'a.txt'}:1" and records[40]["id"] == "b0" and records[80]["id"] == "c0"
    assert records[40]["source"] == "news"
    expected = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in trained_nlp.pipe(texts)]
    assert [[(e["start"], e["end"], e["label"]) for e in r["entities"]] for r in records] == expected
    assert all(0 < e["p"] <= 1 for r in records for e in r["entities"])
    assert len(list((tmp_path / "out").glob("shard-*.jsonl"))) == 2  # 80 documents, 40 a shard


def test_bad_records_are_reported_with_file_and_line_and_never_stop_the_run(trained_nlp, tmp_path):
    good = {"text": "张三在北京大学工作。"}
    lines = [
        json.dumps(good, ensure_ascii=False).encode(),
        b"\xff\xfe not utf-8",
        b"{not json",
        json.dumps({"body": "no text field"}).encode(),
        json.dumps({"text": ""}).encode(),
        json.dumps({"text": "长" * 50}, ensure_ascii=False).encode(),
        json.dumps({"text": "李四住在上海。"}, ensure_ascii=False).encode(),
    ]
    (tmp_path / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (tmp_path / "notes.docx").write_bytes(b"PK")
    fmt = RecordFormat(max_chars=40)
    summary = annotate(trained_nlp, [str(tmp_path)], tmp_path / "out", fmt, QUIET)
    assert (summary["read"], summary["annotated"], summary["skipped"]) == (2, 2, 6)
    problems = "\n".join(summary["problems"])
    for where, why in [
        (2, "not valid UTF-8"),
        (3, "not JSON"),
        (4, "no text field 'text'"),
        (5, "empty text"),
        (6, "text longer than 40 characters"),
    ]:
        assert f"bad.jsonl:{where}: {why}" in problems
    assert "notes.docx: unknown format" in problems
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["skipped_by_reason"]["empty text"] == 1


def test_a_stopped_run_resumes_to_the_output_of_an_uninterrupted_one(trained_nlp, tmp_path, monkeypatch):
    texts = ["张三在北京大学工作。", "李四住在上海。", "王五在华为公司任职。", "今天天气很好。"] * 25
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf8")
    settings = AnnotateSettings(batch_size=8, shard_size=30, progress=False)
    whole = annotate(trained_nlp, [str(tmp_path / "in.txt")], tmp_path / "whole", settings=settings)
    real_write = local.write_shard
    written = []

    def crash_after_two(output, index, lines, output_format):
        if len(written) == 2:
            raise KeyboardInterrupt  # the run is stopped while writing its third shard
        written.append(index)
        real_write(output, index, lines, output_format)

    monkeypatch.setattr(local, "write_shard", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        annotate(trained_nlp, [str(tmp_path / "in.txt")], tmp_path / "resumed", settings=settings)
    monkeypatch.setattr(local, "write_shard", real_write)
    resumed = annotate(trained_nlp, [str(tmp_path / "in.txt")], tmp_path / "resumed", settings=settings)
    assert (resumed["shards_reused"], resumed["shards_written"], whole["shards_written"]) == (2, 2, 4)
    assert read_shards(tmp_path / "resumed") == read_shards(tmp_path / "whole")
    assert not list((tmp_path / "resumed").glob("*.partial"))
    with pytest.raises(FlatError, match="other batch_size, shard_size"):
        annotate(trained_nlp, [str(tmp_path / "in.txt")], tmp_path / "resumed", settings=QUIET)


def test_the_command_line(trained_nlp, tmp_path, capsys):
    trained_nlp.to_disk(tmp_path / "model")
    (tmp_path / "in.txt").write_text("张三在北京大学工作。\n\n李四住在上海。\n", encoding="utf8")
    args = ["annotate", str(tmp_path / "model"), str(tmp_path / "in.txt"), "--output", str(tmp_path / "out")]
    assert main([*args, "--no-progress", "--keep-text"]) == 0
    said = capsys.readouterr().out
    assert "read 2 documents, annotated 2" in said and "skipped 1: 1 empty text" in said
    assert read_shards(tmp_path / "out")[1]["text"] == "李四住在上海。"
    assert main(["annotate", str(tmp_path / "model"), str(tmp_path / "nothing*.txt"), "--output", "x"]) == 1
    assert "no such file, directory or glob match" in capsys.readouterr().err


@Language.component("spacy_flat_test_fails_on_a_marker")
def fails_on_a_marker(doc):
    if "故障" in doc.text:
        raise ValueError("a test failure")
    return doc


@needs_shared
@pytest.mark.parametrize("n_process", [1, 2])
def test_a_document_the_pipeline_fails_on_is_reported_and_its_batch_mates_annotated(
    trained_nlp, tmp_path, n_process, caplog
):
    """With spaCy's processes too (no hang, and no fallback to doing the shard here: the failed batch's
    records are redone one by one and the failing one named)."""
    texts = sentences(30)
    texts[5] = "故障" + texts[5]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf8")
    settings = AnnotateSettings(batch_size=8, shard_size=20, progress=False, n_process=n_process)
    trained_nlp.add_pipe("spacy_flat_test_fails_on_a_marker")
    try:
        summary = annotate(trained_nlp, [str(tmp_path / "in.txt")], tmp_path / "out", settings=settings)
    finally:
        trained_nlp.remove_pipe("spacy_flat_test_fails_on_a_marker")
    assert (summary["read"], summary["annotated"], summary["skipped"]) == (30, 29, 1)
    assert summary["skipped_by_reason"] == {PIPELINE_FAILED: 1}
    assert not [r.getMessage() for r in caplog.records if "redoing it batch by batch" in r.getMessage()]
    assert summary["problems"] == [f"{tmp_path / 'in.txt'}:6: {PIPELINE_FAILED} (ValueError: a test failure)"]
    records = read_shards(tmp_path / "out")
    assert [r["id"] for r in records] == [f"{tmp_path / 'in.txt'}:{k}" for k in range(1, 31) if k != 6]
    others = [t for k, t in enumerate(texts) if k != 5]
    expected = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in trained_nlp.pipe(others)]
    assert [[(e["start"], e["end"], e["label"]) for e in r["entities"]] for r in records] == expected


@needs_shared
def test_parquet_in_and_out(trained_nlp, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import datetime

    import pyarrow.parquet as pq

    texts: list = sentences(50)
    texts[7] = None
    when = [datetime.date(2026, 1, 1) + datetime.timedelta(days=k) for k in range(50)]
    table = pa.table({"doc_id": [f"p{k}" for k in range(50)], "body": texts, "when": when, "n": list(range(50))})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=16)
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 this is not Parquet")
    pq.write_table(pa.table({"body": [1, 2]}), tmp_path / "numbers.parquet")
    inputs = [str(tmp_path / name) for name in ("in.parquet", "broken.parquet", "numbers.parquet")]
    fmt = RecordFormat(text_field="body", id_field="doc_id")
    settings = AnnotateSettings(batch_size=16, shard_size=20, progress=False)
    as_json = annotate(trained_nlp, inputs, tmp_path / "json", fmt, settings)
    parquet = AnnotateSettings(batch_size=16, shard_size=20, progress=False, output_format="parquet")
    as_parquet = annotate(trained_nlp, inputs, tmp_path / "parquet", fmt, parquet)
    assert len(list((tmp_path / "parquet").glob("shard-*.parquet"))) == 3
    records = read_any_shards(tmp_path / "parquet")
    assert records == read_shards(tmp_path / "json")
    assert (as_json["read"], as_json["annotated"], as_json["skipped"]) == (49, 49, 3)
    assert as_parquet["problems"] == as_json["problems"]
    problems = "\n".join(as_json["problems"])
    assert f"{tmp_path / 'in.parquet'}:8: no text field 'body'" in problems
    assert f"{tmp_path / 'broken.parquet'}: damaged file" in problems
    assert f"{tmp_path / 'numbers.parquet'}: text column 'body' holds int64, not strings" in problems
    assert records[0]["id"] == "p0" and records[0]["when"] == "2026-01-01" and records[0]["n"] == 0
    kept = [t for t in texts if t is not None]
    expected = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in trained_nlp.pipe(kept)]
    assert [[(e["start"], e["end"], e["label"]) for e in r["entities"]] for r in records] == expected
    with pytest.raises(FlatError, match="other output_format"):
        annotate(trained_nlp, inputs, tmp_path / "json", fmt, parquet)


def test_carried_fields_never_clash_with_ours_and_always_fit_parquet(trained_nlp, tmp_path):
    pytest.importorskip("pyarrow")
    rows = [
        {"text": "张三在北京大学工作。", "id": 7, "entities": ["given"], "m": 1, "e": {}, "nothing": None},
        {"text": "李四住在上海。", "id": 8, "m": "x", "late": [1, 2], "nothing": None},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf8")
    out = {}
    for form in ("jsonl", "parquet"):
        settings = AnnotateSettings(batch_size=8, shard_size=10, progress=False, output_format=form)
        annotate(trained_nlp, [str(tmp_path / "in.jsonl")], tmp_path / form, settings=settings)
        out[form] = read_any_shards(tmp_path / form)
    first, second = out["jsonl"]
    assert first["id"] == f"{tmp_path / 'in.jsonl'}:1" and first["input_id"] == 7
    assert first["input_entities"] == ["given"] and isinstance(first["entities"], list)
    assert second["m"] == "x" and "late" not in first
    first, second = out["parquet"]
    assert first["id"] == out["jsonl"][0]["id"] and first["input_id"] == 7 and second["input_id"] == 8
    assert first["entities"] == out["jsonl"][0]["entities"] and first["input_entities"] == ["given"]
    # Mixed types and empty objects as JSON text; a field null throughout as text; a late field null before.
    assert (first["m"], second["m"], first["e"], first["nothing"]) == ("1", '"x"', "{}", None)
    assert (first["late"], second["late"]) == (None, [1, 2])


def test_the_ledger_counts_a_death_only_against_the_batch_in_hand():
    ledger = AttemptLedger()
    assert ledger.begin("0.0") == (1, [])
    ledger.end("0.0")
    assert ledger.begin("0.1") == (1, [])  # the worker dies in batch 0.1; Ray retries the whole task
    assert ledger.begin("0.0") == (1, [])  # ended before the death: redone whole, as the first time
    ledger.end("0.0")
    assert ledger.begin("0.1") == (2, [])
    assert ledger.begin("0.1") == (3, [])  # dies again: now one document at a time
    ledger.hold("0.1", 0)
    ledger.hold("0.1", 1)
    assert ledger.begin("0.1") == (4, [1])  # the document in hand at the death
    ledger.hold("0.1", 2)
    ledger.end("0.1")
    assert ledger.begin("0.1") == (1 + 3, [1]) and ledger.fatal["0.1"] == {1}


@needs_shared
def test_rays_reading_tasks_cut_the_local_engines_shards_and_batches(trained_nlp, tmp_path, monkeypatch):
    texts = sentences(65)
    (tmp_path / "a.txt").write_text("\n".join(texts[:25]) + "\n\n", encoding="utf8")  # and an empty line
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf8") as f:
        f.write("{broken\n")
        f.writelines(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts[25:])
    files = [tmp_path / "a.txt", tmp_path / "b.jsonl.gz"]
    settings = AnnotateSettings(batch_size=16, shard_size=30, progress=False)
    seen = []
    real = local.annotate_batch

    def recording(nlp, batch, *args, **kwargs):
        seen.append([r.id for r in batch])
        return real(nlp, batch, *args, **kwargs)

    monkeypatch.setattr(local, "annotate_batch", recording)
    summary = annotate(trained_nlp, [str(f) for f in files], tmp_path / "out", settings=settings)
    fmt = asdict(RecordFormat())
    counted = _count({"index": [0, 1], "path": [str(f) for f in files], "name": [str(f) for f in files]}, fmt)
    assert counted["good"] == [25, 40] and sum(counted["read"]) == summary["read"] == 65
    problems = [p for row in counted["problems"] for p in json.loads(row)]
    assert problems == summary["problems"]  # the empty line and the broken record, in file order
    cut = []
    for k, (path, start, good) in enumerate(zip(files, (0, 25), (25, 40))):
        file = {"index": [k], "path": [str(path)], "name": [str(path)], "start": [start], "good": [good]}
        for block in _file_batches(file, fmt, 30, 16, [0, 1, 2]):
            cut.extend([[record[0] for record in json.loads(chunk)] for chunk in block["chunk"]])
    # A shard that spans two files is cut from each file's first record in it.
    assert [len(b) for b in cut] == [16, 9, 5, 16, 14, 5]
    assert cut == seen
    # Only the pending shards are cut again.
    file = {"index": [1], "path": [str(files[1])], "name": ["b"], "start": [25], "good": [40]}
    shards = [s for block in _file_batches(file, fmt, 30, 16, [2]) for s in block["shard"]]
    assert shards == [2]
    # Reading stops after the last pending shard; a file that changed between the passes is an error.
    assert [s for block in _file_batches(file, fmt, 30, 16, [0]) for s in block["shard"]] == [0]
    with pytest.raises(FlatError, match="b changed between the two reading passes: 41 good records, then 40"):
        list(_file_batches({**file, "good": [41]}, fmt, 30, 16, [0, 1, 2]))
    with pytest.raises(FlatError, match="b: no such file at"):
        list(_file_batches({**file, "path": [str(tmp_path / "gone.txt")]}, fmt, 30, 16, [2]))
