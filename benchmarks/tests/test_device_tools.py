"""The benchmarks' tools for a GPU machine: records of one seed each merged into one over the seeds
(benchmarks/merge_seeds.py), a transformer pipeline carried in half precision and in parts
(benchmarks/tools/device_model.py), and the device-decoding lane's measurements (benchmarks/tools/device_lane.sh):
the family's pooled test sets, batch 1 over a part of them and the trained FLAT's rows
(benchmarks/family.py), the profile's stages and record (benchmarks/tools/profile_inference.py), and their
tables (benchmarks/render.py)."""

import statistics
from pathlib import Path
from typing import Any, Dict, List

import pytest
import spacy
import torch

ROOT = Path(__file__).resolve().parents[2]

import device_model  # noqa: E402
import family  # noqa: E402
import merge_seeds  # noqa: E402
import profile_inference  # noqa: E402
import render  # noqa: E402
import results  # noqa: E402
from test_records import family_measured, made_up  # noqa: E402

from tests.util import SHARED, tiny_examples, tiny_records  # noqa: E402

TINY_BERT = SHARED / "vectors" / "albert-tiny-chinese"


def one_seed(seed: int, test: float, dev: float, **changes: Any) -> Dict[str, Any]:
    record = {
        "id": f"accuracy-resume-flat-defaults-6ep-s{seed}-m3e-small-gpu",
        "question": "accuracy",
        "title": "Resume, FLAT + m3e-small, embedded defaults, 6 epochs",
        "dataset": "resume",
        "command": f"python benchmarks/transformer.py resume --epochs 6 --seeds {seed} --skip-peer --gpu-id 0",
        "date": "2026-01-01",
        "version": "0.0.0",
        "commit": "abc1234",
        "machine": "a GPU",
        "threads": 4,
        "load": {"before": 1.0 + seed, "after": 2.0},
        "seeds": [seed],
        "setup": {"architecture": "FLAT", "epochs": 6},
        "figures": {
            "test_f1": {"mean": test, "per_seed": [test]},
            "dev_f1": {"mean": dev, "per_seed": [dev]},
            "train_s": {"median": 100 + seed, "per_seed": [100 + seed]},
            "test_chars_per_s": {"median": 5000},
            "dev_curve": [[[1.0, dev]]],
        },
    }
    record.update(changes)
    return record


def test_merge_seeds_gives_the_record_of_a_run_over_the_seeds():
    merged = merge_seeds.merge([one_seed(2, 94.44, 95.10), one_seed(0, 94.89, 94.69), one_seed(1, 94.78, 94.79)])
    assert merged["id"] == "accuracy-resume-flat-defaults-6ep-s012-m3e-small-gpu"
    assert merged["seeds"] == [0, 1, 2]
    assert "--seeds N" in merged["command"]
    test = merged["figures"]["test_f1"]
    assert test["per_seed"] == [94.89, 94.78, 94.44]
    assert test["mean"] == round(statistics.mean([94.89, 94.78, 94.44]), 2)
    assert test["sd"] == round(statistics.stdev([94.89, 94.78, 94.44]), 2)
    assert merged["figures"]["train_s"] == {"median": 101, "per_seed": [100, 101, 102]}
    assert len(merged["figures"]["dev_curve"]) == 3
    # Speeds measured beside each other are no figure of one run.
    assert "test_chars_per_s" not in merged["figures"]
    assert merged["load"]["before"] == 3.0


def test_merge_seeds_of_different_commits_names_each_seeds():
    seeds = [one_seed(0, 94.0, 94.2), one_seed(1, 95.0, 94.8, commit="def5678")]
    merged = merge_seeds.merge(seeds, notes="Two seeds.", commit="def5678", commits_note="training is the same.")
    assert merged["commit"] == "def5678"
    assert merged["notes"] == (
        "Two seeds. The seeds trained at different commits (seed 0 at abc1234, seed 1 at def5678): "
        "training is the same."
    )
    assert merged["figures"]["test_f1"]["per_seed"] == [94.0, 95.0]


