"""FLAT's layer and initialization as its released code builds them, as settings: no key or
output projection, p_hh and p_tt alone in R, sublayers without a residual path, Xavier-uniform
weight matrices; the defaults unchanged."""

import inspect

import numpy
import pytest
import spacy
import torch

from spacy_flat.nn.encoder import FlatTagger
from spacy_flat.nn.flat_layer import FlatAttention, FlatLayer
from spacy_flat.nn.position import relative_positions
from spacy_flat.pipeline.architectures import (
    build_dcsan_tagger,
    build_flat_tagger,
    build_lattice_lstm_tagger,
    build_tener_tagger,
)
from spacy_flat.settings import FlatSettings

from .conftest import build_family, scores_of
from .test_encoder import random_lattice

RELEASED = {"residual": False, "key_projection": False, "output_projection": False, "position_distances": 2}
TEXT = "张伟毕业于北京大学，现在上海华为公司工作。"


def test_the_settings_belong_to_the_models_that_have_them():
    flat = inspect.signature(build_flat_tagger).parameters
    defaults = {"residual": True, "key_projection": True, "output_projection": True, "position_distances": 4}
    assert {name: flat[name].default for name in RELEASED} == defaults
    for build in (build_tener_tagger, build_dcsan_tagger):
        names = set(inspect.signature(build).parameters)
        assert "residual" in names and not {"key_projection", "output_projection", "position_distances"} & names
    assert not set(RELEASED) & set(inspect.signature(build_lattice_lstm_tagger).parameters)
    with pytest.raises(ValueError, match="position_distances"):
        FlatSettings(position_distances=3)


def _attention_inputs(width: int = 16, n_heads: int = 4):
    heads, tails, mask = random_lattice(3, seed=5)
    pos = relative_positions(heads, tails, mask)
    x = torch.randn(heads.shape[0], heads.shape[1], width)
    attend = mask[:, :, None] & mask[:, None, :]
    return x, pos, attend


def test_attention_without_projections_is_attention_with_identity_ones():
    torch.manual_seed(0)
    plain = FlatAttention(16, 4, key_projection=False, output_projection=False)
    assert {name.split(".")[0] for name, _ in plain.named_parameters()} == {"w_q", "w_v", "w_kr", "u", "v"}
    full = FlatAttention(16, 4)
    with torch.no_grad():
        plain.u.normal_()
        full.load_state_dict(plain.state_dict(), strict=False)  # all but W_k and W_o
        for layer in (full.w_k, full.w_o):
            layer.weight.copy_(torch.eye(16))
            layer.bias.zero_()
    x, pos, attend = _attention_inputs()
    rel = torch.randn(pos.n_triples, 16)
    assert torch.allclose(plain(x, rel, pos, attend), full(x, rel, pos, attend), atol=1e-5)


@pytest.mark.parametrize("n_queries", [None, 4])
def test_a_layer_without_residual_normalizes_each_sublayers_own_output(n_queries):
    torch.manual_seed(0)
    settings = FlatSettings(width=16, n_heads=4, ffn_width=24, **RELEASED)
    layer = FlatLayer.from_settings(settings).eval()
    with_residual = FlatLayer.from_settings(FlatSettings(width=16, n_heads=4, ffn_width=24)).eval()
    with_residual.load_state_dict(layer.state_dict(), strict=False)
    x, pos, attend = _attention_inputs()
    rel = torch.randn(pos.n_triples, 16)
    got = layer(x, rel, pos, attend, n_queries=n_queries)
    attended = layer.attention(x, rel, pos, attend, n_queries=n_queries)
    assert torch.allclose(got, layer.norm2(layer.ffn(layer.norm1(attended))), atol=1e-6)
    # Doubling a sublayer's output (the released add & norm) changes nothing after the norm but
    # the weight of its epsilon.
    assert torch.allclose(got, layer.norm2(2 * layer.ffn(layer.norm1(2 * attended))), atol=2e-4)
    if n_queries is not None:
        assert torch.allclose(got, layer(x, rel, pos, attend)[:, :n_queries], atol=1e-6)
    # A layer with the residual path (and W_k, W_o) sharing the other weights gives other outputs.
    assert not torch.allclose(got, with_residual(x, rel, pos, attend, n_queries=n_queries), atol=1e-3)


def test_the_released_layer_trains_saves_and_predicts_alike_on_every_path(tmp_path):
    nlp = build_family("flat", steps=10, **RELEASED)
    model = nlp.get_pipe("flat_ner").model
    tagger = next(shim for node in model.walk() for shim in node.shims)._model
    assert tagger.position.w_r.in_features == 2 * tagger.width and not tagger.layers[0].residual
    scores = scores_of(nlp, TEXT)
    default = scores_of(build_family("flat", steps=10), TEXT)
    assert numpy.isfinite(scores).all() and not numpy.array_equal(scores, default)
    nlp.to_disk(tmp_path / "released")
    loaded = spacy.load(tmp_path / "released")
    numpy.testing.assert_array_equal(scores_of(loaded, TEXT), scores)
    # Predicted in int8 (opt-in) the scores stay close.
    int8 = spacy.load(tmp_path / "released", config={"components": {"flat_ner": {"model": {"int8_inference": True}}}})
    assert float(numpy.abs(scores_of(int8, TEXT) - scores).max()) < 0.05 * float(numpy.abs(scores).max())
    assert [e.text for e in nlp(TEXT).ents] == [e.text for e in loaded(TEXT).ents]


def _configured(**settings) -> FlatTagger:
    torch.manual_seed(0)
    model = FlatTagger(FlatSettings(width=64, n_heads=4, ffn_width=96, char_width=8, word_width=8, **settings))
    model.configure(n_chars=30, vector_width=0, n_tags=3, transitions=[(0, 0)], starts=[0], ends=[0])
    return model


def test_xavier_init_redraws_the_matrices_but_embeddings_positions_and_crf():
    plain, xavier = _configured(), _configured(xavier_init=True)
    redrawn = set()
    for (name, before), (_, after) in zip(plain.named_parameters(), xavier.named_parameters()):
        if not torch.equal(before, after):
            redrawn.add(name)
    attention_names = ["w_q.weight", "w_k.weight", "w_v.weight", "w_kr.weight", "u", "v", "w_o.weight"]
    layer = [f"attention.{name}" for name in attention_names] + ["ffn.0.weight", "ffn.3.weight"]
    expected = {"char_proj.weight", "word_proj.weight", "output.weight", *(f"layers.0.{n}" for n in layer)}
    assert redrawn == expected
    attention = xavier.layers[0].attention
    assert attention.u.abs().max() > 0 and plain.layers[0].attention.u.abs().max() == 0
    # Xavier's bound for a square 64 x 64 layer is sqrt(6 / 128); PyTorch's default 1 / sqrt(64).
    assert 0.8 * (6 / 128) ** 0.5 < attention.w_q.weight.abs().max() <= (6 / 128) ** 0.5
    assert plain.layers[0].attention.w_q.weight.abs().max() <= 1 / 8


def test_a_loaded_model_keeps_its_weights_whatever_its_init(tmp_path):
    nlp = build_family("flat", steps=10, xavier_init=True)
    nlp.to_disk(tmp_path / "xavier")
    numpy.testing.assert_array_equal(scores_of(spacy.load(tmp_path / "xavier"), TEXT), scores_of(nlp, TEXT))
