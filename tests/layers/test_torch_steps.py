"""thinc's optimizer step done by torch (layers/torch_steps.py) against thinc's own, parameter by
parameter and step by step: Adam and plain SGD, with and without clipping (the factor kept
on the device), L2 as a gradient term and as decay, averages, a learning-rate multiple, state made by
one and read by the other; and nothing read back from the device."""

from typing import Any, Dict, List, Tuple

import numpy
import pytest
import torch
from thinc.api import SGD, Adam, Optimizer, RAdam

from spacy_flat.layers.torch_steps import steps_in_torch, torch_step

from ..util import SyncCounter

SHAPES = [(30, 8), (8,), (5, 4, 3), (0, 8)]


def _params(seed: int) -> List[numpy.ndarray]:
    rng = numpy.random.default_rng(seed)
    return [rng.normal(size=shape).astype("float32") for shape in SHAPES]


def _grads(seed: int, scale: float) -> List[numpy.ndarray]:
    rng = numpy.random.default_rng(1000 + seed)
    return [(scale * rng.normal(size=shape)).astype("float32") for shape in SHAPES]


def _run(optimizer: Optimizer, use_torch: List[bool], scale: float = 1.0, lr_scale: float = 0.5) -> List[numpy.ndarray]:
    """Weights after one step per entry of `use_torch`, each by torch (True) or by thinc."""
    weights = _params(0)
    for step, in_torch in enumerate(use_torch):
        grads = _grads(step, scale)
        if in_torch:
            tensors = [torch.from_numpy(w) for w in weights]
            steps = [((7, f"p{i}"), t, torch.from_numpy(g.copy())) for i, (t, g) in enumerate(zip(tensors, grads))]
            torch_step(optimizer, steps, lr_scale)
        else:
            for i, (w, g) in enumerate(zip(weights, grads)):
                if w.size:
                    optimizer((7, f"p{i}"), w, g.copy(), lr_scale=lr_scale)
        optimizer.step_schedules()
    return weights


OPTIMIZERS: Dict[str, Any] = {
    "adam": lambda clip, l2, decay, averages: Adam(
        0.01, grad_clip=clip, L2=l2, L2_is_weight_decay=decay, use_averages=averages
    ),
    "sgd": lambda clip, l2, decay, averages: SGD(
        0.05, grad_clip=clip, L2=l2, L2_is_weight_decay=decay, use_averages=averages
    ),
}
SETTINGS = [
    # (grad_clip, gradient scale, L2, L2 as weight decay, averages)
    (0.0, 1.0, 0.0, True, False),
    (1.0, 1.0, 0.0, True, False),  # every gradient clipped
    (1e6, 1.0, 0.0, True, True),  # none clipped; averages
    (5.0, 0.3, 0.01, False, False),  # some clipped; L2 in the gradient
    (5.0, 1.0, 0.01, True, True),  # decay and averages
]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
@pytest.mark.parametrize("clip,scale,l2,decay,averages", SETTINGS)
def test_torch_steps_as_thinc(name: str, clip: float, scale: float, l2: float, decay: bool, averages: bool):
    thinc_opt = OPTIMIZERS[name](clip, l2, decay, averages)
    torch_opt = OPTIMIZERS[name](clip, l2, decay, averages)
    assert steps_in_torch(torch_opt)
    expected = _run(thinc_opt, [False] * 6, scale)
    ours = _run(torch_opt, [True] * 6, scale)
    for e, o in zip(expected, ours):
        numpy.testing.assert_allclose(o, e, rtol=2e-5, atol=2e-6)
    assert not numpy.allclose(ours[0], _params(0)[0])  # it moved
    assert dict(thinc_opt.nr_update) == dict(torch_opt.nr_update)
    for table in ("mom1", "mom2", "averages"):
        theirs, mine = getattr(thinc_opt, table) or {}, getattr(torch_opt, table) or {}
        assert sorted(theirs) == sorted(mine), table
        for key in theirs:  # the state in thinc's shapes and dtype: checkpoints cannot tell the steps apart
            assert mine[key].shape == theirs[key].shape and mine[key].dtype == theirs[key].dtype
            numpy.testing.assert_allclose(mine[key], theirs[key], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_state_goes_on_across_the_two_steps(name: str):
    """A run may switch: thinc's state read by torch's step and the other way round."""
    expected = _run(OPTIMIZERS[name](5.0, 0.0, True, True), [False] * 6, 0.3)
    mixed = _run(OPTIMIZERS[name](5.0, 0.0, True, True), [False, False, True, True, False, True], 0.3)
    for e, o in zip(expected, mixed):
        numpy.testing.assert_allclose(o, e, rtol=2e-5, atol=2e-6)


def test_which_optimizers_step_in_torch():
    assert steps_in_torch(Adam(0.001)) and steps_in_torch(SGD(0.1))
    assert not steps_in_torch(RAdam(0.001))

    class Custom(Optimizer):
        pass

    assert not steps_in_torch(Custom(0.001))  # a subclass may step otherwise: thinc's call is kept


def test_a_torch_step_reads_nothing_back():
    optimizer = Adam(0.01, grad_clip=1.0, L2=0.01, L2_is_weight_decay=False, use_averages=True)
    tensors = [torch.from_numpy(w) for w in _params(0)]
    grads = [torch.from_numpy(g) for g in _grads(0, 3.0)]
    steps: List[Tuple[Tuple[int, str], torch.Tensor, torch.Tensor]] = [
        ((7, f"p{i}"), t, g) for i, (t, g) in enumerate(zip(tensors, grads))
    ]
    torch_step(optimizer, steps)  # the state is made on the first step
    with SyncCounter() as counter:
        torch_step(optimizer, steps)
    assert counter.seen == []


def test_devices_without_a_fused_kernel_step_the_same(monkeypatch):
    """The foreach fallback (a device torch has no fused Adam for) steps as the fused kernel does."""
    fused = _run(Adam(0.01, grad_clip=5.0, use_averages=True), [True] * 4, 0.3)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("no fused Adam here")

    monkeypatch.setattr(torch, "_fused_adam_", refuse)
    fallback = _run(Adam(0.01, grad_clip=5.0, use_averages=True), [True] * 4, 0.3)
    for f, o in zip(fused, fallback):
        numpy.testing.assert_allclose(o, f, rtol=2e-5, atol=2e-6)
    assert not numpy.allclose(fallback[0], _params(0)[0])
