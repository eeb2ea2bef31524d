"""The row-wise SGD step of the embedding tables (spacy_flat/layers/shim.py): the
same update as thinc's dense step on the rows a batch read, other rows untouched,
and the dense path kept for every other optimizer."""

import numpy
import pytest
import spacy
import torch
from thinc.api import SGD, Adam, PyTorchShim
from thinc.util import fix_random_seed

from spacy_flat.layers.shim import plain_sgd, sgd_rows

from ..util import FAMILY, small_lexicon, tiny_examples


def _table_and_sparse_grad(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    table = torch.randn(50, 8, generator=generator)
    rows = torch.tensor([3, 7, 3, 20, 49, 7, 7])  # repeated rows sum, as a batch's lookups do
    values = torch.randn(rows.shape[0], 8, generator=generator)
    grad = torch.sparse_coo_tensor(rows[None], values, table.shape, check_invariants=True)
    return table, grad


def _thinc_step(optimizer, table: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    weights, _ = optimizer((1, "table"), table.numpy().copy(), grad.to_dense().numpy().copy(), lr_scale=0.5)
    return torch.from_numpy(weights)


@pytest.mark.parametrize("clip", [0.0, 1.0, 1e6])
def test_the_rows_step_as_thinc_steps_them_and_the_others_stay(clip):
    table, grad = _table_and_sparse_grad()
    expected = _thinc_step(SGD(0.1, grad_clip=clip, L2=0.0, use_averages=False), table, grad)
    optimizer = SGD(0.1, grad_clip=clip, L2=0.0, use_averages=False)
    ours = table.clone()
    sgd_rows(optimizer, (1, "table"), ours, grad, 0.5)
    assert optimizer.nr_update[(1, "table")] == 1
    torch.testing.assert_close(ours, expected, rtol=1e-6, atol=1e-7)
    untouched = torch.ones(50, dtype=torch.bool)
    untouched[[3, 7, 20, 49]] = False
    assert torch.equal(ours[untouched], table[untouched])
    assert not torch.allclose(ours[~untouched], table[~untouched])


@pytest.mark.parametrize("decay", [False, True])
def test_l2_reaches_the_rows_a_batch_read_only(decay):
    table, grad = _table_and_sparse_grad(1)
    expected = _thinc_step(SGD(0.1, grad_clip=0.0, L2=0.01, L2_is_weight_decay=decay, use_averages=False), table, grad)
    ours = table.clone()
    sgd_rows(
        SGD(0.1, grad_clip=0.0, L2=0.01, L2_is_weight_decay=decay, use_averages=False), (1, "table"), ours, grad, 0.5
    )
    read = [3, 7, 20, 49]
    torch.testing.assert_close(ours[read], expected[read], rtol=1e-6, atol=1e-7)
    others = [r for r in range(50) if r not in read]
    assert torch.equal(ours[others], table[others])  # thinc decays them a little
    assert not torch.equal(expected[others], table[others])


def test_only_plain_sgd_steps_rows():
    assert plain_sgd(SGD(0.1, use_averages=False))
    assert plain_sgd(SGD(0.1, use_averages=True))  # averages kept row by row (test_row_averages.py)
    assert not plain_sgd(Adam(0.001))


def _train(architecture: str, optimizer, steps: int = 6, keep: bool = False):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {**FAMILY[architecture], "embed_dropout": 0.0}
    ner = nlp.add_pipe("flat_ner", config={"model": model})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    module = next(shim._model for node in ner.model.walk() for shim in node.shims)
    sparse = []
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)
        sparse.append(module.embeddings.char_embed.sparse)
    weights = {name: p.detach().clone() for name, p in module.named_parameters()}
    if keep:
        return weights, sparse, (nlp, optimizer)
    return weights, sparse


def _dense_tables(monkeypatch) -> None:
    """Train the tables as before: dense gradients through thinc's optimizer."""
    from spacy_flat.layers.shim import InPlacePyTorchShim

    monkeypatch.setattr(InPlacePyTorchShim, "begin_update", lambda self, inputs: PyTorchShim.begin_update(self, inputs))


def _assert_same(ours, dense) -> None:
    assert ours.keys() == dense.keys()
    for name in ours:
        numpy.testing.assert_allclose(ours[name].numpy(), dense[name].numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("architecture", ["lattice_lstm", "flat"])
def test_training_with_sgd_matches_the_dense_step(architecture, monkeypatch):
    """With SGD and no L2 the tables train as thinc's dense step trains them: the same weights
    after several steps, every parameter; the gradients are sparse from the first step on."""
    rows, sparse = _train(architecture, SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=False))
    assert sparse == [True] * 6
    _dense_tables(monkeypatch)
    dense, dense_sparse = _train(architecture, SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=False))
    assert dense_sparse == [False] * 6
    _assert_same(rows, dense)


def test_adam_steps_densified_table_gradients_as_dense_ones(monkeypatch):
    ours, _ = _train("lattice_lstm", Adam(0.001), steps=3)
    _dense_tables(monkeypatch)
    dense, _ = _train("lattice_lstm", Adam(0.001), steps=3)
    _assert_same(ours, dense)
