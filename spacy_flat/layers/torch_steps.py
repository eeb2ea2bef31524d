"""thinc's optimizer step (`Optimizer.__call__`) done by torch, on the parameters' own device.

thinc steps one parameter at a time through NumPy or CuPy: on a CPU its Adam kernel is one thread of
scalar C (MSRA at ten sentences a step, a third of a step's time on two threads went to it), and on a
GPU its gradient clipping reads each parameter's norm back to the host (`if norm >= threshold`), a
wait for the device per parameter per step. Here the same step is written in torch for all of a
module's dense parameters at once: Adam through torch's fused kernel (`torch._fused_adam_`, its
multi-threaded CPU kernel or one CUDA launch for every parameter), the clipping as a device-side
factor, and nothing read back.

The state stays thinc's, in the optimizer's own tables and shapes: `nr_update` per key, Adam's
moments as the flat float32 arrays `mom1` and `mom2` hold, the averages
in `averages`; torch works on views of those arrays (zero-copy on CPU and through DLPack on a GPU), so
checkpoints save and restore them unchanged, and a run may switch between this step and thinc's.

The arithmetic is thinc's, in its order: an L2 term in the gradient, then clipping of each parameter's
gradient to `grad_clip` by its own norm, then Adam (thinc's `lr * sqrt(1 - b2^t) / (1 - b1^t)` on
`m / (sqrt(v) + eps)`, which is torch's Adam with `eps / sqrt(1 - b2^t)`) or plain SGD, then
decoupled weight decay and the averages
(`ema -= (1 - decay) * (ema - w)`, decay = min((1 + t) / (10 + t), 0.9999)). Results agree with
thinc's to float32 rounding, not bit for bit: the norms are summed in another order.
"""

import math
from typing import Any, Dict, List, Sequence, Tuple

import torch
from thinc.api import Optimizer, torch2xp
from thinc.backends import get_array_ops

from .arrays import xp_to_torch

# (optimizer key, parameter, its dense gradient)
DenseStep = Tuple[Tuple[int, str], torch.Tensor, torch.Tensor]


def steps_in_torch(optimizer: Optimizer) -> bool:
    """Whether `torch_step` does this optimizer's step: thinc's own `Optimizer` (Adam or SGD, not RAdam)."""
    if optimizer.use_radam or (optimizer.b2 > 0.0 and optimizer.b1 <= 0.0):
        return False
    return type(optimizer) is Optimizer


def torch_step(optimizer: Optimizer, steps: Sequence[DenseStep], lr_scale: float = 1.0) -> None:
    """Step each parameter in place from its gradient, as `optimizer(key, weights, gradient)` would,
    without reading anything back from the device. The gradients are used as scratch space.

    optimizer (Optimizer): An optimizer `steps_in_torch` accepts.
    steps (Sequence[DenseStep]): The keys, parameters and dense gradients of one update.
    lr_scale (float): The module's learning-rate multiple.
    """
    live = [(key, param, grad) for key, param, grad in steps if grad.numel()]
    if not live:
        return
    rate = float(optimizer.learn_rate) * lr_scale
    with torch.no_grad():
        for key, _, _ in live:
            optimizer.nr_update[key] += 1
        params = [param.detach() for _, param, _ in live]
        grads = [grad for _, _, grad in live]
        if optimizer.L2 != 0 and not optimizer.L2_is_weight_decay:
            torch._foreach_add_(grads, params, alpha=float(optimizer.L2))
        if optimizer.grad_clip:
            _clip(grads, float(optimizer.grad_clip))
        if optimizer.b1 > 0.0 and optimizer.b2 > 0.0:
            _adam(optimizer, live, params, grads, rate)
        else:
            torch._foreach_add_(params, grads, alpha=-rate)
        if optimizer.L2 != 0 and optimizer.L2_is_weight_decay:
            torch._foreach_mul_(params, 1.0 - rate * float(optimizer.L2))
        if optimizer.averages is not None:
            _averages(optimizer, live, params)
        # The fused Adam kernel changes the parameters without bumping their version counters
        # (torch 2.13, CPU); what is kept by version (prediction's position tables, the int8
        # copy) must see every step.
        torch.autograd.graph.increment_version(params)


