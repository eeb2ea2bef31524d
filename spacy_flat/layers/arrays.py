"""Thinc's arrays (numpy or cupy) as PyTorch tensors, without deprecated cupy calls."""

import numpy
import torch
from thinc.types import ArrayXd


def xp_to_torch(array: ArrayXd, *, device: torch.device, requires_grad: bool = False) -> torch.Tensor:
    """A torch tensor on `device` over `array`'s memory where no move is needed.

    Written here rather than taken from thinc: thinc 8.3's `xp2torch` hands cupy
    arrays over through `ndarray.toDlpack`, which recent cupy deprecates (seen with
    cupy 14.2: a VisibleDeprecationWarning on every call, an error under pytest's
    `-W error`). Cupy arrays go through the DLPack protocol instead, numpy arrays
    through `torch.from_numpy`, as thinc does.

    array (ArrayXd): A numpy or cupy array.
    device (torch.device): Where the tensor must be.
    requires_grad (bool): Make it a leaf that collects a gradient.
    RETURNS (torch.Tensor): The tensor.
    """
    tensor = torch.from_numpy(array) if isinstance(array, numpy.ndarray) else torch.from_dlpack(array)
    tensor = tensor.to(device)
    if requires_grad:
        tensor.requires_grad_()
    return tensor
