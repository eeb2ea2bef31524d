"""FlatSettings (settings.py): every architecture setting written once, and the
builders' signatures made from it."""

import inspect

import pytest
import spacy

from spacy_flat.pipeline.architectures import (
    build_dcsan_tagger,
    build_flat_tagger,
    build_flat_transformer_tagger,
    build_lattice_lstm_tagger,
    build_tener_tagger,
)
from spacy_flat.settings import FlatSettings, settings_signature


def test_builder_signatures_are_the_settings():
    plain = inspect.signature(build_flat_tagger).parameters
    assert list(plain) == [
        name
        for name in FlatSettings.__dataclass_fields__
        if name not in ("use_char_embeddings", "learn_rate_scale", "encoder", "coupled_forget")
    ]
    transformer = inspect.signature(build_flat_transformer_tagger).parameters
    assert list(transformer)[:3] == ["tok2vec", "width", "n_heads"]
    assert transformer["learn_rate_scale"].default == 5.0 and plain["width"].default == 160
    assert "encoder" not in transformer
    tener = inspect.signature(build_tener_tagger).parameters
    assert not {"word_rows", "max_words", "mask_self_matched", "encoder"} & set(tener)
    assert tener["scaled"].default is False and plain["scaled"].default is True
    dcsan = inspect.signature(build_dcsan_tagger).parameters
    assert {"word_rows", "max_words"} <= set(dcsan) and not {"mask_self_matched", "encoder"} & set(dcsan)
    lstm = inspect.signature(build_lattice_lstm_tagger).parameters
    assert {"word_rows", "max_words", "bigram_rows"} <= set(lstm)
    assert not {"n_heads", "ffn_width", "n_layers", "dropout", "scaled", "encoder"} & set(lstm)
    assert lstm["coupled_forget"].default is False
    assert not any(
        "coupled_forget" in inspect.signature(build).parameters
        for build in (build_flat_tagger, build_flat_transformer_tagger, build_tener_tagger, build_dcsan_tagger)
    )
    assert (lstm["width"].default, lstm["word_width"].default, lstm["output_dropout"].default) == (200, 50, 0.5)


def test_defaults_of_the_signature_apply_when_called_from_python():
    from spacy_transformers.architectures import transformer_listener_tok2vec_v1

    listener = transformer_listener_tok2vec_v1(pooling=spacy.registry.layers.get("reduce_mean.v1")(), grad_factor=1.0)
    assert build_flat_transformer_tagger(listener).get_ref("tagger").shims[0].lr_scale == 5.0
    assert build_flat_tagger(width=32, n_heads=4).get_ref("tagger").shims[0]._model.width == 32


def test_a_misspelt_override_and_bad_settings_are_refused():
    with pytest.raises(TypeError, match="learn_rate_scal"):
        settings_signature(learn_rate_scal=5.0)
    with pytest.raises(ValueError, match="divisible"):
        FlatSettings(width=30, n_heads=4)
    with pytest.raises(ValueError, match="encoder must be one of"):
        FlatSettings(encoder="lstm")
    with pytest.raises(ValueError, match="grad_scaler_config"):
        FlatSettings(grad_scaler_config={"enabled": True})
    with pytest.raises(ValueError, match="mixed_precision_dtype must be one of"):
        FlatSettings(mixed_precision_dtype="float8")


def test_the_forward_pass_autocasts_to_the_chosen_type(monkeypatch):
    """`mixed_precision_dtype` reaches the autocast thinc opens around the forward pass (CUDA's;
    on this CPU it is off), and the default type is restored after it."""
    import torch

    from .conftest import small_config, small_lexicon, tiny_examples

    config = small_config()
    config["model"]["mixed_precision_dtype"] = "bfloat16"
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=config)
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    module = next(node for node in ner.model.walk() if node.shims).shims[0]._model
    seen = []
    module.register_forward_pre_hook(lambda *_: seen.append(torch.get_autocast_dtype("cuda")))
    nlp.update(examples[:4], sgd=nlp.create_optimizer())
    assert seen == [torch.bfloat16]
    assert torch.get_autocast_dtype("cuda") == torch.float16


def test_the_config_system_fills_and_validates_them():
    nlp = spacy.blank("zh")
    nlp.add_pipe(
        "flat_ner", config={"model": {"@architectures": "spacy-flat.FlatTagger.v1", "width": 32, "n_heads": 4}}
    )
    model = nlp.config["components"]["flat_ner"]["model"]
    assert model["word_rows"] == 20000 and model["width"] == 32
    with pytest.raises(Exception, match="width"):
        spacy.blank("zh").add_pipe(
            "flat_ner", config={"model": {"@architectures": "spacy-flat.FlatTagger.v1", "width": "wide"}}
        )
