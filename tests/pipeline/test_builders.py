"""The registered architectures: each v2 builder's own explicit arguments, filled and validated
by the config system; the v1 names of earlier releases (`spacy_flat/legacy.py`), which build
v2's model, warn about the settings removed or moved and refuse the removed behaviours; and the
weights of earlier releases renamed on load (`nn/legacy_weights.py`)."""

import inspect
import io
import warnings
from typing import Any, Dict

import numpy
import pytest
import spacy
import torch
from spacy.util import fix_random_seed

from spacy_flat.errors import FlatError
from spacy_flat.layers.torch_tagger import _deserialize
from spacy_flat.nn.legacy_weights import upgrade_state_dict
from spacy_flat.pipeline.architectures import (
    build_dcsan_tagger_v2,
    build_dcsan_transformer_tagger_v2,
    build_flat_tagger_v2,
    build_flat_transformer_tagger_v2,
    build_lattice_lstm_tagger_v2,
    build_tener_tagger_v2,
)

from ..util import FAMILY, small_config, small_lexicon, tiny_examples

V2_BUILDERS = {
    "spacy-flat.FlatTagger.v2": build_flat_tagger_v2,
    "spacy-flat.FlatTransformerTagger.v2": build_flat_transformer_tagger_v2,
    "spacy-flat.TenerTagger.v2": build_tener_tagger_v2,
    "spacy-flat.DcsanTagger.v2": build_dcsan_tagger_v2,
    "spacy-flat.DcsanTransformerTagger.v2": build_dcsan_transformer_tagger_v2,
    "spacy-flat.LatticeLstmTagger.v2": build_lattice_lstm_tagger_v2,
}
# The settings 0.3.0 removed, and those it moved (to v2's mixed_precision_dtype, to the component).
REMOVED = ("xavier_init", "residual", "key_projection", "output_projection", "position_distances", "coupled_forget")
MOVED = ("int8_inference", "grad_scaler_config")
# Each family member's removed settings at the value of the behaviour kept, and at another value.
KEPT: Dict[str, Dict[str, Any]] = {
    "flat": {
        "position_distances": 4,
        "key_projection": True,
        "output_projection": True,
        "residual": True,
        "xavier_init": False,
    },
    "tener": {"residual": True, "xavier_init": False, "grad_scaler_config": {"enabled": False}},
    "dcsan": {"residual": True, "xavier_init": False},
    "lattice_lstm": {"coupled_forget": False},
}
REFUSED = [
    ("flat", "xavier_init", True),
    ("flat", "residual", False),
    ("flat", "position_distances", 2),
    ("flat", "key_projection", False),
    ("flat", "output_projection", False),
    ("tener", "residual", False),
    ("tener", "grad_scaler_config", {"enabled": True}),
    ("dcsan", "xavier_init", True),
    ("lattice_lstm", "coupled_forget", True),
]


# An argument of another architecture, which each refuses.
NOT_TAKEN = {"flat": "learn_rate_scale", "tener": "word_rows", "dcsan": "mask_self_matched", "lattice_lstm": "n_heads"}


def v1(architecture: str, **settings: Any) -> Dict[str, Any]:
    """The family's small model (FAMILY) under its v1 name."""
    model = {**FAMILY[architecture], **settings}
    model["@architectures"] = model["@architectures"].replace(".v2", ".v1")
    return model


def initialized(model: Dict[str, Any], seed: int = 0) -> spacy.Language:
    fix_random_seed(seed)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={"model": model})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    return nlp


def weights(nlp: spacy.Language) -> Dict[str, torch.Tensor]:
    return nlp.get_pipe("flat_ner").tagger.module.state_dict()


