"""SGD with momentum, the optimizer of FLAT's paper (Table 5) and its released code, as a thinc optimizer.

thinc 8.3 has plain SGD, Adam and RAdam, but no momentum. `MomentumSGD` is thinc's `Optimizer` with a
velocity per parameter, kept in the optimizer's `mom1` table (keyed `(id, name)` like Adam's first
moment), so checkpoints save and restore it with the rest of the optimizer's state unchanged. The step is
torch's `SGD(momentum=μ)` (dampening 0, no Nesterov): after thinc's L2 term and gradient clipping,
`v = μ·v + g` and `w -= lr·v`, with thinc's decoupled weight decay and parameter averages after it.

The step is written out rather than delegated to `Optimizer.__call__`, because that call clips the
gradient it is given: passing it the velocity would clip the velocity, not the gradient. A table under
momentum is stepped whole every update (rows a batch did not read still move by their velocity), so the
shim hands such tables dense gradients (`layers/shim.py`, `plain_sgd`).
"""

from typing import Any, Tuple, cast

from thinc.api import Optimizer, registry
from thinc.backends import get_array_ops
from thinc.optimizers import SGD_DEFAULTS, FloatOrSeq
from thinc.types import FloatsXd

from ..errors import FlatError


class MomentumSGD(Optimizer):
    """thinc's `Optimizer` doing SGD with (heavy-ball) momentum.

    momentum (float): The share of the previous step's velocity carried into this one (0.9 in FLAT's paper).
    """

    momentum: float
    # Its step is thinc's with the velocity in `mom1`, so the shim may take it in torch
    # (`layers/torch_steps.py`) instead of calling it parameter by parameter.
    steps_in_torch = True

    def __init__(self, learn_rate: FloatOrSeq, *, momentum: float, **kwargs: Any) -> None:
        if not 0.0 <= momentum < 1.0:
            raise FlatError(f"SGD's momentum must be in [0, 1) (got {momentum})")
        super().__init__(learn_rate, beta1=0.0, beta2=0.0, **kwargs)
        self.momentum = momentum

    def __call__(
        self, key: Tuple[int, str], weights: FloatsXd, gradient: FloatsXd, *, lr_scale: float = 1.0
    ) -> Tuple[FloatsXd, FloatsXd]:
        """Step `weights` in place from `gradient` (zeroed in place), as `Optimizer.__call__` does."""
        if self.momentum == 0.0:
            return super().__call__(key, weights, gradient, lr_scale=lr_scale)
        if len(gradient) < 1:
            return weights, gradient
        ops = get_array_ops(weights)
        self.nr_update[key] += 1
        if self.L2 != 0 and not self.L2_is_weight_decay:
            gradient += self.L2 * weights
        if self.grad_clip:
            gradient = ops.clip_gradient(gradient, self.grad_clip)
        velocity = self.mom1.get(key)
        if velocity is None:  # torch's first step: the velocity is the gradient itself
            velocity = self.mom1[key] = cast(FloatsXd, gradient.copy())
        else:
            velocity *= self.momentum
            velocity += gradient
        weights -= lr_scale * self.learn_rate * velocity
        gradient *= 0
        if self.L2 != 0 and self.L2_is_weight_decay:
            weights -= lr_scale * self.learn_rate * self.L2 * weights
        if self.averages is not None:
            if key not in self.averages:
                self.averages[key] = ops.alloc(weights.shape, dtype="float32")
            ops.update_averages(self.averages[key], weights, self.nr_update[key])
        return weights, gradient


@registry.optimizers("spacy-flat.SGD_momentum.v1")
def make_momentum_sgd(
    learn_rate: FloatOrSeq,
    *,
    momentum: float = 0.9,
    L2: FloatOrSeq = SGD_DEFAULTS["L2"],
    grad_clip: FloatOrSeq = SGD_DEFAULTS["grad_clip"],
    L2_is_weight_decay: bool = cast(bool, SGD_DEFAULTS["L2_is_weight_decay"]),
    use_averages: bool = False,
) -> MomentumSGD:
    """`spacy-flat.SGD_momentum.v1`: SGD with momentum, as torch's `SGD(momentum=...)`.

    learn_rate (FloatOrSeq): The rate, or a schedule of it.
    momentum (float): The velocity's carry-over, in [0, 1); 0 is thinc's plain SGD.
    L2 (FloatOrSeq): L2 penalty; with `L2_is_weight_decay = false` it is added to the gradient before
        clipping and momentum, as torch's `weight_decay`.
    grad_clip (FloatOrSeq): Clip each parameter's gradient to this norm (thinc's clipping); 0 turns it off.
    L2_is_weight_decay (bool): Decoupled weight decay instead of an L2 term in the gradient.
    use_averages (bool): Keep parameter averages for evaluation and saving.
    """
    return MomentumSGD(
        learn_rate,
        momentum=momentum,
        L2=L2,
        grad_clip=grad_clip,
        L2_is_weight_decay=L2_is_weight_decay,
        use_averages=use_averages,
    )
