"""Dropout whose mask is drawn as uniform numbers on CPU.

On CPU, `torch.nn.Dropout` draws its mask with `bernoulli_`, one call of the
generator per element; a uniform draw compared with the rate is vectorised and
gives the same distribution. On one thread (torch 2.13, forward and backward,
`benchmarks/archive/kernels/dropout_speed.py`) it takes about half the time at the shapes these
models drop (embeddings, the Lattice LSTM's output, attention weights): a few
percent of a DC-SAN or Lattice LSTM training step. The masks come from the same
generator, so a seed or a checkpoint's random state reproduces them; they are
not the masks `nn.Dropout` would draw. On other devices the native fused kernel
is used.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import nn


class _UniformDropout(torch.autograd.Function):
    """x times a kept-or-not mask, scaled by 1 / (1 - p); the mask is saved as
    bool, as native dropout saves it, and the gradient is masked the same way."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, p: float) -> torch.Tensor:
        keep = torch.rand_like(x) >= p
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], None]:
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


class Dropout(nn.Dropout):
    """`torch.nn.Dropout` with the mask drawn as uniform numbers on CPU (see the
    module's docstring); the same module otherwise (no parameters, so saved
    weights load into either)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0 or self.inplace or x.device.type != "cpu":
            return super().forward(x)
        out = _UniformDropout.apply(x, self.p)
        assert isinstance(out, torch.Tensor)
        return out
