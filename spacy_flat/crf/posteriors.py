"""Per-character tag marginals of a linear-chain CRF in torch, with gradients,
and the soft-target loss that distils a teacher's marginals into a student.

Posterior distillation (Wang et al., ACL 2020, "Structure-Level Knowledge
Distillation for Multilingual Sequence Labeling"): the student minimises
-Σ_t Σ_y q_t(y) log p_t(y), where q are the teacher's marginals and p the
student CRF's own, both at temperature T. `nll` trains the CRF on one gold path;
this loss trains it on the teacher's whole distribution over paths, as seen
character by character.
"""

import torch

from .model import ConstrainedCRF, recursion_dtype


def log_marginals(
    crf: ConstrainedCRF, emissions: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """log p_t(y), the log probability that character t takes tag y, by the
    forward-backward algorithm in float64, differentiable with respect to the
    emissions and the CRF's parameters.

    Both recursions run as `ConstrainedCRF._log_partition` runs its forward
    pass: a matrix product in probability space per step, shifted by the step's
    best score, so forbidden moves are exact zeros rather than a logsumexp over
    a mostly forbidden (batch, tags, tags) block. Each position is normalised
    over tags, which is α_t(y) β_t(y) / Z without reading Z off a row's end.

    emissions (torch.Tensor): (batch, length, n_tags) scores.
    mask (torch.Tensor): (batch, length) bool, each row a non-empty prefix of True.
    temperature (float): Every potential is divided by it.
    RETURNS (torch.Tensor): (batch, length, n_tags) in the recursion's dtype;
        padding positions hold values without meaning.
    """
    wide = recursion_dtype(emissions.device)
    tiny = torch.finfo(wide).tiny
    with torch.autocast(device_type=emissions.device.type, enabled=False):
        scores = (emissions.to(wide) / temperature).masked_fill(~mask[:, :, None], 0.0)
        moves = (crf.transitions.to(wide) / temperature).exp()
        start = crf.start_transitions.to(wide) / temperature
        end = crf.end_transitions.to(wide) / temperature
        steps = scores.unbind(1)
        alphas = [start[None] + steps[0]]
        for emitted in steps[1:]:
            alphas.append(_step(alphas[-1], moves, tiny) + emitted)
        last = mask.sum(1) - 1
        ends = end[None].expand(scores.shape[0], -1)
        betas = [ends]
        for t in range(len(steps) - 2, -1, -1):
            onward = _step(steps[t + 1] + betas[-1], moves.t(), tiny)
            # A row's backward pass starts at its own last character.
            betas.append(torch.where((t >= last)[:, None], ends, onward))
        joint = torch.stack(alphas, 1) + torch.stack(betas[::-1], 1)
        return joint - torch.logsumexp(joint, 2, keepdim=True)


def soft_target_loss(
    crf: ConstrainedCRF,
    emissions: torch.Tensor,
    mask: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Summed cross-entropy -Σ q log p of the student's marginals against the
    teacher's, over the real characters of every row, times T² (so the
    gradients keep their size as T changes, as in Hinton et al. 2015).

    targets (torch.Tensor): (batch, length, n_tags) teacher marginals; rows sum
        to 1 on real characters, padding is ignored.
    RETURNS (torch.Tensor): The scalar loss.
    """
    log_p = log_marginals(crf, emissions, mask, temperature)
    q = targets.to(log_p.dtype).masked_fill(~mask[:, :, None], 0.0)
    # 0 · log 0 is 0: a tag the teacher rules out costs nothing however unlikely.
    terms = torch.where(q > 0, q * log_p, torch.zeros_like(log_p))
    return (-terms.sum() * temperature**2).to(emissions.dtype)


def _step(previous: torch.Tensor, moves: torch.Tensor, tiny: float) -> torch.Tensor:
    """log Σ_i exp(previous_i) moves[i, j] for each row and j, shifted by the row's best."""
    top = previous.max(1, keepdim=True).values.detach()
    return torch.mm((previous - top).exp(), moves).clamp_min(tiny).log() + top
