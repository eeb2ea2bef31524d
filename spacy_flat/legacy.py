"""The architectures' v1 names, as earlier releases registered them: the one place
where configs saved by spacy-flat 0.2 (and pipelines saved between 0.2.0 and 0.3.0)
are accepted, and the only place that names the settings 0.3.0 removed.

Each v1 builds what its v2 builds (`pipeline/architectures.py`). A v1 config may name:
- a setting 0.3.0 removed: at the value that gave the behaviour 0.3.0 keeps, it loads with
  a `DeprecationWarning`; at another value it is refused, with the last commit that had
  it and the benchmark records that measured it;
- a setting that moved (`mixed_precision_dtype` to v2, `int8_inference` to the component):
  it is honoured, with a `DeprecationWarning` that says where it lives now.
"""

import inspect
import typing
import warnings
from typing import Any, Callable, Dict, Optional, Tuple

from spacy.util import registry
from thinc.api import Model, PyTorchGradScaler

from .errors import FlatError
from .layers.tagger_handle import TorchTagger
from .pipeline.architectures import (
    build_dcsan_tagger_v2,
    build_dcsan_transformer_tagger_v2,
    build_flat_tagger_v2,
    build_flat_transformer_tagger_v2,
    build_lattice_lstm_tagger_v2,
    build_tener_tagger_v2,
)

# The last commit whose code had the removed settings: check it out to run them.
LAST_COMMIT = "0e69da2"
# Removed settings: the value that gives the behaviour kept, and the records (benchmarks/archive/) that measured them.
REMOVED: Dict[str, Tuple[Any, str]] = {
    "position_distances": (4, "accuracy-resume-flat-defaults-10ep-s012-two-distances"),
    "key_projection": (True, "accuracy-resume-flat-defaults-10ep-s012-no-projections"),
    "output_projection": (True, "accuracy-resume-flat-defaults-10ep-s012-no-projections"),
    "residual": (True, "accuracy-resume-flat-defaults-10ep-s012-no-residual"),
    "xavier_init": (False, "accuracy-resume-flat-defaults-10ep-s012-xavier"),
    "coupled_forget": (False, "accuracy-resume-lattice-lstm-defaults-30ep-s012-coupled-forget-true"),
    # Between 0.2.0 and 0.3.0 the new architectures took grad_scaler_config but refused to enable it.
    "grad_scaler_config": (None, "none: it could not be enabled"),
}
# Settings that moved, and where to.
MOVED = {
    "mixed_precision_dtype": "the v2 architectures' mixed_precision_dtype",
    "int8_inference": "the flat_ner component's int8_inference setting",
}
# What each v1 took beside its v2's arguments (all of them at 0.2.0's defaults).
FLAT_V1 = ("position_distances", "key_projection", "output_projection", "residual", "xavier_init")
ATTENTION_V1 = ("residual", "xavier_init", "grad_scaler_config")
MOVED_V1 = ("mixed_precision_dtype", "int8_inference")


def _check_removed(name: str, given: Dict[str, Any]) -> None:
    """Warn about removed settings at the kept behaviour's value; refuse any other."""
    for setting, value in given.items():
        kept, records = REMOVED[setting]
        if value == kept or (setting == "grad_scaler_config" and not (value or {}).get("enabled", False)):
            warnings.warn(
                f"{name}: '{setting}' was removed in spacy-flat 0.3.0 and is ignored at {value!r}, the value of "
                "the behaviour kept; leave it out of the config",
                DeprecationWarning,
                stacklevel=4,
            )
            continue
        raise FlatError(
            f"{name}: '{setting} = {value!r}' was removed in spacy-flat 0.3.0 (measured level or worse on dev; "
            f"records: {records}, in benchmarks/archive/, see benchmarks/archive/DECISIONS.md). The last commit "
            f"with it is {LAST_COMMIT}: `git checkout {LAST_COMMIT}` runs it"
        )


def _legacy(
    name: str,
    build: Callable[..., Model],
    accepts: Tuple[str, ...],
    *,
    dtype_moved: bool,
    grad_scaler: bool = False,
) -> Callable[..., Model]:
    """Register `name` as `build` (its v2) with the further settings `accepts` (None: not given).

    dtype_moved (bool): The name was released before v2's `mixed_precision_dtype`.
    grad_scaler (bool): The name takes 0.2.0's `grad_scaler_config` (thinc's `PyTorchGradScaler`).
    """
    base = list(inspect.signature(build).parameters.values())
    moved = MOVED_V1 if dtype_moved else ("int8_inference",)
    if dtype_moved:
        base = [p for p in base if p.name != "mixed_precision_dtype"]
    extra = [*(("grad_scaler_config",) if grad_scaler else ()), *accepts, *moved]
    params = base + [
        inspect.Parameter(setting, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Optional[Any])
        for setting in extra
    ]

    def build_v1(*args: Any, **kwargs: Any) -> Model:
        named = {setting: kwargs.pop(setting, None) for setting in extra}
        given = {setting: value for setting, value in named.items() if value is not None}
        for setting in moved:
            if setting in given:
                warnings.warn(
                    f"{name}: '{setting}' moved to {MOVED[setting]} in spacy-flat 0.3.0; it is honoured "
                    "here, and the model's config should leave it out",
                    DeprecationWarning,
                    stacklevel=3,
                )
        dtype, int8 = given.pop("mixed_precision_dtype", None), given.pop("int8_inference", False)
        scaler = given.pop("grad_scaler_config", None) if grad_scaler else None
        _check_removed(name, given)
        model = build(*args, **kwargs, **({"mixed_precision_dtype": dtype} if dtype is not None else {}))
        tagger = TorchTagger(model)
        if scaler:
            tagger.grad_scaler = PyTorchGradScaler(**scaler)
        if int8:
            tagger.int8_inference = True
        return model

    build_v1.__signature__ = inspect.Signature(params, return_annotation=Model)  # type: ignore[attr-defined]
    # confection reads the annotations for validation: the settings beside v2's take any value.
    build_v1.__annotations__ = {**typing.get_type_hints(build), **{setting: Optional[Any] for setting in extra}}
    build_v1.__doc__ = f"`{name}`: as its v2, for configs saved by earlier releases (see `spacy_flat.legacy`)."
    build_v1.__name__ = build_v1.__qualname__ = build.__name__.replace("_v2", "_v1")
    registry.architectures.register(name, func=build_v1)
    return build_v1


build_flat_tagger_v1 = _legacy(
    "spacy-flat.FlatTagger.v1", build_flat_tagger_v2, FLAT_V1, dtype_moved=True, grad_scaler=True
)
build_flat_transformer_tagger_v1 = _legacy(
    "spacy-flat.FlatTransformerTagger.v1", build_flat_transformer_tagger_v2, FLAT_V1, dtype_moved=True, grad_scaler=True
)
build_tener_tagger_v1 = _legacy("spacy-flat.TenerTagger.v1", build_tener_tagger_v2, ATTENTION_V1, dtype_moved=False)
build_dcsan_tagger_v1 = _legacy("spacy-flat.DcsanTagger.v1", build_dcsan_tagger_v2, ATTENTION_V1, dtype_moved=False)
build_dcsan_transformer_tagger_v1 = _legacy(
    "spacy-flat.DcsanTransformerTagger.v1", build_dcsan_transformer_tagger_v2, ATTENTION_V1, dtype_moved=False
)
build_lattice_lstm_tagger_v1 = _legacy(
    "spacy-flat.LatticeLstmTagger.v1",
    build_lattice_lstm_tagger_v2,
    ("coupled_forget", "grad_scaler_config"),
    dtype_moved=False,
)
