"""The inference shortcuts change no prediction. The same trained
pipeline predicts with every shortcut on, then with each undone (whole batches
up to the attention budget, the last layer's word rows computed, fused position
tables rebuilt per call, projected position rows computed per batch, thinc's own
predict, one CRF bucket per batch): the
entities are identical and their probabilities equal to float precision."""

import pickle

import numpy
from thinc.api import PyTorchShim

import spacy_flat.layers.flat_model as groups_module
from spacy_flat.layers.shim import InPlacePyTorchShim
from spacy_flat.nn.flat.encoder import ResidualLayer
from spacy_flat.nn.flat.position_keys import PositionKeyCache
from spacy_flat.nn.flat.positions import PositionFusion

# The module, not the `torch_tagger` function that `spacy_flat.layers` exports under its name.

TEXTS = [
    "张三在北京大学工作。",
    "李四",
    "王五住在上海，在华为公司任职，毕业于清华大学。" * 3,
    "",
    "赵六",
    "今天天气很好，张三和李四去了北京。" * 12,
    "孙七在南京。",
]


def predictions(nlp):
    docs = list(nlp.pipe(TEXTS, batch_size=8))
    entities = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs]
    scores = [list(doc.spans["flat_ner"].attrs["scores"]) for doc in docs]
    return entities, scores


def test_shortcuts_change_no_prediction(trained_nlp, monkeypatch):
    nlp = pickle.loads(pickle.dumps(trained_nlp))
    nlp.get_pipe("flat_ner").cfg["window_size"] = 64  # the long text takes several windows
    fast_entities, fast_scores = predictions(nlp)
    assert any(fast_entities)
    whole = ResidualLayer.forward
    monkeypatch.setattr(groups_module, "PADDING_SLACK", None)
    monkeypatch.setattr(ResidualLayer, "forward", lambda self, x, *a, n_queries=None: whole(self, x, *a))
    monkeypatch.setattr(PositionFusion, "_tables", lambda self, lo, hi, kinds: (lo, self._build(lo, hi, kinds)))
    monkeypatch.setattr(PositionKeyCache, "keys", lambda self, pos, fusion, w_kr: w_kr(fusion(pos)))
    monkeypatch.setattr(InPlacePyTorchShim, "predict", PyTorchShim.predict)
    slow_entities, slow_scores = predictions(nlp)
    assert fast_entities == slow_entities
    for fast, slow in zip(fast_scores, slow_scores):
        numpy.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-6)