def test_each_v2_signature_is_its_own_explicit_arguments():
    """Named arguments only, none of the removed or moved settings, each architecture's own."""
    for name, build in V2_BUILDERS.items():
        params = inspect.signature(build).parameters
        kinds = {p.kind for p in params.values()}
        assert not kinds & {inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL}, name
        assert not set(params) & {*REMOVED, *MOVED}, name
        assert all(p.annotation is not inspect.Parameter.empty for p in params.values()), name
    flat = inspect.signature(build_flat_tagger_v2).parameters
    assert flat["width"].default == 160 and flat["scaled"].default is True
    transformer = inspect.signature(build_flat_transformer_tagger_v2).parameters
    assert list(transformer)[:3] == ["tok2vec", "width", "n_heads"]
    assert transformer["learn_rate_scale"].default == 5.0
    assert set(transformer) == set(flat) | {"tok2vec", "use_char_embeddings", "learn_rate_scale"}
    tener = inspect.signature(build_tener_tagger_v2).parameters
    assert not {"word_width", "word_rows", "max_words", "mask_self_matched"} & set(tener)
    assert tener["scaled"].default is False
    dcsan = inspect.signature(build_dcsan_tagger_v2).parameters
    assert {"word_width", "word_rows", "max_words"} <= set(dcsan)
    assert not {"mask_self_matched", "max_distance", "head_only"} & set(dcsan)
    lstm = inspect.signature(build_lattice_lstm_tagger_v2).parameters
    assert {"word_rows", "max_words", "bigram_rows"} <= set(lstm)
    assert not {"n_heads", "ffn_width", "n_layers", "dropout", "scaled"} & set(lstm)
    assert (lstm["width"].default, lstm["word_width"].default, lstm["output_dropout"].default) == (200, 50, 0.5)


def test_each_v1_signature_is_its_v2s_and_the_settings_it_took_beside():
    """A v1 takes its v2's arguments and, defaulting to None (not given), the settings removed or moved."""
    for name, build in V2_BUILDERS.items():
        old = name.replace(".v2", ".v1")
        v1_params = inspect.signature(spacy.registry.architectures.get(old)).parameters
        assert set(inspect.signature(build).parameters) <= set(v1_params), old
        extra = set(v1_params) - set(inspect.signature(build).parameters)
        assert "int8_inference" in extra and extra <= {*REMOVED, *MOVED, "mixed_precision_dtype"}, old
        assert all(v1_params[setting].default is None for setting in extra), old
    lstm = inspect.signature(spacy.registry.architectures.get("spacy-flat.LatticeLstmTagger.v1")).parameters
    assert "coupled_forget" in lstm and "residual" not in lstm


def test_defaults_of_the_signatures_apply_when_called_from_python():
    from spacy_transformers.architectures import transformer_listener_tok2vec_v1

    listener = transformer_listener_tok2vec_v1(pooling=spacy.registry.layers.get("reduce_mean.v1")(), grad_factor=1.0)
    assert build_flat_transformer_tagger_v2(listener).get_ref("tagger").shims[0].lr_scale == 5.0
    assert build_flat_tagger_v2().get_ref("tagger").shims[0].lr_scale == 1.0
    module = build_flat_tagger_v2(width=32, n_heads=4).get_ref("tagger").shims[0]._model
    assert module.encoder.width == 32 and module.embeddings.word_width == 64


@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_the_config_system_fills_and_validates_v2(architecture: str):
    """Defaults filled in; a misspelt argument, one the architecture does not take, a wrong type, a
    width the heads do not divide and an unknown autocast type are refused."""
    model = FAMILY[architecture]
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner", config={"model": model})
    filled = nlp.config["components"]["flat_ner"]["model"]
    assert filled["width"] == 32 and filled["char_width"] == 128 and filled["mixed_precision_dtype"] == "float16"
    other = NOT_TAKEN[architecture]
    wrong = [
        ({"widht": 32}, "unexpected argument: 'widht'"),
        ({other: 1}, f"unexpected argument: '{other}'"),
        ({"width": "wide"}, "'wide' is not"),
    ]
    for setting, message in wrong:
        with pytest.raises(ValueError, match=message):
            spacy.blank("zh").add_pipe("flat_ner", config={"model": {**model, **setting}})
    if architecture != "lattice_lstm":
        with pytest.raises(ValueError, match="divisible"):
            spacy.blank("zh").add_pipe("flat_ner", config={"model": {**model, "width": 30}})
    with pytest.raises(ValueError, match="mixed_precision_dtype must be one of"):
        spacy.blank("zh").add_pipe("flat_ner", config={"model": {**model, "mixed_precision_dtype": "float8"}})


def test_the_forward_pass_autocasts_to_the_chosen_type():
    """`mixed_precision_dtype` reaches the autocast thinc opens around the forward pass (CUDA's;
    on this CPU it is off), and the default type is restored after it."""
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


