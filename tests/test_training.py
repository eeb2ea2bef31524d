"""configs/ validate, and `spacy train` runs on a tiny corpus."""

import io
from pathlib import Path

import spacy
from spacy.cli.train import train
from spacy.util import load_config

from spacy_flat.convert import convert

from .conftest import ROOT, TINY

CONFIGS = sorted((ROOT / "configs").glob("*.cfg"))


def test_configs_exist_and_validate():
    assert CONFIGS
    for path in CONFIGS:
        config = load_config(path)
        nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
        assert "flat_ner" in nlp.pipe_names


def test_spacy_train_runs_and_saves_a_loadable_pipeline(tmp_path: Path):
    corpus = tmp_path / "tiny.spacy"
    convert(TINY, corpus, log=io.StringIO())
    overrides = {
        "paths.train": str(corpus),
        "paths.dev": str(corpus),
        "training.max_steps": 3,
        "training.max_epochs": 0,
        "training.eval_frequency": 2,
        "components.flat_ner.model.width": 32,
        "components.flat_ner.model.n_heads": 4,
        "components.flat_ner.model.ffn_width": 64,
        "initialize.components.flat_ner.lexicon": {
            "@misc": "spacy-flat.word_list_lexicon.v1",
            "path": str(tmp_path / "words.txt"),
        },
    }
    (tmp_path / "words.txt").write_text("北京大学\n上海\n华为公司\n", encoding="utf8")
    train(ROOT / "configs" / "resume.cfg", tmp_path / "out", overrides=overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["flat_ner"]
    assert len(nlp.get_pipe("flat_ner").lexicon) == 3
    nlp("张伟毕业于北京大学。")
