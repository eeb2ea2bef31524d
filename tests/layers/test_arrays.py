"""xp_to_torch: numpy through torch.from_numpy, anything else through DLPack."""

import numpy
import torch

from spacy_flat.layers.arrays import xp_to_torch


class DLPackOnly:
    """An array that offers nothing but the DLPack protocol (as cupy's does), over numpy's memory."""

    def __init__(self, array: numpy.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_numpy_arrays_share_memory_on_the_cpu():
    array = numpy.arange(6, dtype="float32").reshape(2, 3)
    tensor = xp_to_torch(array, device=torch.device("cpu"))
    array[0, 0] = 7.0
    assert tensor[0, 0].item() == 7.0
    assert not tensor.requires_grad


def test_strided_numpy_views_keep_their_values():
    array = numpy.arange(24, dtype="float32").reshape(4, 6)[::2, 1:5]
    assert numpy.array_equal(xp_to_torch(array, device=torch.device("cpu")).numpy(), array)


def test_other_arrays_go_through_dlpack_and_can_require_grad():
    array = numpy.arange(4, dtype="float32")
    tensor = xp_to_torch(DLPackOnly(array), device=torch.device("cpu"), requires_grad=True)
    assert tensor.requires_grad and tensor.is_leaf
    (tensor * 2).sum().backward()
    assert tensor.grad is not None and tensor.grad.tolist() == [2.0] * 4
    assert tensor.detach().tolist() == array.tolist()
