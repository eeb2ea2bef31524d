"""The state of thinc's `Optimizer` and of the model's update machinery, saved under stable names.

thinc's `Optimizer` has no `state_dict`: its Adam moments (`mom1`, `mom2`), parameter averages,
`nr_update` (Adam's bias correction) and `last_seen` are dicts keyed by `(id, name)`, where `id` is the
number thinc gave a model node or shim when it was built in this process. A resumed process numbers
them again, so the keys are saved as the parameter's place in the pipeline ("flat_ner/3/shim0/encoder.w")
and mapped back to the new ids on load. Its schedules (thinc 8.3: generators, advanced once per step by
`step_schedules`) cannot be saved either: they are replayed, as many steps as the run had taken.
"""

from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

import numpy
from spacy.language import Language
from thinc.api import Model, Optimizer, get_current_ops

from .checkpoints import CheckpointError

Key = Tuple[int, str]
# Optimizer attributes a schedule may drive (thinc's `_set_attr_or_schedule`).
SCHEDULED = ("learn_rate", "grad_clip", "b1", "b2", "eps", "L2")


def parameter_names(nlp: Language) -> Dict[Key, str]:
    """Stable names of every parameter an optimizer may hold state for.

    nlp (Language): The pipeline.
    RETURNS (Dict[Key, str]): `(id, name)` -> "pipe/node/name" or "pipe/node/shimN/name", by the
        order of `model.walk()`, which a pipeline built from the same config repeats.
    """
    names: Dict[Key, str] = {}
    for pipe_name, proc in nlp.pipeline:
        model = getattr(proc, "model", None)
        if not isinstance(model, Model):
            continue
        for i, node in enumerate(model.walk()):
            for param in node.param_names:
                names.setdefault((node.id, param), f"{pipe_name}/{i}/{param}")
            for j, shim in enumerate(node.shims):
                torch_model = getattr(shim, "_model", None)
                for param, _ in getattr(torch_model, "named_parameters", lambda: [])():
                    names.setdefault((shim.id, param), f"{pipe_name}/{i}/shim{j}/{param}")
    return names


def _to_numpy(array: Any) -> numpy.ndarray:
    return numpy.ascontiguousarray(get_current_ops().to_numpy(array))


def optimizer_state(optimizer: Optimizer, names: Dict[Key, str], schedule_steps: int) -> Dict[str, Any]:
    """optimizer (Optimizer): The run's optimizer.
    names (Dict[Key, str]): From `parameter_names`.
    schedule_steps (int): How many times the run has called `step_schedules`.
    RETURNS (Dict[str, Any]): Arrays and numbers keyed by stable names, for msgpack.
    """

    def named(table: Optional[Dict[Key, Any]], convert: Any) -> Optional[Dict[str, Any]]:
        if table is None:
            return None
        unknown = [key for key in table if key not in names]
        if unknown:
            raise CheckpointError(
                f"the optimizer holds state for parameters not in the pipeline: {unknown[:3]}; "
                "a checkpoint could not give it back"
            )
        return {names[key]: convert(value) for key, value in table.items()}

    return {
        "mom1": named(optimizer.mom1, _to_numpy),
        "mom2": named(optimizer.mom2, _to_numpy),
        "averages": named(optimizer.averages, _to_numpy),
        "nr_update": named(optimizer.nr_update, int),
        "last_seen": named(optimizer.last_seen, int),
        "schedule_steps": schedule_steps,
        "scheduled": {attr: getattr(optimizer, attr) for attr in optimizer.schedules},
    }


