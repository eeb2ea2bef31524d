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


@torch.no_grad()
def forward_backward(
    scores: torch.Tensor,
    moves: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
    last: torch.Tensor,
    backward: bool = True,
) -> Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor]:
    """Log forward and backward scores and log Z of each row, without autograd.

    The recursion of `ConstrainedCRF._log_partition` (and the backward one of
    `posteriors.log_marginals`): a matrix product in probability space per
    step, shifted by the step's best score, with `moves` = exp(transitions)
    taken once (forbidden moves exact zeros) and probabilities clamped to the
    smallest normal float before the log. Rows run on past their end through
    zeroed padding; each row's backward pass starts at its own last character.

    scores (torch.Tensor): (batch, length, n_tags) emissions in the recursion's dtype, padding zeroed.
    moves (torch.Tensor): (n_tags, n_tags) exp(transitions).
    start, end (torch.Tensor): (n_tags,) start and end scores.
    last (torch.Tensor): (batch,) each row's last real position.
    backward (bool): Whether to run the backward recursion (None in its place if not).
    RETURNS: alpha and beta (batch, length, n_tags) in log space, and log Z (batch,).
    """
    tiny = torch.finfo(scores.dtype).tiny
    steps = scores.unbind(1)
    alphas = [start[None] + steps[0]]
    for emitted in steps[1:]:
        alphas.append(_step(alphas[-1], moves, tiny) + emitted)
    alpha = torch.stack(alphas, 1)
    final = alpha.gather(1, last[:, None, None].expand(-1, 1, alpha.shape[2]))[:, 0]
    log_z = torch.logsumexp(final + end[None], 1)
    if not backward:
        return alpha, None, log_z
    ends = end[None].expand(scores.shape[0], -1)
    betas = [ends]
    for t in range(len(steps) - 2, -1, -1):
        onward = _step(steps[t + 1] + betas[-1], moves.t(), tiny)
        betas.append(torch.where((t >= last)[:, None], ends, onward))
    return alpha, torch.stack(betas[::-1], 1), log_z


def _step(previous: torch.Tensor, moves: torch.Tensor, tiny: float) -> torch.Tensor:
    """log Σ_i exp(previous_i) moves[i, j] for each row and j, shifted by the row's best."""
    top = previous.amax(1, keepdim=True)
    return torch.mm((previous - top).exp(), moves).clamp_min(tiny).log() + top


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
        alpha, beta, log_z = forward_backward(
            scores, moves, start.to(wide), end.to(wide), last, backward=any(ctx.needs_input_grad[:4])
        )
        gold = gold_score(emissions, tags, mask, transitions, start, end, last)
        loss = (log_z.to(emissions.dtype) - gold).sum()
        if beta is None:
            return loss
        n_tags = moves.shape[0]
        unary = (alpha + beta - log_z[:, None, None]).exp().masked_fill(~real, 0.0)
        gold_hot = torch.zeros_like(unary).scatter_(2, tags[:, :, None], 1.0).masked_fill_(~real, 0.0)
        rows = torch.arange(len(last), device=last.device)
        d_start = unary[:, 0] - gold_hot[:, 0]
        d_end = unary[rows, last] - gold_hot[rows, last]
        counts = torch.zeros(n_tags * n_tags, dtype=wide, device=moves.device)
        counts.index_add_(0, (tags[:, :-1] * n_tags + tags[:, 1:]).flatten(), mask[:, 1:].flatten().to(wide))
        d_transitions = pairwise(scores, moves, alpha, beta, log_z, mask) - counts.view(n_tags, n_tags)
        ctx.save_for_backward(
            (unary - gold_hot).to(emissions.dtype),
            d_transitions.to(transitions.dtype),
            d_start.sum(0).to(start.dtype),
            d_end.sum(0).to(end.dtype),
        )
        return loss

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        (grad,) = grad_outputs
        d_emissions, d_transitions, d_start, d_end = ctx.saved_tensors
        return grad * d_emissions, grad * d_transitions, grad * d_start, grad * d_end, None, None, None


def pairwise(
    scores: torch.Tensor,
    moves: torch.Tensor,
    alpha: torch.Tensor,
    beta: torch.Tensor,
    log_z: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Σ over rows and real steps t ≥ 1 of p(y_{t-1} = i, y_t = j), (n_tags, n_tags).

    p = exp(α_{t-1}(i)) moves[i, j] exp(s_t(j) + β_t(j)) / Z factors into a
    left and a right vector per step, so the sum is one matrix product. The
    right side is shifted by its best (≤ 1), the left by the rest (exact while
    its logs stay below float64's range, gaps of ~600); the left is capped so
    that a forbidden pair (moves 0) cannot sum to inf and give inf · 0 = NaN.
    """
    n_tags = moves.shape[0]
    onward = scores[:, 1:] + beta[:, 1:]
    top = onward.amax(2, keepdim=True)
    right = (onward - top).exp()
    cap = math.log(torch.finfo(scores.dtype).max) - math.log(max(1, right.shape[0] * right.shape[1])) - 1.0
    left = (alpha[:, :-1] + top - log_z[:, None, None]).clamp_max(cap).exp().masked_fill(~mask[:, 1:, None], 0.0)
    return moves * (left.reshape(-1, n_tags).t() @ right.reshape(-1, n_tags))
