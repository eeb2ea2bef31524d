"""The uniform-draw dropout: native dropout's distribution, scaling and gradient, reproducible from a seed."""

import pytest
import torch

from spacy_flat.nn.dropout import Dropout


def test_kept_values_are_scaled_and_dropped_ones_zero():
    torch.manual_seed(0)
    x = torch.rand(200, 300) + 0.5  # no zeros of its own
    out = Dropout(0.3).train()(x)
    kept = out != 0
    assert torch.allclose(out[kept], x[kept] / 0.7)
    assert abs(kept.float().mean().item() - 0.7) < 0.01


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_rate_matches_native_dropout(p):
    torch.manual_seed(1)
    x = torch.ones(400_000)
    ours = (Dropout(p).train()(x) == 0).float().mean().item()
    native = (torch.nn.Dropout(p).train()(x) == 0).float().mean().item()
    assert abs(ours - p) < 0.005 and abs(native - p) < 0.005


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(50, 40, requires_grad=True)
    out = Dropout(0.5).train()(x)
    weights = torch.randn(50, 40)
    (out * weights).sum().backward()
    mask = (out != 0).float()
    assert torch.allclose(x.grad, weights * mask * 2.0)
    assert torch.autograd.gradcheck(
        lambda t: (torch.manual_seed(3), Dropout(0.4).train()(t))[1],
        (torch.randn(6, 5, dtype=torch.double, requires_grad=True),),
    )


def test_a_seed_gives_the_same_mask():
    x = torch.randn(30, 30)
    torch.manual_seed(4)
    first = Dropout(0.5).train()(x)
    torch.manual_seed(4)
    assert torch.equal(first, Dropout(0.5).train()(x))
    assert not torch.equal(first, Dropout(0.5).train()(x))


def test_identity_when_evaluating_or_at_zero_and_native_at_one():
    x = torch.randn(10, 10)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))


def test_activation_checkpointing_recomputes_the_same_mask():
    from torch.utils.checkpoint import checkpoint

    layer = torch.nn.Sequential(torch.nn.Linear(8, 8), Dropout(0.5)).train()
    x = torch.randn(4, 8, requires_grad=True)
    torch.manual_seed(5)
    layer(x).sum().backward()
    plain = x.grad.clone()
    x.grad = None
    torch.manual_seed(5)
    checkpoint(layer, x, use_reentrant=False).sum().backward()
    assert torch.equal(plain, x.grad)
