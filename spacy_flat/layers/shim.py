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
"""

import contextlib
from typing import Any, Dict, Iterator, Tuple, cast

from thinc.api import ArgsKwargs, Optimizer, PyTorchShim, torch2xp
from thinc.types import FloatsXd

from .arrays import xp_to_torch


class InPlacePyTorchShim(PyTorchShim):
    """lr_scale (float): This module's learning rate as a multiple of the
    optimizer's, so FLAT can train faster than a transformer it shares the
    optimizer with (thinc's Optimizer takes a per-call `lr_scale`)."""

    def __init__(self, *args: Any, lr_scale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lr_scale = lr_scale

    def predict(self, inputs: ArgsKwargs) -> Any:
        """Run the module in eval mode without autograd; it stays in eval mode
        until the next `begin_update`."""
        import torch

        if self._model.training:
            self._model.eval()
        with torch.inference_mode(), torch.autocast(device_type="cuda", enabled=self._mixed_precision):
            return self._model(*inputs.args, **inputs.kwargs)

    def finish_update(self, optimizer: Optimizer) -> None:
        import torch

        for name, param in self._model.named_parameters():
            if param.grad is None:
                continue
            if not self._grad_scaler.found_inf:  # skip the step if any gradient overflowed
                weights, _ = optimizer(
                    (self.id, name),
                    cast(FloatsXd, torch2xp(param.data)),
                    cast(FloatsXd, torch2xp(param.grad)),
                    lr_scale=self.lr_scale,
                )
                with torch.no_grad():
                    param.copy_(xp_to_torch(weights, device=param.device))
            param.grad.zero_()
        self._grad_scaler.update()

    @contextlib.contextmanager
    def use_params(self, params: Dict[Any, Any]) -> Iterator[None]:
        """Swap in the parameters in `params` filed under `(self.id, name)` (an
        optimizer's `averages`), and restore the trained ones on exit.

        params (Dict[Any, Any]): Arrays keyed as the optimizer keys them.
        """
        import torch

        swapped: Dict[str, Tuple[torch.nn.Parameter, torch.Tensor]] = {}
        for name, param in self._model.named_parameters():
            value = params.get((self.id, name))
            if value is not None:
                swapped[name] = (param, param.detach().clone())
        if not swapped:
            yield
            return
        with torch.no_grad():
            for name, (param, _) in swapped.items():
                param.copy_(xp_to_torch(params[(self.id, name)], device=param.device))
        try:
            yield
        finally:
            with torch.no_grad():
                for param, trained in swapped.values():
                    param.copy_(trained)
