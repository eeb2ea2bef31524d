"""configs/ validate, and `spacy train` runs on a tiny corpus."""

import io
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
from spacy.cli.train import train
from spacy.util import load_config, registry
from thinc.api import Adam, fix_random_seed

from spacy_flat.cli.convert import ConversionReport, convert, read_conll

from ..util import ROOT, SHARED, TINY, needs_shared, small_config, small_lexicon, tiny_examples

CONFIGS = sorted((ROOT / "configs").glob("*.cfg"))
# MSRA's dev split: the last sentences of its training file, as many as project.yml cuts off.
MSRA_DEV_SENTENCES = int(srsly.read_yaml(ROOT / "project.yml")["vars"]["msra_dev_sentences"])


def test_configs_exist_and_validate():
    assert CONFIGS
    for path in CONFIGS:
        config = load_config(path)
        nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
        assert "flat_ner" in nlp.pipe_names


# Each dataset config, the shared training file its schedule is counted on, and its epochs.
SCHEDULED = {
    "resume.cfg": ("resume/train.char.bmes", 0, 30),
    "resume_trf.cfg": ("resume/train.char.bmes", 0, 10),
    "resume_dcsan_trf.cfg": ("resume/train.char.bmes", 0, 10),
    "weibo.cfg": ("weibo/weiboNER_2nd_conll.train", 0, 30),
    "msra.cfg": ("msra/train_dev.char.bmes", MSRA_DEV_SENTENCES, 10),
    "msra_news.cfg": ("msra/train_dev.char.bmes", MSRA_DEV_SENTENCES, 10),
    "resume_pretrained.cfg": ("resume/train.char.bmes", 0, 30),
    "weibo_pretrained.cfg": ("weibo/weiboNER_2nd_conll.train", 0, 30),
    "msra_pretrained.cfg": ("msra/train_dev.char.bmes", MSRA_DEV_SENTENCES, 10),
    "resume_tener.cfg": ("resume/train.char.bmes", 0, 30),
    "weibo_tener.cfg": ("weibo/weiboNER_2nd_conll.train", 0, 30),
    "msra_tener.cfg": ("msra/train_dev.char.bmes", MSRA_DEV_SENTENCES, 10),
    "resume_dcsan.cfg": ("resume/train.char.bmes", 0, 30),
    "weibo_dcsan.cfg": ("weibo/weiboNER_2nd_conll.train", 0, 30),
    "msra_dcsan.cfg": ("msra/train_dev.char.bmes", MSRA_DEV_SENTENCES, 10),
    "resume_lattice_lstm.cfg": ("resume/train.char.bmes", 0, 30),
    "weibo_lattice_lstm.cfg": ("weibo/weiboNER_2nd_conll.train", 0, 30),
    "msra_lattice_lstm.cfg": ("msra/train_dev.char.bmes", MSRA_DEV_SENTENCES, 10),
}


@needs_shared
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("msra") else n for n in sorted(SCHEDULED)]
)
def test_config_schedule_is_counted_in_epochs_of_its_corpus(name: str):
    """warm-up is one epoch and the decay ends at the last epoch, counted in the
    config's own batches of the real corpus: a schedule that ends early trains
    its last epochs at a zero learning rate. The run stops at that last step and
    evaluates it (an interval that divides the run's steps)."""
    path, dev_tail, epochs = SCHEDULED[name]
    config = load_config(ROOT / "configs" / name)
    training = registry.resolve({"batcher": config["training"]["batcher"]})
    sentences = list(read_conll(SHARED / "data" / path, report=ConversionReport(path)))
    train_chars = [s.chars for s in sentences[: len(sentences) - dev_tail]]
    per_epoch = sum(1 for _ in training["batcher"](train_chars))
    schedule = config["training"]["optimizer"]["learn_rate"]
    assert schedule["warmup_steps"] == pytest.approx(per_epoch, rel=0.05)
    assert schedule["total_steps"] == pytest.approx(epochs * per_epoch, rel=0.05)
    assert config["training"]["eval_frequency"] <= per_epoch * 1.05
    assert (config["training"]["max_epochs"], config["training"]["max_steps"]) == (0, schedule["total_steps"])
    assert schedule["total_steps"] % config["training"]["eval_frequency"] == 0