@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_a_v1_config_at_the_kept_values_warns_and_builds_v2s_model(architecture: str):
    """Each removed setting at the value of the behaviour kept: a DeprecationWarning naming it, and
    the model v2 builds: the same parameter names and shapes and, from the same seed, the same weights."""
    kept = KEPT[architecture]
    with pytest.warns(DeprecationWarning) as record:
        old = initialized(v1(architecture, **kept))
    assert {setting for setting in kept if any(f"'{setting}' was removed" in str(w.message) for w in record)} == set(
        kept
    )
    new = initialized(FAMILY[architecture])
    old_weights, new_weights = weights(old), weights(new)
    assert list(old_weights) == list(new_weights)
    for name, value in new_weights.items():
        assert old_weights[name].shape == value.shape, name
        assert torch.equal(old_weights[name], value), name


@pytest.mark.parametrize("architecture,setting,value", REFUSED)
def test_a_v1_config_at_another_value_is_refused_with_the_last_commit_that_had_it(architecture, setting, value):
    with pytest.raises(FlatError, match=rf"'{setting} = .*' was removed in spacy-flat 0\.3\.0") as error:
        spacy.blank("zh").add_pipe("flat_ner", config={"model": v1(architecture, **{setting: value})})
    assert "0e69da2" in str(error.value) and "benchmarks/" in str(error.value)


def test_a_v2_config_naming_a_removed_setting_is_refused():
    for architecture, setting, value in REFUSED:
        with pytest.raises(ValueError, match=f"unexpected argument: '{setting}'"):
            spacy.blank("zh").add_pipe("flat_ner", config={"model": {**FAMILY[architecture], setting: value}})


@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_a_v1_int8_inference_sets_the_components_int8_path(architecture: str):
    """`int8_inference = true` on a v1 architecture: a DeprecationWarning that it moved, and
    prediction on the CPU runs the int8 copy, as the component's own setting makes it."""
    with pytest.warns(DeprecationWarning, match="'int8_inference' moved to the flat_ner component"):
        nlp = initialized(v1(architecture, int8_inference=True))
    ner = nlp.get_pipe("flat_ner")
    assert ner.tagger.int8_inference
    shim = ner.model.get_ref("tagger").shims[0]
    assert shim._int8 is None
    nlp("张伟毕业于北京大学。")
    assert shim._int8 is not None
    assert not initialized(v1(architecture)).get_pipe("flat_ner").tagger.int8_inference


def test_a_v1_mixed_precision_dtype_is_honoured():
    """FlatTagger.v1 took no mixed_precision_dtype at 0.2.0: given, it warns that it moved to v2 and is
    honoured; the later v1 names took it, and take it without a warning."""
    with pytest.warns(DeprecationWarning, match="'mixed_precision_dtype' moved to the v2 architectures'"):
        nlp = initialized(v1("flat", mixed_precision_dtype="bfloat16"))
    assert nlp.get_pipe("flat_ner").model.get_ref("tagger").shims[0].autocast_dtype == torch.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp = initialized(v1("tener", mixed_precision_dtype="bfloat16"))
    assert nlp.get_pipe("flat_ner").model.get_ref("tagger").shims[0].autocast_dtype == torch.bfloat16


