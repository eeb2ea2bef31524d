"""The constrained CRF (crf.py): decoded sequences are always valid, and its
loss and Viterbi equal pytorch-crf's."""

import torch

from spacy_flat.crf.likelihood import NegLogLikelihood
from spacy_flat.crf.model import FORBIDDEN, ConstrainedCRF
from spacy_flat.decoding.tags import TagSet

from ..crf_reference import ReferenceCRF


def is_valid(tags):
    prev = "O"
    for tag in [*tags, "O"]:
        inside = prev[0] in "BI"
        if inside and not (tag[0] in "IL" and tag[2:] == prev[2:]):
            return False
        if not inside and tag[0] not in "OBU":
            return False
        prev = tag
    return True


def test_viterbi_is_always_valid_even_with_adversarial_scores():
    tags = TagSet(["A", "B", "C"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        emissions = torch.randn(8, 15, len(tags), generator=gen) * 20
        # Push towards invalid tags: I- and L- everywhere.
        emissions[:, :, [i for i, t in enumerate(tags.tags) if t[0] in "IL"]] += 30
        mask = torch.ones(8, 15, dtype=torch.bool)
        mask[3, 5:] = False
        for row in crf.viterbi(emissions, mask):
            assert is_valid([tags.tags[i] for i in row]), trial


def test_forbidden_transitions_cannot_be_learned():
    tags = TagSet(["A"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    with torch.no_grad():
        crf.raw_transitions.fill_(100.0)
    o, b = tags.index["O"], tags.index["B-A"]
    assert crf.transitions[b, o] < -1000 and crf.transitions[o, b] == 100.0


def test_numpy_viterbi_equals_pytorch_crf_decode():
    tags = TagSet(["A", "B"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        crf.raw_transitions.normal_(generator=gen)
    for trial in range(10):
        emissions = torch.randn(6, 12, len(tags), generator=gen) * 3
        lengths = torch.randint(1, 13, (6,), generator=gen)
        mask = torch.arange(12)[None] < lengths[:, None]
        expected = ReferenceCRF(crf).decode(emissions, mask=mask)
        assert crf.viterbi(emissions, mask) == expected, trial


def test_nll_equals_pytorch_crf_likelihood_and_gradients():
    tags = TagSet(["A", "B", "C"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for param in crf.parameters():
            param.normal_(generator=gen)
    for trial in range(10):
        batch, length = 5, 14
        lengths = torch.randint(1, length + 1, (batch,), generator=gen)
        lengths[trial % batch] = 1 if trial % 2 else length
        mask = torch.arange(length)[None] < lengths[:, None]
        gold = torch.randint(0, len(tags), (batch, length), generator=gen)
        # Every other trial with emission gaps far beyond float32's exp range (e^-87).
        scale = 3.0 if trial % 2 else 60.0
        emissions = (torch.randn(batch, length, len(tags), generator=gen) * scale).requires_grad_()
        ours = crf.nll(emissions, gold, mask)
        ours_grads = torch.autograd.grad(ours, [emissions, *crf.parameters()])
        theirs = -ReferenceCRF(crf).forward(emissions, gold, mask=mask, reduction="sum")
        theirs_grads = torch.autograd.grad(theirs, [emissions, *crf.parameters()])
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-3)
        for mine, reference in zip(ours_grads, theirs_grads):
            torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-4)


def test_nll_ignores_padding_emissions_and_tags():
    tags = TagSet(["A"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    gen = torch.Generator().manual_seed(3)
    emissions = torch.randn(2, 6, len(tags), generator=gen)
    gold = torch.zeros(2, 6, dtype=torch.long)
    mask = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    padded = emissions.clone()
    padded[1, 3] = 1e3
    padded[1, 4] = float("inf")
    padded[1, 5] = float("nan")
    noisy_gold = gold.clone()
    noisy_gold[1, 3:] = tags.index["I-A"]
    padded.requires_grad_()
    loss = crf.nll(padded, noisy_gold, mask)
    torch.testing.assert_close(loss, crf.nll(emissions, gold, mask))
    (grad,) = torch.autograd.grad(loss, [padded])
    assert grad[1, 3:].abs().max() == 0
    assert torch.isfinite(grad).all()


def test_nll_in_float32_as_on_mps_keeps_gradients_finite(monkeypatch):
    from spacy_flat.crf import model as crf_module

    monkeypatch.setattr(crf_module, "recursion_dtype", lambda device: torch.float32)
    tags = TagSet(["A", "B"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    gen = torch.Generator().manual_seed(5)
    # Emission gaps far beyond float32's exp range: tags fall out of range, and must not give NaN or inf.
    emissions = (torch.randn(4, 16, len(tags), generator=gen) * 60).requires_grad_()
    gold = torch.randint(0, len(tags), (4, 16), generator=gen)
    loss = crf.nll(emissions, gold, torch.ones(4, 16, dtype=torch.bool))
    (grad,) = torch.autograd.grad(loss, [emissions])
    assert torch.isfinite(loss) and torch.isfinite(grad).all()


def autograd_nll(crf, emissions, tags, mask):
    """The NLL as `nll` computed it before its closed-form backward: the forward
    algorithm recorded step by step under autograd. The reference for its gradients."""
    emissions = emissions.float().masked_fill(~mask[:, :, None], 0.0)
    transitions, start, end = crf.transitions, crf.start_transitions, crf.end_transitions
    last = mask.sum(1) - 1
    log_z = ConstrainedCRF._log_partition(emissions, transitions, start, end, last)
    return (log_z - ConstrainedCRF._gold_score(emissions, tags, mask, transitions, start, end, last)).sum()


def random_batch(n_tags, gen, batch=6, length=12, scale=3.0):
    """Ragged rows of 1 to `length` characters (one of each extreme), gold tags
    (padding holds arbitrary ids) and emissions, every other row confident: one
    tag per character ahead of the rest by far more than float32's exp range."""
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    lengths[0], lengths[1] = 1, length
    mask = torch.arange(length)[None] < lengths[:, None]
    gold = torch.randint(0, n_tags, (batch, length), generator=gen)
    emissions = torch.randn(batch, length, n_tags, generator=gen) * scale
    sure = torch.randint(0, n_tags, (batch, length, 1), generator=gen)
    emissions[::2].scatter_add_(2, sure[::2], torch.full_like(sure[::2], 150.0, dtype=emissions.dtype))
    return emissions, gold, mask


def test_closed_form_nll_equals_autograd_and_pytorch_crf():
    tags = TagSet(["A", "B", "C"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    gen = torch.Generator().manual_seed(7)
    params = [crf.raw_transitions, crf.raw_start_transitions, crf.raw_end_transitions]
    for trial in range(12):
        with torch.no_grad():
            for param in params:
                param.normal_(generator=gen).mul_(1 + trial % 3)
        emissions, gold, mask = random_batch(len(tags), gen, scale=(3.0, 20.0, 60.0)[trial % 3])
        emissions.requires_grad_()
        ours = crf.nll(emissions, gold, mask)
        ours_grads = torch.autograd.grad(ours, [emissions, *params])
        for reference in (autograd_nll, lambda c, e, g, m: -ReferenceCRF(c).forward(e, g, mask=m, reduction="sum")):
            theirs = reference(crf, emissions, gold, mask)
            theirs_grads = torch.autograd.grad(theirs, [emissions, *params])
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-3)
            for mine, expected in zip(ours_grads, theirs_grads):
                torch.testing.assert_close(mine, expected, rtol=1e-4, atol=1e-4)
        assert ours_grads[0][~mask].abs().max() == 0
        # Forbidden moves, starts and ends get no gradient, as through `masked_fill`.
        for grad, banned in zip(ours_grads[1:], [crf.forbidden, crf.no_start, crf.no_end]):
            assert grad[banned].abs().max() == 0 and grad[~banned].abs().max() > 0


def test_closed_form_nll_passes_gradcheck_in_float64():
    tags = TagSet(["A"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    gen = torch.Generator().manual_seed(8)
    emissions, gold, mask = random_batch(len(tags), gen, batch=3, length=4)
    emissions = (emissions.double() / 50).requires_grad_()  # no confident rows: finite differences need curvature
    raw = [p.detach().double().normal_(generator=gen).requires_grad_() for p in crf.parameters()]
    banned = [crf.no_start, crf.no_end, crf.forbidden]  # in `crf.parameters()`'s order

    def loss(emissions, *params):
        start, end, transitions = [p.masked_fill(b, FORBIDDEN) for p, b in zip(params, banned)]
        return NegLogLikelihood.apply(emissions, transitions, start, end, gold, mask, torch.float64)

    assert torch.autograd.gradcheck(loss, (emissions, *raw))


def test_closed_form_nll_without_gradients_keeps_its_value():
    tags = TagSet(["A", "B"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    emissions, gold, mask = random_batch(len(tags), torch.Generator().manual_seed(9))
    expected = autograd_nll(crf, emissions, gold, mask)
    crf.requires_grad_(False)
    torch.testing.assert_close(crf.nll(emissions, gold, mask), expected)