def _clip(grads: List[torch.Tensor], threshold: float) -> None:
    """thinc's `clip_gradient` on each gradient, by a factor computed on the device:
    `threshold / norm` where the norm reaches the threshold, exactly 1 elsewhere."""
    norms = torch.stack(torch._foreach_norm(grads))
    factors = torch.where(norms >= threshold, threshold / norms, torch.ones_like(norms))
    for grad, factor in zip(grads, factors.unbind()):
        grad.mul_(factor)


def _state(table: Dict[Any, Any], key: Tuple[int, str], param: torch.Tensor, *, flat: bool = True) -> torch.Tensor:
    """A view, shaped like `param`, of the optimizer's float32 array under `key` in `table` (`mom1`,
    `mom2` or `averages`), made as thinc makes it on first use: zeros, flat (Adam's moments,
    `ops.alloc1f`) or in the parameter's shape (the velocity, the averages)."""
    array = table.get(key)
    if array is None:
        ops = get_array_ops(torch2xp(param))
        array = ops.alloc1f(param.numel()) if flat else ops.alloc(tuple(param.shape), dtype="float32")
        table[key] = array
    return xp_to_torch(array, device=param.device).view(param.shape)


def _adam(
    optimizer: Optimizer,
    live: Sequence[DenseStep],
    params: List[torch.Tensor],
    grads: List[torch.Tensor],
    rate: float,
) -> None:
    """thinc's Adam, a group of parameters per step count (their bias corrections differ)."""
    b1, b2, eps = float(optimizer.b1), float(optimizer.b2), float(optimizer.eps)
    groups: Dict[Tuple[int, torch.device], List[int]] = {}
    for i, (key, param, _) in enumerate(live):
        groups.setdefault((optimizer.nr_update[key], param.device), []).append(i)
    for (count, device), members in groups.items():
        ps = [params[i] for i in members]
        gs = [grads[i] for i in members]
        m1 = [_state(optimizer.mom1, live[i][0], params[i]) for i in members]
        m2 = [_state(optimizer.mom2, live[i][0], params[i]) for i in members]
        # thinc divides by sqrt(v) + eps and scales by sqrt(1 - b2^t); torch divides by
        # sqrt(v) / sqrt(1 - b2^t) + eps': the same step with eps' = eps / sqrt(1 - b2^t).
        eps_t = eps / math.sqrt(1.0 - b2**count)
        try:
            counts = [torch.full((), float(count), device=device) for _ in members]
            torch._fused_adam_(
                ps, gs, m1, m2, [], counts, lr=rate, beta1=b1, beta2=b2,
                weight_decay=0.0, eps=eps_t, amsgrad=False, maximize=False,
            )  # fmt: skip
        except (RuntimeError, NotImplementedError):  # no fused kernel for this device
            _adam_unfused(ps, gs, m1, m2, b1, b2, eps, rate * math.sqrt(1.0 - b2**count) / (1.0 - b1**count))


def _adam_unfused(
    params: List[torch.Tensor],
    grads: List[torch.Tensor],
    mom1: List[torch.Tensor],
    mom2: List[torch.Tensor],
    b1: float,
    b2: float,
    eps: float,
    step_rate: float,
) -> None:
    """thinc's Adam kernel in torch's foreach operations (devices without a fused kernel)."""
    torch._foreach_mul_(mom1, b1)
    torch._foreach_add_(mom1, grads, alpha=1.0 - b1)
    torch._foreach_mul_(mom2, b2)
    torch._foreach_addcmul_(mom2, grads, grads, value=1.0 - b2)
    denominators = torch._foreach_sqrt(mom2)
    torch._foreach_add_(denominators, eps)
    torch._foreach_addcdiv_(params, mom1, denominators, value=-step_rate)


def _averages(optimizer: Optimizer, live: Sequence[DenseStep], params: List[torch.Tensor]) -> None:
    """thinc's `update_averages`: an average per parameter, started at zeros (`ops.alloc`)."""
    averages = optimizer.averages
    assert averages is not None
    for (key, _, _), param in zip(live, params):
        average = _state(averages, key, param, flat=False)
        count = optimizer.nr_update[key]
        decay = min((1.0 + count) / (10.0 + count), 0.9999)
        average.sub_((average - param).mul_(1.0 - decay))
