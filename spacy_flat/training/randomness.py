"""Every random state a training step draws from, captured and restored.

spaCy's `fix_random_seed` (thinc's) seeds Python's `random`, NumPy's global generator, torch (CPU and,
with a GPU, CUDA) and cupy. All but cupy expose their state; cupy's generator has none to read (see
`restore`).
"""

import importlib
import random
from typing import Any, Dict, List

import numpy

PythonState = List[Any]


def python_state() -> PythonState:
    """RETURNS (PythonState): Python's `random` state as msgpack-able lists."""
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def set_python_state(state: PythonState) -> None:
    """state (PythonState): A state from `python_state`."""
    version, internal, gauss = state
    random.setstate((version, tuple(internal), gauss))


def capture() -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): The states of Python, NumPy and torch (CUDA too when it is
    initialized), as ints, floats and NumPy arrays."""
    import torch

    name, keys, pos, has_gauss, cached = numpy.random.get_state()
    state: Dict[str, Any] = {
        "python": python_state(),
        "numpy": {"name": name, "keys": keys, "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)},
        "torch": torch.get_rng_state().numpy(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda"] = [s.numpy() for s in torch.cuda.get_rng_state_all()]
    return state


def restore(state: Dict[str, Any], *, fallback_seed: int) -> List[str]:
    """Set every generator to `state`.

    state (Dict[str, Any]): A state from `capture`.
    fallback_seed (int): Seeds cupy, whose state cannot be read or set: thinc layers that draw
        their dropout masks from cupy (not flat_ner's, which draw from torch) differ after a
        resume on GPU. Also seeds CUDA when the checkpoint was taken on CPU.
    RETURNS (List[str]): What could not be restored exactly, for the log.
    """
    import torch

    set_python_state(state["python"])
    np_state = state["numpy"]
    keys = numpy.asarray(np_state["keys"], dtype=numpy.uint32)
    numpy.random.set_state((np_state["name"], keys, np_state["pos"], np_state["has_gauss"], np_state["cached"]))
    torch.set_rng_state(torch.from_numpy(numpy.asarray(state["torch"], dtype=numpy.uint8).copy()))
    inexact: List[str] = []
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        saved = state.get("torch_cuda")
        if saved is not None and len(saved) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all([torch.from_numpy(numpy.asarray(s, dtype=numpy.uint8).copy()) for s in saved])
        else:
            torch.cuda.manual_seed_all(fallback_seed)
            inexact.append("torch.cuda (the checkpoint holds no state for these devices)")
    try:
        cupy = importlib.import_module("cupy")
    except ImportError:
        return inexact
    if cupy.cuda.is_available():
        cupy.random.seed(fallback_seed)
        inexact.append("cupy (its generator's state cannot be saved)")
    return inexact
