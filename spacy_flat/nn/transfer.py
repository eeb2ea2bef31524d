"""Host arrays copied to the model's device without making the host wait."""

from __future__ import annotations

from typing import Sequence, Union

import numpy
import torch


def to_device(values: Union[numpy.ndarray, torch.Tensor, Sequence[int]], device: torch.device) -> torch.Tensor:
    """`values` (a NumPy array, a CPU tensor or a list of ints) as a tensor on `device`.

    A plain copy to a CUDA device synchronises its stream (torch waits for a copy from
    pageable memory to finish), so the host would wait for every kernel queued before
    it, and a training step could not run ahead of the device. From pinned memory, with
    `non_blocking`, the copy is queued like a kernel; torch's caching host allocator keeps
    the pinned block until the copy has run. Elsewhere this is a plain `.to(device)`.
    """
    if isinstance(values, torch.Tensor):
        tensor = values
    elif isinstance(values, numpy.ndarray):
        tensor = torch.from_numpy(numpy.ascontiguousarray(values))
    else:
        tensor = torch.as_tensor(list(values), dtype=torch.long)
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
