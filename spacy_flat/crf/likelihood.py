"""A linear-chain CRF's negative log-likelihood as one autograd node whose
backward is the closed form: tag marginals minus the gold path's counts.

Through autograd, the forward algorithm records about eight small nodes per
character (max, exp, mm, clamp, log, ...) and replays each in the backward; on
a training batch of ~10 sentences of ~30 characters those ~1,000 nodes and
their bookkeeping cost more than the arithmetic. The gradient of log Z with
respect to every potential is a marginal, so here one forward-backward pass
without autograd gives the loss and all its gradients at once, and the
backward only scales them.
"""

import math
from typing import Any, Optional, Tuple

import torch

# exp's floor: torch's CPU exp takes a path ~10x slower for results below
# float64's normal range (inputs under about -708, which every tag no allowed
# move reaches produces at every step); e^-700 is as good as 0 against terms of
# size ~1 and keeps exp on its fast path. Below float32's range on MPS anyway.
FLOOR = -700.0


def gold_score(
    emissions: torch.Tensor,
    tags: torch.Tensor,
    mask: torch.Tensor,
    transitions: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
    last: torch.Tensor,
) -> torch.Tensor:
    """Score of each row's gold path in one gather, (batch,); differentiable.

    emissions (torch.Tensor): (batch, length, n_tags) scores, padding zeroed.
    tags (torch.Tensor): (batch, length) tag ids; padding may hold any valid id.
    mask (torch.Tensor): (batch, length) bool, each row a non-empty prefix of True.
    last (torch.Tensor): (batch,) each row's last real position.
    """
    weight = mask.to(emissions.dtype)
    emitted = emissions.gather(2, tags[:, :, None])[:, :, 0]
    moved = transitions[tags[:, :-1], tags[:, 1:]]
    last_tags = tags.gather(1, last[:, None])[:, 0]
    return start[tags[:, 0]] + (emitted * weight).sum(1) + (moved * weight[:, 1:]).sum(1) + end[last_tags]


@torch.inference_mode()
def forward_backward(
    scores: torch.Tensor,
    moves: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
    last: torch.Tensor,
    backward: bool = True,
) -> Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor]:
    """Log forward scores α, log onward scores s + β and log Z of each row, without autograd.

    The recursion of `ConstrainedCRF._log_partition`: a matrix product in
    probability space per step, shifted by the step's best score, with `moves`
    = exp(transitions) taken once (forbidden moves exact zeros) and
    probabilities clamped to the smallest normal float before the log. The
    backward recursion is the same one on each row reversed within its own
    length, with the moves transposed and the end scores to start from: both
    run in one loop, as one batched product a step, since at these sizes a
    step costs its few ops' dispatch rather than their arithmetic. Rows run on
    past their end through zeroed padding; none is read there.

    scores (torch.Tensor): (batch, length, n_tags) emissions in the recursion's dtype, padding zeroed.
    moves (torch.Tensor): (n_tags, n_tags) exp(transitions).
    start, end (torch.Tensor): (n_tags,) start and end scores.
    last (torch.Tensor): (batch,) each row's last real position.
    backward (bool): Whether to run the backward recursion (None in its place if not).
    RETURNS: α and s + β (batch, length, n_tags) in log space, and log Z (batch,).
    """
    tiny = torch.finfo(scores.dtype).tiny
    length, n_tags = scores.shape[1:]
    positions = torch.arange(length, device=last.device)[None]
    # Each row reversed within its length, its padding left in place; the map is its own inverse.
    flip = torch.where(positions <= last[:, None], last[:, None] - positions, positions)[:, :, None].expand(
        -1, -1, n_tags
    )
    if backward:
        chains, first, matrices = torch.stack([scores, scores.gather(1, flip)]), [start, end], [moves, moves.t()]
    else:
        chains, first, matrices = scores[None], [start], [moves]
    steps = chains.unbind(2)
    pair_moves = torch.stack(matrices)
    state = torch.stack(first)[:, None] + steps[0]
    states = [state]
    for emitted in steps[1:]:
        top = state.amax(2, keepdim=True)
        shifted = (state - top).clamp_min_(FLOOR).exp_()
        state = torch.bmm(shifted, pair_moves).clamp_min_(tiny).log_().add_(top).add_(emitted)
        states.append(state)
    runs = torch.stack(states, 2)
    alpha = runs[0]
    final = alpha.gather(1, last[:, None, None].expand(-1, 1, n_tags))[:, 0]
    log_z = torch.logsumexp(final + end[None], 1)
    return alpha, runs[1].gather(1, flip) if backward else None, log_z


