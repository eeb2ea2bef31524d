"""Pipelines saved by earlier versions still load and predict the same entities,
and `spacy train` on every config still gives the same losses for the same seed."""

import json

import pytest
import spacy

from spacy_flat.pipeline.flat_ner import BoundaryRulesMissing

from .compat import COMPAT, LOSSES, TINY_BERT, WORD_VECTORS, entities, train_losses

SAVED = sorted(path for path in COMPAT.iterdir() if path.is_dir())


def test_there_are_saved_pipelines():
    assert {path.name for path in SAVED} >= {"plain-0.1.0", "vectors_bigrams-0.1.0"}


@pytest.mark.parametrize("path", SAVED, ids=lambda p: p.name)
def test_saved_pipeline_loads_and_predicts_the_same_entities(path):
    with pytest.warns(BoundaryRulesMissing, match="without entity-boundary rules"):
        nlp = spacy.load(path)
    expected = json.loads((path / "expected_entities.json").read_text(encoding="utf8"))
    assert entities(nlp) == expected


RECORDED = json.loads(LOSSES.read_text(encoding="utf8"))


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n.endswith("_trf.cfg") else n for n in sorted(RECORDED)]
)
def test_spacy_train_gives_the_recorded_losses(name, tmp_path):
    needed = {"resume_trf.cfg": TINY_BERT, "resume_dcsan_trf.cfg": TINY_BERT, "msra_news.cfg": WORD_VECTORS}.get(name)
    if needed is not None and not needed.exists():
        pytest.skip(f"{needed} is absent")
    assert train_losses(name, tmp_path) == pytest.approx(RECORDED[name], rel=1e-4)