def test_a_0_2_0_config_builds_with_no_warning():
    """FlatTagger.v1 as spacy-flat 0.2.0 saved it (none of the names 0.3.0 removed or moved): no
    warning at all, and v2's model with the same seed."""
    model = {
        "@architectures": "spacy-flat.FlatTagger.v1",
        **{"width": 32, "n_heads": 4, "ffn_width": 64, "n_layers": 1, "char_width": 128},
        **{"word_width": 16, "word_rows": 500, "bigram_width": 0, "bigram_rows": 0, "bigram_vectors": False},
        **{"max_words": -1, "embed_dropout": 0.0, "dropout": 0.0, "attention_dropout": 0.0, "output_dropout": 0.0},
        **{"scaled": True, "mask_self_matched": False, "max_distance": -1, "head_only": False},
        **{"mixed_precision": False, "grad_scaler_config": None},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = initialized(model)
        for architecture in sorted(FAMILY):
            initialized(v1(architecture))  # the later v1 names without the removed settings
    new_weights = weights(initialized(FAMILY["flat"]))
    old_weights = weights(old)
    assert list(old_weights) == list(new_weights)
    assert all(torch.equal(old_weights[name], value) for name, value in new_weights.items())


# Some of the tagger's weights as releases up to 0.2 saved them: every part at the top level.
OLD_FLAT = [
    "char_embed.weight",
    "word_embed.table.weight",
    "char_proj.weight",
    "char_proj.bias",
    "word_proj.weight",
    "word_proj.bias",
    "position.w_r.weight",
    "position.w_r.bias",
    "layers.0.attention.u",
    "layers.0.attention.w_q.weight",
    "layers.0.attention.w_kr.weight",
    "layers.0.attention.w_o.weight",
    "layers.0.norm1.weight",
    "layers.0.ffn.0.weight",
    "output.weight",
    "output.bias",
    "crf.raw_start_transitions",
    "crf.raw_transitions",
]


def configured_module(architecture: str):  # type: ignore[no-untyped-def]
    return initialized(FAMILY[architecture]).get_pipe("flat_ner").tagger.module


def old_names(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """`state` as earlier releases named it."""
    return {key.removeprefix("embeddings.").removeprefix("encoder."): value for key, value in state.items()}


def test_an_old_flat_state_dict_is_renamed_to_the_new_parts():
    module = configured_module("flat")
    state = module.state_dict()
    old = old_names(state)
    assert set(OLD_FLAT) <= set(old)
    upgraded = upgrade_state_dict(old, state.keys())
    assert set(upgraded) == set(state)
    part = {"char_embed": "embeddings.", "word_embed": "embeddings."}
    part.update(dict.fromkeys(("char_proj", "word_proj", "position", "layers"), "encoder."))
    for key in OLD_FLAT:
        assert upgraded[part.get(key.split(".")[0], "") + key] is old[key]
    module.load_state_dict(upgraded)  # strict: every weight in its place
    # A key the module does not know is kept, for load_state_dict to refuse.
    assert "stray.weight" in upgrade_state_dict({**old, "stray.weight": torch.zeros(1)}, state.keys())


@pytest.mark.parametrize(
    "architecture,dropped",
    [
        ("tener", {"word_embed.table.weight", "word_proj.weight", "word_proj.bias"}),
        ("dcsan", {"word_proj.weight", "word_proj.bias"}),
    ],
)
def test_tables_earlier_releases_built_unread_are_dropped(architecture: str, dropped):
    """TENER's word embeddings and projection and DC-SAN's word projection, which the modules no
    longer have; everything else is renamed and loads."""
    module = configured_module(architecture)
    state = module.state_dict()
    old = old_names(state)
    old.setdefault("word_embed.table.weight", torch.zeros(500, 16))
    old.update({"word_proj.weight": torch.zeros(32, 16), "word_proj.bias": torch.zeros(32)})
    upgraded = upgrade_state_dict(old, state.keys())
    assert set(upgraded) == set(state)
    assert set(old) - {key.removeprefix("embeddings.").removeprefix("encoder.") for key in upgraded} == dropped
    module.load_state_dict(upgraded)


def test_the_lattice_lstm_keeps_its_word_projection_and_new_dicts_are_unchanged():
    module = configured_module("lattice_lstm")
    state = module.state_dict()
    upgraded = upgrade_state_dict(old_names(state), state.keys())
    assert set(upgraded) == set(state) and "encoder.word_proj.weight" in upgraded
    assert "encoder.lattice.char_hidden" in upgraded
    for architecture in sorted(FAMILY):
        state = configured_module(architecture).state_dict()
        same = upgrade_state_dict(state, state.keys())
        assert list(same) == list(state) and all(same[key] is state[key] for key in state)


def test_weights_saved_with_the_old_names_load():
    """The saved tagger's bytes read back (the layer's deserializer) into the new module."""
    module = configured_module("flat")
    state = {key: value.clone() for key, value in module.state_dict().items()}
    with torch.no_grad():
        for param in module.parameters():
            param.zero_()
    data = io.BytesIO()
    torch.save(old_names(state), data)
    loaded = _deserialize(module, data.getvalue(), torch.device("cpu"))
    for key, value in loaded.state_dict().items():
        numpy.testing.assert_array_equal(value.numpy(), state[key].numpy(), err_msg=key)
