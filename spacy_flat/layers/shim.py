"""A PyTorchShim whose optimizer step writes weights in place, and that can
evaluate and save with the optimizer's parameter averages.

thinc's `PyTorchShim.finish_update` re-binds `param.data` to a new tensor made
from the optimizer's array every step. With thinc 8.3, torch 2.x and NumPy 2 on
CPU that round trip (torch -> NumPy -> DLPack -> torch) leaks about 10 MB per
step for this model: a Resume training run grew past 20 GB in two epochs. Copying
the updated values into the existing parameter keeps memory flat and leaves
every tensor the optimizer or autograd holds valid.

thinc's `PyTorchShim.use_params` looks for keys named "pytorch_{id}_{name}", but
the optimizer files its averages under `(id, name)`, the key `finish_update`
passes it. So with `use_averages = true` spaCy evaluated and saved the raw
weights while believing it used the averages. `use_params` here reads the
optimizer's own keys.

thinc's `PyTorchShim.predict` switches the module to eval mode and back to train
mode on every call, a walk over every submodule twice per batch (6% of
`nlp.pipe` one doc at a time); `predict` here leaves it in eval mode, since
`begin_update` sets train mode itself, and runs under `torch.inference_mode`.

With SGD (no moments; with parameter averages or without), the embedding tables are updated row by
row: their gradients come back sparse (`nn.Embedding(sparse=True)` in every
`begin_update`, so the first step of a run, or of a resumed one, is like every
other) and only the rows a batch read are clipped and stepped, as thinc's
optimizer would step them; other optimizers get them densified.
thinc's step reads and writes the whole table several times over (L2 term, norm,
update, copy back, zeroing), and the dense gradient is allocated and zeroed besides:
for the Lattice LSTM's 3.7M table entries, at most a sixth of a training step on one CPU
thread (measured with the tables frozen); with the row-wise step and the faster dropout
together its training ran 7-10% faster. The one difference: an `L2` term reaches the rows a batch read only
(torch's sparse optimizers do the same), and the clipping norm leaves out the other
rows' L2 terms. With `use_averages = true` the tables' averages are kept row by row too
(`row_averages.py`), and brought up to date when they are read. Other optimizers see dense
gradients, as before.
"""

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Tuple, cast

import numpy
import torch
from thinc.api import ArgsKwargs, Optimizer, PyTorchShim, torch2xp
from thinc.types import FloatsXd

from ..nn.quantized import int8_copy
from .arrays import xp_to_torch
from .row_averages import RowAverages
from .torch_steps import DenseStep, steps_in_torch, torch_step


