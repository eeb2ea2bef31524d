"""Each benchmark script's record-building function makes figures that `results.validate` accepts and that
render.py's table for that record renders, from small made-up measurements (no benchmark runs)."""

from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]

import render  # noqa: E402
import results  # noqa: E402


def made_up(rid: str, question: str, figures: Dict[str, Any], **fields: Any) -> Dict[str, Any]:
    """A record as `results.record` writes it, around figures."""
    data = {
        "id": rid,
        "question": question,
        "title": fields.pop("title", "a measurement"),
        "dataset": fields.pop("dataset", None),
        "command": "python benchmarks/x.py",
        "date": "2026-01-01",
        "version": "0.0.0",
        "commit": None,
        "machine": "a CPU",
        "threads": 1,
        "load": {"before": 0.1, "after": 0.2},
        "seeds": fields.pop("seeds", []),
        "setup": fields.pop("setup", {}),
        "figures": figures,
    }
    assert results.validate(data) == [], rid
    return data


def rendered(table: str, *records: Dict[str, Any]) -> str:
    t = render.Tables({r["id"]: r for r in records})
    text = render.TABLES[table](t)
    assert text.startswith("|") and len(text.splitlines()) > 2
    return text


def rounds(base: float) -> Dict[str, List[float]]:
    return {"b1": [base, base * 1.1, base * 0.9], "batch": [3 * base, 3.3 * base, 2.7 * base]}


def family_measured() -> tuple:
    names = ["FLAT", "TENER", "DC-SAN", "spaCy ner"]
    measured = {d: {name: rounds(1000.0 * (k + 1)) for k, name in enumerate(names)} for d in ("resume", "msra")}
    rates = {d: {name: 10.0 + k for k, name in enumerate(names)} for d in ("resume", "msra")}
    memory = {name: 300.0 + k for k, name in enumerate(names)}
    return measured, rates, memory


def test_family_cpu_record_renders():
    import family

    figures = family.family_figures(*family_measured())
    assert figures["rows"][0]["resume_batch"] == {"median": 3000, "min": 2700, "max": 3300}
    assert "dcsan_over_flat" in figures
    text = rendered("cpu-family", made_up("speed-cpu-family", "speed-cpu", figures))
    assert "| FLAT |" in text


def test_family_gpu_record_renders():
    import family

    figures = family.family_figures(*family_measured(), gpu=True)
    assert [r["dataset"] for r in figures["rows"]] == ["resume"] * 4 + ["msra"] * 4
    assert "step_memory_mb" in figures["rows"][0] and "step_memory_mb" not in figures["rows"][-1]
    rendered("gpu-family", made_up("speed-gpu-family", "speed-gpu", figures))
    measured, rates, memory = family_measured()
    for dataset in measured.values():
        for cells in dataset.values():
            cells["large"] = [2 * v for v in cells["batch"]]
    figures = family.family_figures(measured, rates, memory, gpu=True, large_batch=256)
    assert figures["large_batch"] == 256 and figures["rows"][0]["large_ratio"] == 0.25
    text = rendered("gpu-family", made_up("speed-gpu-family", "speed-gpu", figures))
    assert "/ spaCy ner at 256" in text and "| 0.25× |" in text


def memory_cell(mb: float) -> Dict[str, float]:
    return {"peak_mb": mb, "words_per_text": 27.4}


def test_memory_record_renders():
    import memory

    def cells(windowed: Optional[float], literal: Optional[float]) -> Dict[Any, Any]:
        out = {}
        for mode in ("train", "infer"):
            out[(mode, "flat")] = memory_cell(35.2)
            out[(mode, "windowed")] = None if windowed is None else memory_cell(windowed)
            out[(mode, "literal")] = None if literal is None else memory_cell(literal)
        return out

    figures = memory.memory_figures({50: cells(None, 149.0), 1000: cells(466.0, None)})
    assert figures["rows"][0]["train_ratio"] == 4.2 and figures["rows"][1]["train_literal_mb"] is None
    rendered("memory-by-length", made_up("memory-training-step-by-length", "memory", figures, dataset="msra"))


def test_long_docs_record_renders():
    import long_docs

    figures = long_docs.long_docs_figures([{"chars": 1000, "seconds": 0.32, "peak_mb": 190.4, "ents": 3}])
    assert figures["rows"] == [{"chars": 1000, "seconds": 0.3, "chars_per_s": 3125, "peak_mb": 190}]
    rendered("long-docs", made_up("long-docs-windows", "long-docs", figures, dataset="msra"))


