"""Calibration of entity probabilities (calibration.py, `calibrate`, the
evaluation report's confidence section)."""

import json

import numpy
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_flat.cli.calibrate import calibrate
from spacy_flat.cli.evaluate import evaluate
from spacy_flat.decoding.calibration import (
    expected_calibration_error,
    fit_temperature,
    precision_recall_at,
    reliability,
)

from ..util import tiny_examples


def test_reliability_and_ece_by_hand():
    outcomes = [(0.95, True), (0.95, False), (0.15, False), (0.15, False), (0.15, True), (0.55, True)]
    rows = reliability(outcomes)
    assert [(r["low"], r["count"]) for r in rows] == [(0.1, 3), (0.5, 1), (0.9, 2)]
    assert rows[0]["accuracy"] == pytest.approx(1 / 3) and rows[2]["confidence"] == pytest.approx(0.95)
    expected = 3 / 6 * abs(1 / 3 - 0.15) + 1 / 6 * abs(1 - 0.55) + 2 / 6 * abs(0.5 - 0.95)
    assert expected_calibration_error(outcomes) == pytest.approx(expected)
    assert precision_recall_at(outcomes, n_gold=4, threshold=0.5) == (pytest.approx(2 / 3), 0.5, 3)


def test_fit_temperature_recovers_the_temperature_that_made_the_data():
    rng = numpy.random.default_rng(0)
    logits = rng.normal(0, 4, 4000)
    correct = rng.random(4000) < 1 / (1 + numpy.exp(-logits / 2.0))  # truth at temperature 2

    def outcomes_at(t):
        return list(zip(1 / (1 + numpy.exp(-logits / t)), correct))

    fitted = fit_temperature(outcomes_at)
    assert fitted == pytest.approx(2.0, rel=0.1)
    assert expected_calibration_error(outcomes_at(fitted)) < expected_calibration_error(outcomes_at(1.0))


@pytest.fixture(scope="module")
def saved(tmp_path_factory, trained_nlp):
    tmp = tmp_path_factory.mktemp("calibration")
    nlp = trained_nlp
    nlp.to_disk(tmp / "model")
    DocBin(docs=[eg.reference for eg in tiny_examples(nlp)]).to_disk(tmp / "dev.spacy")
    return tmp


def test_calibrate_fits_saves_and_loads_a_temperature(saved):
    temperature, report = calibrate(
        str(saved / "model"), saved / "dev.spacy", saved / "calibrated", saved / "dev.spacy"
    )
    assert temperature > 0 and temperature != 1.0
    assert report["dev"]["after"]["ece"] <= report["dev"]["before"]["ece"] + 1e-9
    assert json.loads((saved / "calibrated" / "calibration.json").read_text())["temperature"] == temperature
    before, after = spacy.load(saved / "model"), spacy.load(saved / "calibrated")
    assert after.get_pipe("flat_ner").cfg["temperature"] == pytest.approx(temperature)
    text = "张三在北京大学工作，李四住在上海。"
    doc_a, doc_b = before(text), after(text)
    assert [e.text for e in doc_a.ents] == [e.text for e in doc_b.ents]  # the temperature never changes the entities
    assert not numpy.allclose(doc_a.spans["flat_ner"].attrs["scores"], doc_b.spans["flat_ner"].attrs["scores"])


def test_calibrate_pools_several_dev_sets(saved):
    # The dev set cut in two and pooled again fits the temperature the whole one fits.
    nlp = spacy.load(saved / "model")
    docs = list(DocBin().from_disk(saved / "dev.spacy").get_docs(nlp.vocab))
    DocBin(docs=docs[: len(docs) // 2]).to_disk(saved / "dev-a.spacy")
    DocBin(docs=docs[len(docs) // 2 :]).to_disk(saved / "dev-b.spacy")
    whole, whole_report = calibrate(str(saved / "model"), [saved / "dev.spacy"])
    pooled, report = calibrate(str(saved / "model"), [saved / "dev-a.spacy", saved / "dev-b.spacy"])
    assert pooled == pytest.approx(whole)
    assert report["dev"]["after"]["ece"] == pytest.approx(whole_report["dev"]["after"]["ece"])
    assert "dev-a.spacy" in report["dev_sets"] and "dev-b.spacy" in report["dev_sets"]


def test_evaluation_reports_the_calibration(saved):
    scores = evaluate(str(saved / "model"), saved / "dev.spacy", saved / "metrics")
    confidence = scores["confidence"]
    assert set(confidence["thresholds"]) == {"0.5", "0.7", "0.9"} and confidence["reliability"]
    assert len(confidence["least_confident"]) <= 10
    assert "expected calibration error" in (saved / "metrics" / "scores.md").read_text(encoding="utf8")


def test_the_report_page_shows_errors_by_kind_pictures_and_a_colour_per_label(saved):
    from spacy.training import Example

    from spacy_flat.cli.report import error_breakdown, label_colors

    page = (saved / "metrics" / "samples.html").read_text(encoding="utf8")
    assert page.count("<svg") == 2 and "reliability diagram" in page and "Least confident" in page
    colors = label_colors(["PER", "LOC", "ORG"])
    assert len(set(colors.values())) == 3 and all(c in page for c in colors.values())
    nlp = spacy.blank("zh")
    text = "张三在北京大学工作，李四住在上海。"
    gold = nlp.make_doc(text)
    gold.ents = [gold.char_span(0, 2, "PER"), gold.char_span(3, 7, "ORG"), gold.char_span(10, 12, "PER")]
    pred = nlp.make_doc(text)
    # 张三 right; 北京 inside 北京大学 (boundary); 李四 as LOC (type); 上海 spurious; none missed.
    pred.ents = [
        pred.char_span(0, 2, "PER"),
        pred.char_span(3, 5, "LOC"),
        pred.char_span(10, 12, "LOC"),
        pred.char_span(14, 16, "LOC"),
    ]
    errors = error_breakdown([Example(pred, gold)])
    assert {k: v["count"] for k, v in errors.items()} == {
        "wrong type": 1,
        "wrong boundary": 1,
        "missed": 0,
        "spurious": 1,
    }
    assert errors["wrong type"]["examples"][0]["detail"] == "李四: LOC, gold PER"


BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def test_the_report_page_renders_in_a_real_browser(saved, tmp_path):
    """Headless Chromium loads the page, lays out both pictures and the samples, and
    screenshots it (`apt install chromium fonts-noto-cjk` gives a machine one)."""
    import shutil
    import subprocess

    browser = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if browser is None:
        pytest.skip("no Chromium on this machine")
    page = (saved / "metrics" / "samples.html").resolve().as_uri()
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2000"]
    dom = subprocess.run([browser, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The DOM after parsing and layout: two pictures, the samples' entity marks, the least confident table.
    assert dom.stdout.count("<svg") == 2 and "<mark" in dom.stdout and "Least confident" in dom.stdout
    shot = tmp_path / "report.png"
    done = subprocess.run([browser, *flags, f"--screenshot={shot}", page], capture_output=True, timeout=120)
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
