"""CRF marginals and the soft-target loss, against a literal sum over every tag path."""

import itertools

import pytest
import torch

from spacy_flat.crf.model import ConstrainedCRF
from spacy_flat.crf.posteriors import log_marginals, soft_target_loss

N_TAGS = 4
ALLOWED = [(i, j) for i in range(N_TAGS) for j in range(N_TAGS) if (i, j) not in {(0, 3), (2, 1), (3, 3)}]
STARTS = [0, 1, 2]
ENDS = [0, 2, 3]


def tiny_crf(seed: int) -> ConstrainedCRF:
    torch.manual_seed(seed)
    crf = ConstrainedCRF(N_TAGS, ALLOWED, STARTS, ENDS)
    with torch.no_grad():
        for param in crf.parameters():
            param.normal_()
    return crf


def literal_log_marginals(crf, emissions, lengths, temperature):
    """log p_t(y) per row, by scoring every path of the row's own length."""
    trans, start, end = crf.transitions.double(), crf.start_transitions.double(), crf.end_transitions.double()
    rows = []
    for b, n in enumerate(lengths):
        e = emissions[b].double()
        paths = list(itertools.product(range(N_TAGS), repeat=n))
        scores = torch.stack(
            [
                (
                    start[p[0]]
                    + sum(e[t, p[t]] for t in range(n))
                    + sum(trans[p[t - 1], p[t]] for t in range(1, n))
                    + end[p[-1]]
                )
                / temperature
                for p in paths
            ]
        )
        log_z = torch.logsumexp(scores, 0)
        columns = []
        for t in range(n):
            per_tag = [
                torch.logsumexp(scores[[k for k, p in enumerate(paths) if p[t] == y]], 0) - log_z for y in range(N_TAGS)
            ]
            columns.append(torch.stack(per_tag))
        rows.append(torch.stack(columns))
    return rows


@pytest.mark.parametrize("temperature", [1.0, 2.5])
def test_marginals_equal_the_sum_over_paths(temperature):
    crf = tiny_crf(0)
    lengths = [5, 3, 1]
    emissions = torch.randn(3, 5, N_TAGS, generator=torch.Generator().manual_seed(1)) * 3
    mask = torch.arange(5)[None] < torch.tensor(lengths)[:, None]
    got = log_marginals(crf, emissions, mask, temperature)
    for b, want in enumerate(literal_log_marginals(crf, emissions, lengths, temperature)):
        n = lengths[b]
        assert torch.allclose(got[b, :n].exp(), want.exp(), atol=1e-10)
        assert torch.allclose(got[b, :n].exp().sum(1), torch.ones(n, dtype=torch.float64))


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_soft_target_loss_and_gradients_equal_the_literal_computation(temperature):
    lengths = [4, 2, 3]
    gen = torch.Generator().manual_seed(2)
    base = torch.randn(3, 4, N_TAGS, generator=gen, dtype=torch.float64)
    # Teacher marginals: a distribution over tags per character, with some tags ruled out.
    targets = torch.softmax(torch.randn(3, 4, N_TAGS, generator=gen, dtype=torch.float64) * 2, 2)
    targets[0, 1, 3] = 0.0
    targets = targets / targets.sum(2, keepdim=True)
    mask = torch.arange(4)[None] < torch.tensor(lengths)[:, None]

    crf = tiny_crf(3).double()
    emissions = base.clone().requires_grad_(True)
    loss = soft_target_loss(crf, emissions, mask, targets, temperature)
    loss.backward()
    got_grad, got_trans_grad = emissions.grad.clone(), crf.raw_transitions.grad.clone()

    ref_crf = tiny_crf(3).double()
    ref_emissions = base.clone().requires_grad_(True)
    literal = literal_log_marginals(ref_crf, ref_emissions, lengths, temperature)
    ref_loss = -sum((targets[b, :n] * literal[b]).sum() for b, n in enumerate(lengths)) * temperature**2
    ref_loss.backward()

    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-9)
    assert torch.allclose(got_grad, ref_emissions.grad, atol=1e-9)
    assert torch.allclose(got_trans_grad, ref_crf.raw_transitions.grad, atol=1e-9)
    # Padding gets no gradient.
    assert not got_grad[1, 2:].any() and not got_grad[2, 3:].any()


def test_teacher_equal_to_student_is_a_stationary_point_of_the_soft_loss():
    # With q = p the cross-entropy's gradient in the emissions is zero (its minimum over p is at q).
    crf = tiny_crf(4).double()
    emissions = torch.randn(2, 5, N_TAGS, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    mask = torch.ones(2, 5, dtype=torch.bool)
    targets = log_marginals(crf, emissions, mask).exp().detach()
    emissions.requires_grad_(True)
    soft_target_loss(crf, emissions, mask, targets).backward()
    assert emissions.grad.abs().max().item() < 1e-9