class NegLogLikelihood(torch.autograd.Function):
    """Summed NLL of the gold tags, `Σ_rows log Z - gold score`, with the
    gradients of a forward-backward pass: d/d emissions = marginals - gold
    one-hot (0 on padding), d/d transitions = summed pairwise marginals - gold
    transition counts, d/d start and end = first and last marginals - gold.

    Takes the masked potentials (`ConstrainedCRF.transitions` etc.): their
    `masked_fill` stays an autograd node, so forbidden raw parameters get zero
    gradient exactly as before.
    """

    @staticmethod
    def forward(
        ctx: Any,
        emissions: torch.Tensor,
        transitions: torch.Tensor,
        start: torch.Tensor,
        end: torch.Tensor,
        tags: torch.Tensor,
        mask: torch.Tensor,
        wide: torch.dtype,
    ) -> torch.Tensor:
        """emissions (torch.Tensor): (batch, length, n_tags) scores; padding is ignored.
        transitions (torch.Tensor): (n_tags, n_tags) masked transition scores.
        start, end (torch.Tensor): (n_tags,) masked start and end scores.
        tags (torch.Tensor): (batch, length) gold tag ids; padding may hold any valid id.
        mask (torch.Tensor): (batch, length) bool, each row a non-empty prefix of True.
        wide (torch.dtype): The recursion's float type (`crf.recursion_dtype`).
        RETURNS (torch.Tensor): The scalar loss, in the emissions' dtype.
        """
        real = mask[:, :, None]
        emissions = emissions.masked_fill(~real, 0.0)
        last = mask.sum(1) - 1
        scores = emissions.to(wide)
        moves = transitions.to(wide).exp()
        alpha, onward, log_z = forward_backward(
            scores, moves, start.to(wide), end.to(wide), last, backward=any(ctx.needs_input_grad[:4])
        )
        gold = gold_score(emissions, tags, mask, transitions, start, end, last)
        loss = (log_z.to(emissions.dtype) - gold).sum()
        if onward is None:
            return loss
        n_tags = moves.shape[0]
        # Tag marginals minus the gold one-hot, in place: at a few thousand
        # characters each full (batch, length, tags) pass costs as much as a step.
        d_emissions = (alpha + onward).sub_(scores).sub_(log_z[:, None, None]).clamp_min_(FLOOR).exp_()
        d_emissions.scatter_add_(
            2, tags[:, :, None], torch.full(tags[:, :, None].shape, -1.0, dtype=wide, device=tags.device)
        )
        d_emissions.masked_fill_(~real, 0.0)
        rows = torch.arange(len(last), device=last.device)
        counts = torch.zeros(n_tags * n_tags, dtype=wide, device=moves.device)
        counts.index_add_(0, (tags[:, :-1] * n_tags + tags[:, 1:]).flatten(), mask[:, 1:].flatten().to(wide))
        d_transitions = pairwise(moves, alpha, onward, log_z, mask) - counts.view(n_tags, n_tags)
        ctx.save_for_backward(
            d_emissions.to(emissions.dtype),
            d_transitions.to(transitions.dtype),
            d_emissions[:, 0].sum(0).to(start.dtype),
            d_emissions[rows, last].sum(0).to(end.dtype),
        )
        return loss

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        (grad,) = grad_outputs
        d_emissions, d_transitions, d_start, d_end = ctx.saved_tensors
        return grad * d_emissions, grad * d_transitions, grad * d_start, grad * d_end, None, None, None


def pairwise(
    moves: torch.Tensor, alpha: torch.Tensor, onward: torch.Tensor, log_z: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Σ over rows and real steps t ≥ 1 of p(y_{t-1} = i, y_t = j), (n_tags, n_tags).

    p = exp(α_{t-1}(i)) moves[i, j] exp(s_t(j) + β_t(j)) / Z factors into a
    left and a right vector per step, so the sum is one matrix product. The
    right side is shifted by its best (≤ 1), the left by the rest (exact while
    its logs stay below float64's range, gaps of ~600); the left is capped so
    that a forbidden pair (moves 0) cannot sum to inf and give inf · 0 = NaN.
    """
    n_tags = moves.shape[0]
    onward = onward[:, 1:]
    top = onward.amax(2, keepdim=True)
    right = (onward - top).clamp_min_(FLOOR).exp_()
    cap = math.log(torch.finfo(alpha.dtype).max) - math.log(max(1, right.shape[0] * right.shape[1])) - 1.0
    left = (alpha[:, :-1] + top - log_z[:, None, None]).clamp_(FLOOR, cap).exp_().masked_fill_(~mask[:, 1:, None], 0.0)
    return moves * (left.reshape(-1, n_tags).t() @ right.reshape(-1, n_tags))