class InPlacePyTorchShim(PyTorchShim):
    """lr_scale (float): This module's learning rate as a multiple of the
    optimizer's, so FLAT can train faster than a transformer it shares the
    optimizer with (thinc's Optimizer takes a per-call `lr_scale`).
    int8_inference (bool): Predict on a CPU with an int8 copy of the module (`nn/quantized.py`).
    autocast_dtype (torch.dtype): The type of CUDA autocast under `mixed_precision`.
    """

    def __init__(
        self,
        *args: Any,
        lr_scale: float = 1.0,
        int8_inference: bool = False,
        autocast_dtype: torch.dtype = torch.float16,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lr_scale = lr_scale
        self.autocast_dtype = autocast_dtype
        self.int8_inference = int8_inference
        # The module and parameter versions the int8 copy was made from, and the copy.
        self._int8: Optional[Tuple[torch.nn.Module, Tuple[int, ...], torch.nn.Module]] = None
        # The tables' parameter averages under row-wise SGD, by parameter name.
        self.row_averages: Dict[str, RowAverages] = {}
        self._params_swapped = False

    def predict(self, inputs: ArgsKwargs) -> Any:
        """Run the module in eval mode without autograd; it stays in eval mode
        until the next `begin_update`."""
        if self._model.training:
            self._model.eval()
        module = self._int8_module() if self.int8_inference else self._model
        autocast = torch.autocast(device_type="cuda", dtype=self.autocast_dtype, enabled=self._mixed_precision)
        with torch.inference_mode(), autocast:
            return module(*inputs.args, **inputs.kwargs)

    def _int8_module(self) -> torch.nn.Module:
        """The int8 copy of the module on a CPU (the module itself elsewhere), made again whenever
        the weights changed: an update, a load or swapped-in averages all write the parameters in
        place, which bumps their tensor versions (torch's `_version` counter), or replace the module."""
        params = list(self._model.parameters())
        if params[0].device.type != "cpu":
            return self._model
        versions = tuple(p._version for p in params)
        if self._int8 is None or self._int8[0] is not self._model or self._int8[1] != versions:
            self._int8 = (self._model, versions, int8_copy(self._model))
        return self._int8[2]

    def begin_update(self, inputs: ArgsKwargs) -> Any:
        # Sparse table gradients, except under mixed precision (its gradient scaler reads dense ones).
        for module in self._model.modules():
            if isinstance(module, torch.nn.Embedding):
                module.sparse = not self._mixed_precision
        # thinc's begin_update opens `torch.autocast("cuda")` with the device's default
        # autocast type (float16): that default is this shim's type for the forward pass.
        before = torch.get_autocast_dtype("cuda")
        torch.set_autocast_dtype("cuda", self.autocast_dtype)
        try:
            return super().begin_update(inputs)
        finally:
            torch.set_autocast_dtype("cuda", before)

    def finish_update(self, optimizer: Optimizer) -> None:
        by_rows = plain_sgd(optimizer)
        in_torch = steps_in_torch(optimizer)
        dense: List[DenseStep] = []
        grads = [(name, param, param.grad) for name, param in self._model.named_parameters() if param.grad is not None]
        # Skip the step if any gradient overflowed (mixed precision).
        for name, param, grad in [] if self._grad_scaler.found_inf else grads:
            if grad.is_sparse and by_rows:
                sgd_rows(optimizer, (self.id, name), param, grad, self.lr_scale, self.row_averages)
                continue
            record = self.row_averages.pop(name, None)
            if record is not None:  # thinc's dense average goes on from exact values
                with torch.no_grad():
                    record.view.copy_(record.current(param.detach()))
                if not record.shared:
                    record.average[...] = torch2xp(record.view.cpu())
            if in_torch:
                dense.append(((self.id, name), param, grad.to_dense() if grad.is_sparse else grad))
                continue
            weights, _ = optimizer(
                (self.id, name),
                cast(FloatsXd, torch2xp(param.data)),
                cast(FloatsXd, torch2xp(grad.to_dense() if grad.is_sparse else grad)),
                lr_scale=self.lr_scale,
            )
            with torch.no_grad():
                param.copy_(xp_to_torch(weights, device=param.device))
        torch_step(optimizer, dense, self.lr_scale)
        for _, param, grad in grads:
            if grad.is_sparse:
                param.grad = None
            else:
                grad.zero_()
        self._grad_scaler.update()

    @contextlib.contextmanager
    def use_params(self, params: Dict[Any, Any]) -> Iterator[None]:
        """Swap in the parameters in `params` filed under `(self.id, name)` (an
        optimizer's `averages`), and restore the trained ones on exit.

        params (Dict[Any, Any]): Arrays keyed as the optimizer keys them.
        """
        if self._params_swapped:  # entered again: the averages are in place already
            yield
            return
        swapped: Dict[str, Tuple[torch.nn.Parameter, torch.Tensor, torch.Tensor]] = {}
        for name, param in self._model.named_parameters():
            value = params.get((self.id, name))
            if value is None:
                continue
            record = self.row_averages.get(name)
            if record is not None and record.average is value:
                new = record.current(param.detach())
            else:
                new = xp_to_torch(value, device=param.device)
            swapped[name] = (param, param.detach().clone(), new)
        if not swapped:
            yield
            return
        with torch.no_grad():
            for param, _, new in swapped.values():
                param.copy_(new)
        self._params_swapped = True
        try:
            yield
        finally:
            self._params_swapped = False
            with torch.no_grad():
                for param, trained, _ in swapped.values():
                    param.copy_(trained)

    def row_average_state(self, averages: Dict[Any, Any]) -> Dict[str, Dict[str, Any]]:
        """The records (`RowAverages`) of the tables whose averages are in `averages` (an optimizer's),
        by parameter name, for a checkpoint."""
        return {
            name: {"exact_at": record.exact_at.cpu().numpy(), "step": record.step}
            for name, record in self.row_averages.items()
            if record.average is averages.get((self.id, name))
        }

    def restore_row_averages(self, averages: Dict[Any, Any], state: Dict[str, Dict[str, Any]]) -> None:
        """Take back the records of `row_average_state` over an optimizer's restored `averages`."""
        self.row_averages.clear()
        for name, param in self._model.named_parameters():
            average = averages.get((self.id, name))
            if name not in state or average is None:
                continue
            view = xp_to_torch(average, device=param.device)
            # a copy: msgpack's arrays are read-only, and the record writes its steps in place
            exact_at = torch.tensor(numpy.array(state[name]["exact_at"], dtype="int64"), device=param.device)
            self.row_averages[name] = RowAverages(average, view, exact_at, int(state[name]["step"]))


def plain_sgd(optimizer: Optimizer) -> bool:
    """Whether thinc's optimizer steps each weight from its own gradient alone
    (SGD: no Adam or RAdam moments; parameter averages or not)."""
    return not optimizer.use_radam and optimizer.b1 == 0.0 and optimizer.b2 == 0.0


def sgd_rows(
    optimizer: Optimizer,
    key: Tuple[int, str],
    param: torch.Tensor,
    grad: torch.Tensor,
    lr_scale: float,
    row_averages: Optional[Dict[str, RowAverages]] = None,
) -> None:
    """thinc's SGD step (`Optimizer.__call__`) on the rows a sparse gradient holds.

    key (Tuple[int, str]): The parameter's key in the optimizer.
    param (torch.Tensor): The table (rows, width), updated in place.
    grad (torch.Tensor): Its sparse COO gradient.
    row_averages (Optional[Dict[str, RowAverages]]): The shim's lazily kept averages by
        parameter name; required where the optimizer keeps averages.
    """
    if optimizer.averages is not None and row_averages is None:
        raise ValueError("sgd_rows: an optimizer with averages needs the records of the table's row averages")
    optimizer.nr_update[key] += 1
    grad = grad.coalesce()
    rows, values = grad.indices()[0], grad.values()
    with torch.no_grad():
        before = param.index_select(0, rows)
        if optimizer.L2 != 0 and not optimizer.L2_is_weight_decay:
            values = values + optimizer.L2 * before
        if optimizer.grad_clip:  # thinc's clipping, its factor kept on the device (no read-back)
            clip = float(optimizer.grad_clip)
            norm = torch.linalg.vector_norm(values)
            values = values * torch.where(norm >= clip, clip / norm, torch.ones_like(norm))
        weights = before - lr_scale * optimizer.learn_rate * values
        if optimizer.L2 != 0 and optimizer.L2_is_weight_decay:
            weights -= lr_scale * optimizer.learn_rate * optimizer.L2 * weights
        param.index_copy_(0, rows, weights)
        if optimizer.averages is not None:
            assert row_averages is not None
            record = _row_average(optimizer, key, param, row_averages)
            record.update(rows, before, weights, optimizer.nr_update[key])


def _row_average(
    optimizer: Optimizer, key: Tuple[int, str], param: torch.Tensor, records: Dict[str, RowAverages]
) -> RowAverages:
    """The record of `key`'s average, made with thinc's zero array on its first update, or anew for
    an average no record holds (one restored from a checkpoint without row steps, which only the
    dense step, exact at every update, wrote)."""
    assert optimizer.averages is not None
    average = optimizer.averages.get(key)
    if average is None:
        average = cast(FloatsXd, torch2xp(torch.zeros_like(param)))
        optimizer.averages[key] = average
    record = records.get(key[1])
    if record is None or record.average is not average:
        view = xp_to_torch(average, device=param.device)
        record = records[key[1]] = RowAverages.exact(average, view, step=optimizer.nr_update[key] - 1)
    return record