def _tiny_training(tmp_path: Path) -> dict:
    """Overrides for a 3-step `spacy train` of a small model on the tiny corpus."""
    corpus = tmp_path / "tiny.spacy"
    convert(TINY, corpus, log=io.StringIO())
    (tmp_path / "words.txt").write_text("北京大学\n上海\n华为公司\n", encoding="utf8")
    return {
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


def test_spacy_train_runs_and_saves_a_loadable_pipeline(tmp_path: Path):
    train(ROOT / "configs" / "resume.cfg", tmp_path / "out", overrides=_tiny_training(tmp_path))
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["flat_ner"]
    assert len(nlp.get_pipe("flat_ner").lexicon) == 3
    nlp("张伟毕业于北京大学。")


def test_spacy_train_continues_a_trained_pipeline_from_source(tmp_path: Path):
    """`[components.flat_ner] source = ...` trains a saved model further: its
    lexicon, characters and weights are kept (the config's [initialize] lexicon,
    jieba's, is not loaded) and the weights move on."""
    overrides = _tiny_training(tmp_path)
    train(ROOT / "configs" / "resume.cfg", tmp_path / "first", overrides=overrides)
    config = load_config(ROOT / "configs" / "resume.cfg")
    config["components"]["flat_ner"] = {"source": str(tmp_path / "first" / "model-last")}
    config.to_disk(tmp_path / "continue.cfg")
    plain = {k: v for k, v in overrides.items() if k.startswith(("paths", "training"))}
    train(tmp_path / "continue.cfg", tmp_path / "second", overrides=plain)
    first, second = (spacy.load(tmp_path / run / "model-last").get_pipe("flat_ner") for run in ("first", "second"))
    assert second.lexicon is not None and list(second.lexicon) == ["北京大学", "上海", "华为公司"]
    assert second.labels == first.labels
    before = dict(first.model.get_ref("tagger").shims[0]._model.named_parameters())
    after = dict(second.model.get_ref("tagger").shims[0]._model.named_parameters())
    assert before.keys() == after.keys()
    assert any(not numpy.array_equal(before[k].detach().numpy(), after[k].detach().numpy()) for k in before)


def test_parameter_averages_are_used_for_evaluation_and_saving(tmp_path: Path):
    """spaCy evaluates and saves inside `nlp.use_params(optimizer.averages)`:
    the torch weights must be the averages there, and the trained ones after."""
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    optimizer = Adam(0.01, use_averages=True)
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    shim = ner.model.get_ref("tagger").shims[0]
    name, param = next((n, p) for n, p in shim._model.named_parameters() if p.dim() == 2)
    average = optimizer.averages[(shim.id, name)]
    trained = param.detach().numpy().copy()
    assert not numpy.allclose(trained, average)
    with nlp.use_params(optimizer.averages):
        numpy.testing.assert_allclose(param.detach().numpy(), average, rtol=1e-6)
        nlp.to_disk(tmp_path / "averaged")
    numpy.testing.assert_array_equal(param.detach().numpy(), trained)
    loaded = spacy.load(tmp_path / "averaged").get_pipe("flat_ner").model.get_ref("tagger").shims[0]
    saved = dict(loaded._model.named_parameters())[name].detach().numpy()
    numpy.testing.assert_allclose(saved, average, rtol=1e-6)


def test_spacy_train_selects_on_the_pooled_dev_sets_mean(tmp_path: Path):
    """configs/general.cfg's readers and scorer in a 3-step `spacy train` of a small model: two corpora
    pooled for training and for dev, each dev doc scored under its corpus, the mean selecting."""
    overrides = _tiny_training(tmp_path)
    corpus = overrides.pop("paths.train")
    del overrides["paths.dev"]
    names = ("msra", "weibo", "resume", "uner")
    overrides |= {f"paths.{name}_{split}": corpus for name in names for split in ("train", "dev")}
    overrides |= {
        "components.flat_ner.model.bigram_vectors": False,
        "initialize.components.flat_ner.bigram_vectors": None,
        "initialize.components.flat_ner.char_vectors.normalize": False,
    }
    train(ROOT / "configs" / "general.cfg", tmp_path / "out", overrides=overrides)
    meta = srsly.read_json(tmp_path / "out" / "model-last" / "meta.json")
    per_corpus = meta["performance"]["ents_per_corpus"]
    assert set(per_corpus) == set(names)
    mean = sum(per_corpus[name]["f"] or 0.0 for name in names) / len(names)
    assert meta["performance"]["ents_f_macro"] == pytest.approx(mean)


@needs_shared
@pytest.mark.slow
def test_general_schedule_is_counted_in_epochs_of_its_pool(tmp_path: Path):
    """configs/general.cfg's warm-up (half an epoch) and decay (4 epochs) in batches of the pool its reader
    makes from the four corpora, converted as project.yml's convert-general converts them."""
    from spacy_flat.cli.convert import read_words
    from spacy_flat.training.corpora import pooled_counts

    reads = {
        "msra": list(read_conll(SHARED / "data/msra/train_dev.char.bmes", report=ConversionReport("msra")))[
            :-MSRA_DEV_SENTENCES
        ],
        "weibo": list(read_conll(SHARED / "data/weibo/weiboNER_2nd_conll.train", report=ConversionReport("weibo"))),
        "resume": list(read_conll(SHARED / "data/resume/train.char.bmes", report=ConversionReport("resume"))),
        "uner": list(
            read_words(SHARED / "data/uner-gsdsimp/zh_gsdsimp-ud-train.iob2", report=ConversionReport("uner"))
        ),
    }
    config = load_config(ROOT / "configs" / "general.cfg")
    alpha = config["corpora"]["train"]["alpha"]
    counts = pooled_counts({name: len(s) for name, s in reads.items()}, alpha)
    # Each corpus repeated to its count: the batcher sees lengths only, so the repeats' choice does not matter.
    pool = [
        s.chars for name, s_list in reads.items() for s in (s_list * (counts[name] // len(s_list) + 1))[: counts[name]]
    ]
    training = registry.resolve({"batcher": config["training"]["batcher"]})
    per_epoch = sum(1 for _ in training["batcher"](pool))
    schedule = config["training"]["optimizer"]["learn_rate"]
    assert schedule["warmup_steps"] == pytest.approx(per_epoch / 2, rel=0.05)
    assert schedule["total_steps"] == pytest.approx(4 * per_epoch, rel=0.05)
    assert config["training"]["eval_frequency"] <= per_epoch
    assert (config["training"]["max_epochs"], config["training"]["max_steps"]) == (0, schedule["total_steps"])
    assert schedule["total_steps"] % config["training"]["eval_frequency"] == 0