def restore_optimizer(
    optimizer: Optimizer, state: Dict[str, Any], names: Dict[Key, str], *, replay_check: bool
) -> List[str]:
    """Give a freshly built optimizer the saved state, replaying its schedules.

    optimizer (Optimizer): Built from the run's config, never stepped.
    state (Dict[str, Any]): From `optimizer_state`.
    names (Dict[Key, str]): From `parameter_names` of the pipeline being resumed.
    replay_check (bool): Require the replayed schedules to reach the saved values (False when the
        config's schedule was changed on purpose).
    RETURNS (List[str]): Scheduled values that differ from the saved ones, for the log.
    """
    ops = get_current_ops()
    keys = {name: key for key, name in names.items()}

    def keyed(table: Dict[str, Any]) -> Dict[Key, Any]:
        missing = sorted(set(table) - set(keys))
        if missing:
            raise CheckpointError(
                f"the checkpoint's optimizer has state for parameters this pipeline lacks: {missing[:3]}"
            )
        return {keys[name]: value for name, value in table.items()}

    def writable(array: Any) -> Any:
        # msgpack hands back read-only arrays; thinc updates moments and averages in place
        return ops.asarray_f(array).copy()

    optimizer.mom1 = {k: writable(v) for k, v in keyed(state["mom1"]).items()}
    optimizer.mom2 = {k: writable(v) for k, v in keyed(state["mom2"]).items()}
    if state["averages"] is not None:
        optimizer.averages = {k: writable(v) for k, v in keyed(state["averages"]).items()}
    optimizer.nr_update = defaultdict(int, keyed(state["nr_update"]))
    optimizer.last_seen = defaultdict(int, keyed(state["last_seen"]))
    for _ in range(state["schedule_steps"]):
        optimizer.step_schedules()
    changed = [
        f"{attr}: {value} in the checkpoint, {getattr(optimizer, attr)} now"
        for attr, value in state["scheduled"].items()
        if getattr(optimizer, attr) != value
    ]
    if changed and replay_check:
        raise CheckpointError(
            "the optimizer's schedules, replayed, do not reach the checkpoint's values ("
            + "; ".join(changed)
            + "): a schedule that is not a function of the step count cannot be resumed"
        )
    return changed


def grad_scaler_state(nlp: Language, names: Dict[Key, str]) -> Dict[str, Any]:
    """The loss scale of each torch shim that trains in mixed precision (on CPU it is disabled).

    RETURNS (Dict[str, Any]): "pipe/node/shimN" -> scale and growth tracker.
    """
    state: Dict[str, Any] = {}
    for shim, label in _shims(nlp):
        scaler = getattr(shim, "_grad_scaler", None)
        if scaler is not None and getattr(scaler, "_enabled", False):
            state[label] = {
                "scale": scaler._scale.detach().cpu().numpy(),
                "growth_tracker": scaler._growth_tracker.detach().cpu().numpy(),
            }
    return state


def restore_grad_scalers(nlp: Language, state: Dict[str, Any]) -> None:
    """state (Dict[str, Any]): From `grad_scaler_state`."""
    import torch

    for shim, label in _shims(nlp):
        if label in state:
            scaler = shim._grad_scaler
            device = scaler._scale.device
            scaler._scale = torch.from_numpy(numpy.array(state[label]["scale"])).to(device)
            scaler._growth_tracker = torch.from_numpy(numpy.array(state[label]["growth_tracker"])).to(device)


def row_average_state(nlp: Language, optimizer: Optimizer, names: Dict[Key, str]) -> Dict[str, Any]:
    """Where each table's averages in `optimizer`, kept row by row under SGD (`layers/row_averages.py`),
    are exact.

    RETURNS (Dict[str, Any]): The table's stable name -> each row's update count and the table's.
    """
    state: Dict[str, Any] = {}
    if optimizer.averages is None:
        return state
    for shim, _ in _shims(nlp):
        records = getattr(shim, "row_average_state", None)
        if records is not None:
            for name, record in records(optimizer.averages).items():
                state[names[(shim.id, name)]] = record
    return state


def restore_row_averages(nlp: Language, optimizer: Optimizer, state: Dict[str, Any], names: Dict[Key, str]) -> None:
    """Give the shims back the records of `row_average_state`, over the optimizer's restored averages.

    state (Dict[str, Any]): From `row_average_state` (empty for a checkpoint written before it was kept).
    """
    if not state or optimizer.averages is None:
        return
    for shim, _ in _shims(nlp):
        restore = getattr(shim, "restore_row_averages", None)
        if restore is not None:
            mine = {key[1]: state[name] for key, name in names.items() if key[0] == shim.id and name in state}
            restore(optimizer.averages, mine)


def _shims(nlp: Language) -> List[Tuple[Any, str]]:
    found: List[Tuple[Any, str]] = []
    for pipe_name, proc in nlp.pipeline:
        model = getattr(proc, "model", None)
        if isinstance(model, Model):
            for i, node in enumerate(model.walk()):
                found.extend((shim, f"{pipe_name}/{i}/shim{j}") for j, shim in enumerate(node.shims))
    return found
