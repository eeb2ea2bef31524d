"""Thinc's arrays (numpy or cupy) as PyTorch tensors, without deprecated cupy calls."""

from typing import Optional

import numpy
import torch
from thinc.types import ArrayXd, Floats3d

from ..crf.model import FORBIDDEN
from ..nn.transfer import to_device


def xp_to_torch(array: ArrayXd, *, device: torch.device, requires_grad: bool = False) -> torch.Tensor:
    """A torch tensor on `device` over `array`'s memory where no move is needed.

    Written here rather than taken from thinc: thinc 8.3's `xp2torch` hands cupy
    arrays over through `ndarray.toDlpack`, which recent cupy deprecates (seen with
    cupy 14.2: a VisibleDeprecationWarning on every call, an error under pytest's
    `-W error`). Cupy arrays go through the DLPack protocol instead, numpy arrays
    through `torch.from_numpy`, as thinc does, and to a GPU through pinned memory
    without a wait (`nn/transfer.py`).

    array (ArrayXd): A numpy or cupy array.
    device (torch.device): Where the tensor must be.
    requires_grad (bool): Make it a leaf that collects a gradient.
    RETURNS (torch.Tensor): The tensor.
    """
    if isinstance(array, numpy.ndarray):  # the array's own memory on a CPU, strides and all
        tensor = to_device(torch.from_numpy(array), device)
    else:
        tensor = torch.from_dlpack(array).to(device)
    if requires_grad:
        tensor.requires_grad_()
    return tensor


def host_emissions(scores: Floats3d, forbidden: Optional[numpy.ndarray]) -> numpy.ndarray:
    """The emissions as a float32 NumPy array on the host, the tags in `forbidden`
    set to FORBIDDEN (the value torch's `masked_fill` gave them before).

    scores (Floats3d): (rows, width, n_tags), NumPy or CuPy.
    forbidden (Optional[numpy.ndarray]): (rows, >= width, n_tags) bool, or None.
    """
    host: numpy.ndarray = numpy.asarray(scores if isinstance(scores, numpy.ndarray) else scores.get(), dtype="float32")
    if forbidden is None:
        return host
    return numpy.where(forbidden[:, : host.shape[1]], numpy.float32(FORBIDDEN), host)
