"""SGD with momentum (spacy_flat/training/optimizers.py): torch's `SGD(momentum=...)` step, reaching every
parameter of the model, the embedding tables included."""

from typing import Dict

import numpy
import pytest
import spacy
import torch
from thinc.api import SGD
from thinc.util import fix_random_seed

from spacy_flat.errors import FlatError
from spacy_flat.layers.shim import InPlacePyTorchShim, plain_sgd
from spacy_flat.training.optimizers import MomentumSGD, make_momentum_sgd

from .conftest import FAMILY, small_lexicon, tiny_examples


def _gradients(steps: int, shape=(6, 4), seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for _ in range(steps)]


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_the_step_is_torchs_sgd_with_momentum(weight_decay: float):
    """thinc's L2 term in the gradient (`L2_is_weight_decay = false`) is torch's `weight_decay`."""
    start = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    reference = torch.nn.Parameter(start.clone())
    torch_sgd = torch.optim.SGD([reference], lr=0.1, momentum=0.9, weight_decay=weight_decay)
    ours = MomentumSGD(0.1, momentum=0.9, grad_clip=0.0, L2=weight_decay, L2_is_weight_decay=False)
    weights = start.numpy().copy()
    for grad in _gradients(5):
        reference.grad = grad.clone()
        torch_sgd.step()
        weights, _ = ours((1, "w"), weights, grad.numpy().copy(), lr_scale=1.0)
    numpy.testing.assert_allclose(weights, reference.detach().numpy(), rtol=1e-6, atol=1e-7)
    # The velocity is the optimizer's first moment, so checkpoints keep it with Adam's tables.
    assert (1, "w") in ours.mom1


def test_momentum_clips_the_gradient_not_the_velocity():
    ours = MomentumSGD(1.0, momentum=0.9, grad_clip=1.0, L2=0.0)
    weights = numpy.zeros((1, 2), dtype="float32")
    unit = numpy.array([[0.6, 0.8]], dtype="float32")  # norm 1: never clipped
    for _ in range(3):
        weights, _ = ours((1, "w"), weights, unit.copy(), lr_scale=1.0)
    # Velocities 1, 1.9, 2.71: moved 5.61 units, more than three clipped steps of norm 1.
    numpy.testing.assert_allclose(weights, -5.61 * unit, rtol=1e-5)


def test_zero_momentum_is_thincs_sgd_and_steps_rows():
    plain, zero = SGD(0.1, grad_clip=5.0, use_averages=False), make_momentum_sgd(0.1, momentum=0.0, grad_clip=5.0)
    assert plain_sgd(zero) and not plain_sgd(make_momentum_sgd(0.1))
    weights, grad = numpy.ones((3, 2), dtype="float32"), numpy.full((3, 2), 0.5, dtype="float32")
    numpy.testing.assert_array_equal(
        zero((1, "w"), weights.copy(), grad.copy())[0], plain((1, "w"), weights.copy(), grad.copy())[0]
    )
    with pytest.raises(FlatError):
        make_momentum_sgd(0.1, momentum=1.0)


def test_the_registered_name_builds_it():
    optimizer = spacy.util.registry.resolve(
        {"o": {"@optimizers": "spacy-flat.SGD_momentum.v1", "learn_rate": 0.001, "momentum": 0.9}}
    )["o"]
    assert isinstance(optimizer, MomentumSGD) and optimizer.momentum == 0.9


def _torch_momentum_update(self: InPlacePyTorchShim, optimizer) -> None:
    """The reference step: torch's own SGD with momentum over every parameter, tables densified."""
    torch_sgd = getattr(self, "_reference_sgd", None)
    if torch_sgd is None:
        torch_sgd = self._reference_sgd = torch.optim.SGD(self._model.parameters(), lr=0.05, momentum=0.9)
    for param in self._model.parameters():
        if param.grad is not None and param.grad.is_sparse:
            param.grad = param.grad.to_dense()
    torch_sgd.step()
    torch_sgd.zero_grad()


def _train(architecture: str, optimizer, steps: int = 5) -> Dict[str, torch.Tensor]:
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={"model": {**FAMILY[architecture], "embed_dropout": 0.0}})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    module = next(shim._model for node in ner.model.walk() for shim in node.shims)
    # Each step reads a different half of the examples, so some table rows are read, then left
    # alone while their velocity still moves them.
    for step in range(steps):
        nlp.update(examples[step % 2 :: 2], sgd=optimizer)
    return {name: p.detach().clone() for name, p in module.named_parameters()}


@pytest.mark.parametrize("architecture", ["flat", "lattice_lstm"])
def test_momentum_reaches_every_parameter_the_tables_included(architecture: str, monkeypatch):
    """Training through the shim with `MomentumSGD` (no clipping, no L2) gives the weights torch's
    SGD with momentum gives, every parameter: a table stepped row by row, or without its
    velocity, would differ."""
    ours = _train(architecture, make_momentum_sgd(0.05, momentum=0.9, grad_clip=0.0))
    assert any("embed" in name for name in ours)
    monkeypatch.setattr(InPlacePyTorchShim, "finish_update", _torch_momentum_update)
    reference = _train(architecture, make_momentum_sgd(0.05, momentum=0.9, grad_clip=0.0))
    assert ours.keys() == reference.keys()
    for name in ours:
        numpy.testing.assert_allclose(ours[name].numpy(), reference[name].numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
