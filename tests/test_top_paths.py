"""The K-best Viterbi and the top-K path loss (crf/kbest.py), against a literal
enumeration of every tag path of a tiny CRF."""

import itertools

import numpy
import pytest
import torch

from spacy_flat.crf.kbest import crf_k_best, top_paths_loss

from .test_posteriors import ALLOWED, ENDS, N_TAGS, STARTS, tiny_crf


def every_path(crf, emissions, n, forbidden=None):
    """(score, path) of every allowed path of length n, best first, scored in float64."""
    with torch.no_grad():
        trans, start, end = crf.transitions.double(), crf.start_transitions.double(), crf.end_transitions.double()
    allowed = set(ALLOWED)
    out = []
    for path in itertools.product(range(N_TAGS), repeat=n):
        if path[0] not in STARTS or path[-1] not in ENDS or any(m not in allowed for m in zip(path, path[1:])):
            continue
        if forbidden is not None and any(forbidden[t, y] for t, y in enumerate(path)):
            continue
        score = start[path[0]] + sum(emissions[t, y] for t, y in enumerate(path))
        score = score + sum(trans[a, b] for a, b in zip(path, path[1:])) + end[path[-1]]
        out.append((float(score), list(path)))
    return sorted(out, key=lambda pair: -pair[0])


@pytest.mark.parametrize("k", [1, 3, 7, 500])
def test_k_best_paths_are_the_best_of_every_path(k):
    crf = tiny_crf(3)
    gen = torch.Generator().manual_seed(k)
    lengths = [1, 4, 2, 5, 3, 0]
    emissions = (torch.randn(len(lengths), 5, N_TAGS, generator=gen) * 2).double()
    forbidden = numpy.zeros((len(lengths), 5, N_TAGS), dtype=bool)
    forbidden[3, 1, [0, 2]] = True  # row 3's second character may take only tags 1 and 3
    paths, totals = crf_k_best(crf, emissions.numpy(), numpy.array(lengths), k, forbidden)
    assert paths.shape == (len(lengths), k, 5) and totals.shape == (len(lengths), k)
    for b, n in enumerate(lengths):
        want = every_path(crf, emissions[b].double(), n, forbidden[b]) if n else []
        found = int(numpy.isfinite(totals[b]).sum())
        # Short rows have fewer allowed paths than k: all of them, and no more.
        assert found == min(k, len(want)), (b, found, len(want))
        for rank in range(found):
            score, path = want[rank]
            assert totals[b, rank] == pytest.approx(score, abs=1e-9)
            assert paths[b, rank, :n].tolist() == path
        assert not paths[b, found:].any() and not paths[b, :, n:].any()


def test_the_best_path_is_viterbi_s():
    crf = tiny_crf(4)
    emissions = torch.randn(7, 9, N_TAGS, generator=torch.Generator().manual_seed(0)) * 3
    lengths = numpy.array([9, 1, 5, 9, 3, 7, 2])
    paths, _ = crf_k_best(crf, emissions.numpy(), lengths, 4)
    viterbi = crf.best_paths(emissions.numpy(), lengths)
    for b, n in enumerate(lengths):
        assert paths[b, 0, :n].tolist() == viterbi[b, :n].tolist()


def literal_top_paths_loss(crf, emissions, lengths, paths, weights, temperature):
    """Σ_rows Σ_k w_k (log Z - score(y_k)), every potential divided by T, log Z over every path, times T²."""
    trans, start, end = crf.transitions, crf.start_transitions, crf.end_transitions

    def score(e, path):
        s = start[path[0]] + sum(e[t, y] for t, y in enumerate(path))
        return (s + sum(trans[a, b] for a, b in zip(path, path[1:])) + end[path[-1]]) / temperature

    total = 0.0
    for b, n in enumerate(lengths):
        e = emissions[b]
        log_z = torch.logsumexp(torch.stack([score(e, p) for p in itertools.product(range(N_TAGS), repeat=n)]), 0)
        for path, w in zip(paths[b], weights[b]):
            total = total + w * (log_z - score(e, path[:n]))
    return total * temperature**2


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_top_paths_loss_and_gradients_equal_the_literal_sum(temperature):
    lengths = [4, 2, 3]
    k = 3
    gen = torch.Generator().manual_seed(5)
    base = torch.randn(len(lengths), 4, N_TAGS, generator=gen) * 2
    paths = torch.randint(0, N_TAGS, (len(lengths), k, 4), generator=gen)
    weights = torch.softmax(torch.randn(len(lengths), k, generator=gen), 1)
    weights[1, 2] = 0.0  # a row with fewer paths than k
    mask = torch.arange(4)[None] < torch.tensor(lengths)[:, None]
    results = []
    for compute in (
        lambda crf, e: top_paths_loss(crf, e, mask, paths, weights, temperature),
        lambda crf, e: literal_top_paths_loss(crf, e, lengths, paths.tolist(), weights, temperature),
    ):
        crf = tiny_crf(6)
        emissions = base.clone().requires_grad_()
        loss = compute(crf, emissions)
        loss.backward()
        results.append((loss.item(), emissions.grad.clone(), crf.raw_transitions.grad.clone()))
    (loss, d_emissions, d_trans), (want, want_emissions, want_trans) = results
    assert loss == pytest.approx(want, rel=1e-5)
    assert torch.allclose(d_emissions * mask[:, :, None], want_emissions, atol=1e-5)
    assert not d_emissions[~mask].any()
    assert torch.allclose(d_trans, want_trans, atol=1e-5)


def test_one_path_of_weight_one_is_the_crf_nll():
    crf = tiny_crf(7)
    gen = torch.Generator().manual_seed(8)
    emissions = torch.randn(3, 6, N_TAGS, generator=gen)
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6)[None] < lengths[:, None]
    tags = torch.tensor(crf.best_paths(emissions.numpy(), lengths.numpy()), dtype=torch.long)
    ours = top_paths_loss(crf, emissions, mask, tags[:, None], torch.ones(3, 1))
    assert ours.item() == pytest.approx(crf.nll(emissions, tags, mask).item(), rel=1e-6)