def test_annotation_throughput_record_renders():
    import annotate_speed

    local = {1: {"chars_per_s": 21924.0, "peak_mb": 1031.0}, 2: {"chars_per_s": 11331.0, "peak_mb": 1013.0}}
    ray = {1: {"chars_per_s": 13251.0, "peak_mb": float("nan")}, 2: {"chars_per_s": 23142.0, "peak_mb": 951.0}}
    figures = annotate_speed.annotation_figures(2.3e7, 22768.0, 2, local, ray, 3.72, 1035606, 26190)
    assert figures["per_actor_core"] == 11571 and figures["ray_over_local"] == 1.06
    assert figures["rows"][4]["peak_mb"] is None
    record = made_up("annotation-throughput", "annotation", figures, dataset="msra")
    assert "local engine, 2 processes" in rendered("annotation", record)
    assert render.lookup(record, "figures.per_actor_core") == 11571


def test_stages_record_renders():
    import stages

    runs = {"current": {"b1": [3.0e4], "batch": [1.4e5], "full": [2.7e4]}}
    runs["baseline abc123"] = {"b1": [2.3e4], "batch": [6.5e4], "full": [2.2e4]}
    figures = stages.stages_figures({"resume": runs, "msra": {"current": runs["current"]}})
    assert figures["rows"][0]["pipeline"] == "Resume, untrained" and "before" in figures["rows"][0]
    assert "before" not in figures["rows"][1]
    rendered("cpu-stages", made_up("speed-cpu-stages", "speed-cpu", figures))


def run_result(f1: float) -> Dict[str, float]:
    return {"test_f": f1, "dev_f": f1 + 1, "train_s": 460.0, "test_chars_per_s": 1200.0}


@pytest.mark.parametrize("seeds", [[0], [0, 1, 2]])
def test_transformer_records_render(seeds):
    import transformer
    from accuracy import seeds_figures

    names = transformer.record_names("weibo", "resume_trf.cfg", None, 3, seeds, "m3e-small", [])
    made = []
    for key in ("ours", "peer"):
        rid, title, setup = names[key]
        figures = seeds_figures([run_result(64.0 + s) for s in seeds])
        made.append(made_up(rid, "accuracy", figures, title=title, dataset="weibo", seeds=seeds, setup=setup))
    assert made[0]["id"] == "accuracy-weibo-flat-defaults-3ep-s" + "".join(map(str, seeds)) + "-m3e-small"
    text = rendered("accuracy-weibo", *made)
    assert "FLAT + m3e-small" in text and "spaCy ner + m3e-small" in text


F1 = {"test_f1": {"mean": 50.0}}


def test_provenance_names_one_run_once():
    """Records one command wrote at one time share a line that names them all; another run has its own."""
    first = made_up("a-1", "accuracy", F1, setup={})
    second = made_up("a-2", "accuracy", F1, setup={})
    other = {**made_up("b-1", "accuracy", F1, setup={}), "date": "2026-01-02"}
    noted = {**made_up("a-3", "accuracy", F1, setup={}), "notes": "Two runs at a time."}
    t = render.Tables({r["id"]: r for r in (first, second, other, noted)})
    lines = render.provenance(t, ["a-1", "b-1", "a-2", "a-3"]).splitlines()
    assert lines[0] == "Machine: a CPU."
    assert lines[1].endswith("; `a-1`, `a-2`, `a-3`). Two runs at a time.")
    assert lines[2].endswith("; `b-1`).") and "2026-01-02" in lines[2]
    assert len(lines) == 3


def test_training_speed_record_renders():
    import training_speed

    def run(cold: float, warm: float) -> Dict[str, Any]:
        return {"init_s": 9.0, "cold_s": cold, "warm_s": warm, "steps": 12, "peak_mb": 900.0, "cache_mb": 2.0}

    whole = training_speed.training_row("resume", "flat", 2, [run(30.0, 20.0)], [run(40.0, 38.0)], 3821, 3821)
    assert whole["speedup_warm"] == 1.9 and "sentences" not in whole and whole["init_s"]["median"] == 9.0
    sampled = training_speed.training_row("msra", "dcsan", 2, [run(3.0, 2.0), run(3.2, 2.2)], [], 4000, 41728)
    # Seconds and the cache scaled from the sample to the whole file; the set-up is not.
    assert sampled["sentences"] == 4000 and sampled["warm_s"]["median"] == round(2.1 * 41728 / 4000, 2)
    assert sampled["init_s"]["median"] == 9.0 and "base" not in sampled
    record = made_up("speed-training-cpu", "speed-cpu", {"rows": [whole, sampled]}, setup={"baseline": "8517047"})
    text = rendered("training-speed", record)
    assert "1.90×" in text and "4,000 sentences, scaled" in text and "speed-training-gpu" in text