def test_merge_seeds_refuses_records_of_different_runs():
    with pytest.raises(ValueError, match="setup"):
        merge_seeds.merge([one_seed(0, 94.0, 94.0), one_seed(1, 94.0, 94.0, setup={"epochs": 3})])
    with pytest.raises(ValueError, match="commit"):
        merge_seeds.merge([one_seed(0, 94.0, 94.0), one_seed(1, 94.0, 94.0, commit="def5678")])
    with pytest.raises(ValueError, match="one seed"):
        merge_seeds.merge([one_seed(0, 94.0, 94.0, seeds=[0, 1])])
    with pytest.raises(ValueError, match="none of the records' commits"):
        merge_seeds.merge(
            [one_seed(0, 94.0, 94.0), one_seed(1, 94.0, 94.0, commit="def5678")],
            commit="fff0000",
            commits_note="same training",
        )
    with pytest.raises(ValueError, match="share their commit"):
        merge_seeds.merge([one_seed(0, 94.0, 94.0), one_seed(1, 94.0, 94.0)], commit="abc1234", commits_note="same")
    with pytest.raises(ValueError, match="name both"):
        merge_seeds.merge([one_seed(0, 94.0, 94.0), one_seed(1, 94.0, 94.0, commit="def5678")], commit="def5678")
    other = one_seed(1, 94.0, 94.0)
    other["command"] = other["command"].replace("--epochs 6", "--epochs 3")
    with pytest.raises(ValueError, match="commands differ"):
        merge_seeds.merge([one_seed(0, 94.0, 94.0), other])


def test_merge_seeds_says_each_seeds_threads_where_they_differ():
    alone = one_seed(0, 94.0, 94.0, threads=16)
    beside = [one_seed(s, 94.0, 94.0, threads=3) for s in (1, 2)]
    for record in beside:
        record["command"] = "OMP_NUM_THREADS=3 " + record["command"]
    merged = merge_seeds.merge([alone, *beside], load_note="seed 0 alone")
    assert merged["threads"] is None
    assert not merged["command"].startswith("OMP_NUM_THREADS")
    assert merged["load"]["note"] == "seed 0 alone; threads 16 (seed 0), 3 (seed 1), 3 (seed 2)"
    same = merge_seeds.merge([one_seed(s, 94.0, 94.0) for s in (0, 1)])
    assert same["threads"] == 4


@pytest.mark.skipif(not TINY_BERT.exists(), reason=f"{TINY_BERT} is absent")
def test_a_pipeline_comes_back_with_its_transformer_rounded_to_half(tmp_path, monkeypatch):
    import spacy_transformers  # noqa: F401

    nlp = spacy.blank("zh")
    nlp.add_pipe("transformer", config={"model": {"name": str(TINY_BERT), "tokenizer_config": {"use_fast": True}}})
    nlp.initialize(lambda: tiny_examples(nlp))
    nlp.to_disk(tmp_path / "model")
    # Small parts, so that the file is cut into several and joined again.
    monkeypatch.setattr(device_model, "PART_BYTES", 1024 * 1024)
    device_model.pack_pipeline(tmp_path / "model", tmp_path / "parts")
    parts = sorted((tmp_path / "parts").iterdir())
    assert len(parts) > 1 and all(p.stat().st_size <= 1024 * 1024 for p in parts)
    device_model.unpack_pipeline(tmp_path / "parts", tmp_path / "back")
    back = spacy.load(tmp_path / "back")

    def weights(pipeline: spacy.Language) -> Dict[str, torch.Tensor]:
        shims = [s for node in pipeline.get_pipe("transformer").model.walk() for s in node.shims]
        return {k: v.detach() for k, v in shims[0]._model.state_dict().items()}

    before, after = weights(nlp), weights(back)
    assert before.keys() == after.keys()
    for key, value in before.items():
        assert after[key].dtype == value.dtype
        expected = value.half().to(value.dtype) if value.is_floating_point() else value
        assert torch.equal(after[key], expected), key
    assert any(not torch.equal(after[k], v) for k, v in before.items() if v.is_floating_point())


