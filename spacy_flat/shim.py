"""A PyTorchShim whose optimizer step writes weights in place.

thinc's `PyTorchShim.finish_update` re-binds `param.data` to a new tensor made
from the optimizer's array every step. With thinc 8.3, torch 2.x and NumPy 2 on
CPU that round trip (torch -> NumPy -> DLPack -> torch) leaks about 10 MB per
step for this model: a Resume training run grew past 20 GB in two epochs. Copying
the updated values into the existing parameter keeps memory flat and leaves
every tensor the optimizer or autograd holds valid.
"""

from typing import cast

from thinc.api import Optimizer, PyTorchShim, torch2xp, xp2torch
from thinc.types import FloatsXd


class InPlacePyTorchShim(PyTorchShim):
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
                )
                with torch.no_grad():
                    param.copy_(xp2torch(weights, device=param.device))
            param.grad.zero_()
        self._grad_scaler.update()
