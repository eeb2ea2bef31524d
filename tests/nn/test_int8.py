"""Prediction on a CPU with the linear layers in int8 (the component's `int8_inference`,
nn/quantized.py): opt-in, close to float32, made again after the weights change, never saved."""

import numpy
import pytest
import spacy
import torch

from ..util import build_family, scores_of, tiny_examples

TEXT = "张伟毕业于北京大学，现在上海华为公司工作。"


def _pipeline(architecture: str, int8: bool) -> spacy.Language:
    return build_family(architecture, steps=10, component={"int8_inference": int8})


def _shim(nlp: spacy.Language):  # type: ignore[no-untyped-def]
    return next(shim for node in nlp.get_pipe("flat_ner").model.walk() for shim in node.shims)


@pytest.mark.parametrize("architecture", ["flat", "tener", "dcsan", "lattice_lstm"])
def test_int8_scores_are_close_to_float32(architecture: str):
    exact, int8 = _pipeline(architecture, False), _pipeline(architecture, True)
    want, got = scores_of(exact, TEXT), scores_of(int8, TEXT)
    assert not numpy.array_equal(want, got)  # the int8 copy did run
    spread = float(numpy.abs(want).max())
    assert float(numpy.abs(want - got).max()) < 0.05 * spread
    copy = _shim(int8)._int8[2]
    kinds = {type(m).__module__ for m in copy.modules() if "Linear" in type(m).__name__}
    assert any("quantized" in kind for kind in kinds)
    if architecture == "flat":  # the position module reads its weights, W_kR's rows are kept: float32
        assert isinstance(copy.encoder.position.w_r, torch.nn.Linear)
        assert all(type(layer.attention.w_kr) is torch.nn.Linear for layer in copy.encoder.layers)
        assert type(copy.encoder.layers[0].attention.w_q) is not torch.nn.Linear


def test_the_int8_copy_follows_the_weights_and_is_not_saved(tmp_path):
    nlp = _pipeline("flat", True)
    shim = _shim(nlp)
    before = scores_of(nlp, TEXT)
    made = shim._int8[2]
    scores_of(nlp, TEXT)
    assert shim._int8[2] is made  # unchanged weights: the same copy
    nlp.update(tiny_examples(nlp), sgd=nlp.create_optimizer())
    after = scores_of(nlp, TEXT)
    assert shim._int8[2] is not made and not numpy.array_equal(before, after)
    nlp.to_disk(tmp_path / "int8")
    loaded = spacy.load(tmp_path / "int8")
    assert _shim(loaded).int8_inference and loaded.get_pipe("flat_ner").cfg["int8_inference"]
    numpy.testing.assert_array_equal(scores_of(loaded, TEXT), after)
    # The weights saved are the float32 module's: switched off, the scores are float32's.
    exact = spacy.load(tmp_path / "int8", config={"components": {"flat_ner": {"int8_inference": False}}})
    assert not _shim(exact).int8_inference
    assert not numpy.array_equal(scores_of(exact, TEXT), after)