@pytest.mark.skipif(not TINY_BERT.exists(), reason=f"{TINY_BERT} is absent")
def test_a_transformer_travels_in_half_and_loads_in_float32(tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModel

    device_model.pack_hf(TINY_BERT, tmp_path / "half")
    assert not (tmp_path / "half" / "pytorch_model.bin").exists()
    source = torch.load(TINY_BERT / "pytorch_model.bin", map_location="cpu", weights_only=True)
    packed = load_file(tmp_path / "half" / "model.safetensors")
    assert packed.keys() == source.keys()
    for key, value in source.items():
        expected = value.half() if value.is_floating_point() else value
        assert torch.equal(packed[key], expected), key
    # Loaded, the weights are float32 parameters holding the rounded values.
    loaded = AutoModel.from_pretrained(str(tmp_path / "half")).state_dict()
    words = loaded["embeddings.word_embeddings.weight"]
    assert words.dtype == torch.float32
    assert torch.equal(words, source["albert.embeddings.word_embeddings.weight"].half().float())


def test_a_test_set_is_pooled_in_order():
    assert family.pooled(["a", "b", "c"], 7) == ["a", "b", "c", "a", "b", "c", "a"]
    assert family.pooled(["a", "b", "c"], 2) == ["a", "b"]
    assert family.pooled([], 5) == []


def test_batch_one_is_timed_over_the_first_docs_only(trained_nlp, monkeypatch):
    texts = [r["text"] for r in tiny_records()]
    docs = family.pooled(texts, 25)
    calls: List[str] = []
    real = type(trained_nlp).__call__

    def counted(self: Any, text: str, **kwargs: Any) -> Any:
        calls.append(text)
        return real(self, text, **kwargs)

    monkeypatch.setattr(type(trained_nlp), "__call__", counted)
    rounds = family.inference({"FLAT": trained_nlp}, docs, repeats=2, batch_size=8, b1_docs=4)
    assert calls == docs[:4] * 2
    assert {mode: len(values) for mode, values in rounds["FLAT"].items()} == {"b1": 2, "batch": 2, "same": 2}
    assert rounds["FLAT"]["same"] == [1.0, 1.0]


def test_the_trained_flats_rows_render_in_the_gpu_family_table():
    measured, rates, _ = family_measured()
    for dataset in measured.values():
        for cells in dataset.values():
            cells["large"] = [2 * v for v in cells["batch"]]
    trained = {"b1": [500.0, 550.0], "batch": [1500.0, 1600.0], "large": [3000.0, 3100.0]}
    measured["resume"]["FLAT, trained 300 steps, decoding auto"] = trained
    measured["resume"]["FLAT, trained 300 steps, decoding numpy"] = trained
    figures = family.family_figures(measured, rates, {}, gpu=True, large_batch=256)
    rows = {(r["dataset"], r["pipeline"]): r for r in figures["rows"]}
    assert len(rows) == 10 and rows[("resume", "FLAT, trained 300 steps, decoding auto")]["s_per_epoch"] is None
    assert not any("step_memory_mb" in r for r in figures["rows"])
    text = render.gpu_family(render.Tables({"speed-gpu-family": made_up("speed-gpu-family", "speed-gpu", figures)}))
    assert "CUDA" not in text  # no memory column without the memory part
    assert "| Resume | FLAT, trained 300 steps, decoding numpy | 525 (500–550) |" in text
    assert text.splitlines()[-1].count("|") == text.splitlines()[0].count("|")
    # On a CPU the table needs both test sets and the step's memory: the trained rows are left out.
    memory = {name: 300.0 for name in ("FLAT", "TENER", "DC-SAN", "spaCy ner")}
    cpu = family.family_figures(measured, rates, memory)
    assert [r["pipeline"] for r in cpu["rows"]] == ["FLAT", "TENER", "DC-SAN", "spaCy ner"]


def test_every_profiled_stage_names_a_function_of_the_package():
    keys = {stage: profile_inference.profile_key(stage) for _, stage, _ in profile_inference.STAGES}
    assert len(set(keys.values())) == len(keys)
    for stage, (path, _, name) in keys.items():
        assert stage.endswith(name) and "spacy_flat" in Path(path).parts, stage
    assert "layers.device_decoder.decode_on_device" in keys and "layers.tagger_handle.TorchTagger.best_paths" in keys
    # A decorated function is profiled as itself, not as its decorator's wrapper.
    assert keys["nn.flat.position_scores._PositionScores.forward"][0].endswith("position_scores.py")
    with pytest.raises(AttributeError):
        profile_inference.profile_key("layers.device_decoder.no_such_function")


def test_the_gpu_profile_record_renders_beside_the_family():
    columns = [
        {"decoding": d, "on_device": d == "auto", "batch_size": b, "chars_per_s": 1000 * b, "profiled_s": 2.0}
        for d in ("auto", "numpy")
        for b in (1, 256)
    ]
    spent = [[0.1 * (k + 1)] * len(columns) for k in range(len(profile_inference.STAGES))]
    figures = profile_inference.profile_figures(columns, spent)
    assert figures["rows"][0]["shares"] == [5.0] * 4
    rid = render.GPU_PROFILE
    record = made_up(rid, "speed-gpu", figures, dataset="resume")
    text = render.gpu_profile(render.Tables({rid: record}))
    lines = text.splitlines()
    assert "device decoding, batch 256" in lines[0] and "NumPy decoding, batch 1" in lines[0]
    assert lines[2].startswith("| chars/s under the profiler |   | 1,000 | 256,000 |")
    assert "| · Viterbi | `crf.device_decoding.viterbi` |" in text
    assert len(lines) == 3 + len(profile_inference.STAGES)
    assert results.validate(record) == []
    assert "No GPU profile is recorded yet" in render.gpu_profile(render.Tables({}))
