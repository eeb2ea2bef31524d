"""The torch tagger as a thinc layer: PyTorchWrapper's forward with the in-place
shim, and the conversions of its inputs, outputs and weights."""

import io
from typing import Any, Callable, Dict, Optional, Tuple, cast

import numpy
import torch
from thinc.api import ArgsKwargs, Model, PyTorchGradScaler, torch2xp
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats2d, Floats3d

from ..lattice.features import FlatBatch
from ..nn.flat.position_plan import plan_positions
from ..nn.legacy_weights import upgrade_state_dict
from ..nn.tagger import LatticeTagger
from ..nn.transfer import to_device
from .arrays import xp_to_torch
from .shim import InPlacePyTorchShim


def torch_tagger(
    module: LatticeTagger,
    *,
    mixed_precision: bool = False,
    autocast_dtype: torch.dtype = torch.float16,
    grad_scaler_config: Optional[Dict[str, Any]] = None,
    learn_rate_scale: float = 1.0,
) -> Model[FlatBatch, Floats3d]:
    """PyTorchWrapper_v3's layer around a `LatticeTagger`, with the in-place shim (see shim.py).

    mixed_precision (bool), autocast_dtype (torch.dtype): Autocast on a CUDA device, and its type.
    grad_scaler_config (Optional[Dict[str, Any]]): thinc's `PyTorchGradScaler` settings.
    learn_rate_scale (float): The module's learning rate as a multiple of the optimizer's.
    RETURNS (Model[FlatBatch, Floats3d]): Emission scores (batch, chars, tags).
    """
    shim = InPlacePyTorchShim(
        module,
        mixed_precision=mixed_precision,
        autocast_dtype=autocast_dtype,
        grad_scaler=PyTorchGradScaler(**(grad_scaler_config or {})),
        device=None,
        serialize_model=_serialize,
        deserialize_model=_deserialize,
        lr_scale=learn_rate_scale,
    )
    return Model(
        "pytorch",
        pytorch_forward,
        attrs={"convert_inputs": _convert_inputs, "convert_outputs": _convert_outputs},
        shims=[shim],
        dims={"nI": None, "nO": None},
    )


def plans_positions_on_host(device: torch.device) -> bool:
    """Whether a training step plans FLAT's relative positions on the host (`nn/flat/position_plan.py`):
    off the CPU, where indexing them on the device would make the host wait for it at every step.
    Prediction keeps the device path: its batches are larger (the plan would cost the host tens of
    milliseconds), and its results are read back anyway."""
    return device.type != "cpu"


def _convert_inputs(model: Model, batch: FlatBatch, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    module = model.shims[0]._model
    device = next(module.parameters()).device

    def tensor(array: Optional[numpy.ndarray]) -> Optional[torch.Tensor]:
        return None if array is None else to_device(array, device)

    kwargs: dict = {
        "char_rows": tensor(batch.char_rows),
        "word_hashes": tensor(batch.word_hashes),
        "heads": tensor(batch.heads),
        "tails": tensor(batch.tails),
        "char_index": tensor(batch.char_index),
        "word_index": tensor(batch.word_index),
        "token_mask": tensor(batch.token_mask),
        "char_mask": tensor(batch.char_mask),
        "bigram_hashes": tensor(batch.bigram_hashes),
        "word_vectors": tensor(batch.word_vectors),
        "bigram_vectors": tensor(batch.bigram_vectors),
        "bigram_missing": tensor(batch.bigram_missing),
        "word_types": tensor(batch.word_types),
        "word_weights": tensor(batch.word_weights),
        "recompute": batch.recompute,
    }
    if is_train and module.encoder.reads_positions and plans_positions_on_host(device):
        n_chars = batch.char_mask.shape[1]
        kwargs["positions"] = plan_positions(batch.heads, batch.tails, batch.token_mask, (n_chars,)).to(device)
    if batch.char_features is not None:
        kwargs["char_features"] = xp_to_torch(batch.char_features, requires_grad=is_train, device=device)

    def backprop(d_inputs: ArgsKwargs) -> Optional[Floats2d]:
        """RETURNS: the gradient of the character features, if any."""
        grad = d_inputs.kwargs.get("char_features")
        return None if grad is None else cast(Floats2d, torch2xp(grad))

    return ArgsKwargs(args=(), kwargs=kwargs), backprop


def _convert_outputs(
    model: Model, inputs_outputs: Tuple[Any, torch.Tensor], is_train: bool
) -> Tuple[Floats3d, Callable]:
    _, output = inputs_outputs
    scores = cast(Floats3d, torch2xp(output.float()))

    def backprop(d_scores: Floats3d) -> ArgsKwargs:
        return ArgsKwargs(args=(output,), kwargs={"grad_tensors": xp_to_torch(d_scores, device=output.device)})

    return scores, backprop


def _serialize(module: torch.nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    return buffer.getvalue()


def _deserialize(module: torch.nn.Module, data: bytes, device: torch.device) -> torch.nn.Module:
    # weights_only: a saved pipeline holds tensors, never code to unpickle.
    state = torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    module.load_state_dict(upgrade_state_dict(state, module.state_dict().keys()))
    return module.to(device)
