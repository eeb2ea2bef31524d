"""Training losses that stay on the model's device until they are read.

`nlp.update(losses=...)` sums each component's loss as a Python float, so every step reads its loss
back from the device, and on a GPU the host then waits for the whole step to finish before it can
prepare the next batch. Given a `DeviceLosses` (the training loop of `python -m spacy_flat train`
passes one), `flat_ner` adds its loss as a tensor instead; the sum stays on the device until a value is
read (`read()`, or indexing a name), which the loop does only when it logs or writes a checkpoint.

The sum is kept in float64 (float32 where the device has no float64, as on MPS) and starts from the
value already there, so on a CPU it is the same number, bit for bit, as the floats' running sum.
"""

from typing import Any, Dict, Union

import torch


class DeviceLosses(Dict[str, float]):
    """A losses dict whose `add`ed tensors are summed on their device until read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: Dict[str, torch.Tensor] = {}

    def add(self, name: str, loss: Union[float, torch.Tensor]) -> None:
        """Add a loss under `name`: a tensor joins the device-side sum, a float is added at once."""
        total = self._pending.get(name)
        if not isinstance(loss, torch.Tensor):
            if total is None:
                super().__setitem__(name, super().get(name, 0.0) + loss)
            else:
                self._pending[name] = total + loss
            return
        if total is None:
            dtype = torch.float32 if loss.device.type == "mps" else torch.float64
            # `full`, not `tensor`: a fill on the device, no copy from the host.
            total = torch.full((), super().get(name, 0.0), dtype=dtype, device=loss.device)
        self._pending[name] = total + loss.detach().to(total.dtype)

    def read(self) -> "DeviceLosses":
        """Bring every sum back from its device as a float (the one wait for the device).

        RETURNS (DeviceLosses): This dict, every value a float.
        """
        for name in list(self._pending):
            super().__setitem__(name, float(self._pending.pop(name).item()))
        return self

    def __getitem__(self, name: str) -> float:
        if name in self._pending:
            super().__setitem__(name, float(self._pending.pop(name).item()))
        return super().__getitem__(name)

    def __setitem__(self, name: str, value: float) -> None:
        self._pending.pop(name, None)
        super().__setitem__(name, value)
