"""`model-card`: the meta.json of a packaged pipeline, from a template of sources and evaluate's scores."""

import json
import re
from pathlib import Path
from typing import Any, Dict

import pytest

from spacy_flat.cli.model_card import model_card
from spacy_flat.errors import FlatError

from ..util import ROOT

TEMPLATE: Dict[str, Any] = {
    "name": "flat_test",
    "description": "A test pipeline.",
    "license": "research use",
    "sources": [{"name": "A corpus", "url": "https://example.org/corpus", "license": "CC BY-SA 4.0"}],
    "test_sets": {"news": "News test"},
    "notes": "Exact spans.",
}


def scores(f: float) -> Dict[str, Any]:
    per_type = {"PER": {"p": 0.9, "r": 0.8, "f": 0.847}, "LOC": {"p": 0.5, "r": None, "f": None}}
    return {"ents_p": 0.9, "ents_r": 0.8, "ents_f": f, "ents_per_type": per_type, "speed": {}}


@pytest.fixture
def metrics(tmp_path: Path) -> Path:
    for name, f in (("news", 0.8471), ("wiki", 0.5)):
        (tmp_path / "metrics" / name).mkdir(parents=True)
        (tmp_path / "metrics" / name / "scores.json").write_text(json.dumps(scores(f)), encoding="utf8")
    return tmp_path / "metrics"


def write(tmp_path: Path, meta: Dict[str, Any]) -> Path:
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(meta), encoding="utf8")
    return path


def test_the_card_has_the_sources_and_a_score_table(tmp_path: Path, metrics: Path) -> None:
    meta = model_card(write(tmp_path, TEMPLATE), metrics)
    assert meta["sources"] == TEMPLATE["sources"] and meta["license"] == "research use"
    assert "test_sets" not in meta
    notes = meta["notes"]
    assert notes.startswith("Exact spans.")
    assert "| News test | PER | 90.00 | 80.00 | 84.70 |" in notes
    assert "| News test | LOC | 50.00 | – | – |" in notes
    assert "| News test | **all** | 90.00 | 80.00 | **84.71** |" in notes
    # A test set without a title keeps its folder's name.
    assert "| wiki | **all** | 90.00 | 80.00 | **50.00** |" in notes
    assert meta["test_performance"]["News test"]["ents_f"] == pytest.approx(0.8471)


def test_a_source_without_its_licence_is_refused(tmp_path: Path, metrics: Path) -> None:
    bad = {**TEMPLATE, "sources": [{"name": "A corpus", "url": "https://example.org"}]}
    with pytest.raises(FlatError, match="source 1 \\(A corpus\\) has no license"):
        model_card(write(tmp_path, bad), metrics)


def test_a_card_without_a_licence_is_refused(tmp_path: Path, metrics: Path) -> None:
    with pytest.raises(FlatError, match="needs license"):
        model_card(write(tmp_path, {**TEMPLATE, "license": ""}), metrics)


def test_no_scores_and_bad_json_name_the_file(tmp_path: Path, metrics: Path) -> None:
    with pytest.raises(FlatError, match=re.escape("no <test set>/scores.json")):
        model_card(write(tmp_path, TEMPLATE), tmp_path / "empty")
    (metrics / "news" / "scores.json").write_text('{"ents_f": 1,\n oops}', encoding="utf8")
    with pytest.raises(FlatError, match=re.escape("news/scores.json:2: not valid JSON")):
        model_card(write(tmp_path, TEMPLATE), metrics)


def test_the_general_card_names_a_licence_for_every_corpus_and_table() -> None:
    meta = json.loads((ROOT / "configs" / "general_meta.json").read_text(encoding="utf8"))
    licences = {source["name"].split(" (")[0].split(",")[0]: source["license"] for source in meta["sources"]}
    assert licences["MSRA NER"] == "research use" and licences["Resume NER"] == "research use"
    assert licences["Weibo NER"] == "CC BY-SA 3.0"
    assert licences["UNER v1 Chinese GSDSimp"] == "CC BY-SA 4.0"
    assert sum(name.startswith("Raw text of the bigram table") for name in licences) == 4
    assert set(meta["test_sets"]) == {"msra", "weibo", "resume", "uner"}
