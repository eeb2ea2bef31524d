"""FLAT's relative positions planned on the host for training (nn/flat/position_plan.py): the same index,
triples and runs as the tensor path, the same loss and gradients, prediction left on the tensor path,
and a training step of FLAT, DC-SAN and TENER that reads nothing back from the model's device."""

import copy
from typing import List

import pytest
import torch
from spacy.util import fix_random_seed
from torch.overrides import TorchFunctionMode

import spacy_flat.layers.torch_tagger as torch_wrapper
from spacy_flat.layers.losses import DeviceLosses
from spacy_flat.nn.flat import position_scores as position_scores_module
from spacy_flat.nn.flat.position_plan import plan_positions
from spacy_flat.nn.flat.positions import relative_positions

from ..util import SyncCounter, build_family, scores_of, tiny_examples
from .test_encoder import random_lattice

TEXTS = ["张三在北京大学读书，后来去了上海工作。"]


class HostReads(TorchFunctionMode):
    """Counts the tensor methods that bring values to the host (`tolist`, `item`, Python
    numbers and truth values): on CPU tensors they dispatch nothing SyncCounter would see."""

    READS = frozenset({"tolist", "item", "__bool__", "__int__", "__float__", "__index__"})

    def __init__(self) -> None:
        super().__init__()
        self.seen: List[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if getattr(func, "__name__", "") in self.READS:
            self.seen.append(func.__name__)
        return func(*args, **(kwargs or {}))


def chunk_rows(chunks) -> dict:
    """Each stretch of the triple table with the set of query rows scored against it."""
    out: dict = {}
    for u0, u1, rows in chunks:
        out.setdefault((u0, u1), set()).update(rows.tolist())
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("min_rows", [128, 1])
def test_the_host_plan_is_the_tensor_index(seed: int, min_rows: int, monkeypatch):
    monkeypatch.setattr(position_scores_module, "MIN_ROWS_TO_SPLIT", min_rows)
    monkeypatch.setattr(position_scores_module, "POSITION_SCORE_BUDGET", 96)  # several chunks a run
    heads, tails, mask = random_lattice(6, seed=seed)
    n_chars = int((tails == heads).logical_and(mask).sum(1).max())
    device = relative_positions(heads, tails, mask)
    planned = plan_positions(heads.numpy(), tails.numpy(), mask.numpy(), (n_chars,))
    host = planned.to(torch.device("cpu"))
    for name in ("index", "hh", "len_i", "len_j", "lengths", "mask", "query_length_start", "heads"):
        assert torch.equal(getattr(host, name), getattr(device, name)), name
    assert host.max_head == device.max_head
    th, ht, tt = device.hh + device.len_i, device.hh - device.len_j, device.hh + device.len_i - device.len_j
    lowest, highest = torch.stack([device.hh, ht, tt]).min(), torch.stack([device.hh, th, tt]).max()
    assert host.distance_range == (int(lowest), int(highest))
    assert set(planned.query_plans) == {heads.shape[1], n_chars}
    for n_queries in (heads.shape[1], n_chars):
        on_host = position_scores_module._plan_chunks(host.queries(n_queries), 2)
        on_device = position_scores_module._plan_chunks(device.queries(n_queries), 2)
        assert len(on_host) == len(on_device)
        assert chunk_rows(on_host) == chunk_rows(on_device)


def test_prediction_keeps_the_tensor_path(monkeypatch):
    """Only training plans on the host: prediction's larger batches would cost the host more."""
    nlp = build_family("flat", steps=2)
    monkeypatch.setattr(torch_wrapper, "plans_positions_on_host", lambda device: True)
    planned: List[int] = []
    monkeypatch.setattr(torch_wrapper, "plan_positions", lambda *args: planned.append(1) or plan_positions(*args))
    scores_of(nlp, TEXTS[0])
    assert planned == []
    nlp.update(tiny_examples(nlp)[:4], losses={}, sgd=False)
    assert planned


def test_a_training_step_is_the_same_with_positions_planned_on_the_host(monkeypatch):
    nlp = build_family("flat", steps=2)
    other = copy.deepcopy(nlp)
    batch = tiny_examples(nlp)[:6]
    fix_random_seed(5)
    plain = nlp.update(batch, losses={}, sgd=False)  # the gradients are kept, not stepped
    monkeypatch.setattr(torch_wrapper, "plans_positions_on_host", lambda device: True)
    fix_random_seed(5)
    planned = other.update(batch, losses={}, sgd=False)
    assert planned["flat_ner"] == pytest.approx(plain["flat_ner"], rel=1e-6)
    gradients = [[p.grad for p in tagger_module(pipeline).parameters()] for pipeline in (nlp, other)]
    assert sum(g is not None for g in gradients[0]) > 10
    for g, h in zip(*gradients):
        assert (g is None) == (h is None)
        if g is not None:
            torch.testing.assert_close(g.to_dense(), h.to_dense(), rtol=1e-5, atol=1e-7)


def tagger_module(nlp) -> torch.nn.Module:
    """The torch module inside flat_ner's model."""
    return next(node for node in nlp.get_pipe("flat_ner").model.walk() if node.shims).shims[0]._model


@pytest.mark.parametrize("architecture", ["flat", "dcsan", "tener"])
def test_a_training_step_reads_nothing_back_from_the_device(architecture: str, monkeypatch):
    """The forward, the CRF loss, backward and the optimizer's step in torch, as on a GPU:
    no value read, no `nonzero`, no boolean-mask indexing, no copy to the host (the loss
    stays on the device until it is logged)."""
    monkeypatch.setattr(torch_wrapper, "plans_positions_on_host", lambda device: True)
    nlp = build_family(architecture, steps=2)
    optimizer = nlp.create_optimizer()
    batch = tiny_examples(nlp)[:6]
    losses = DeviceLosses()
    with HostReads() as reads, SyncCounter() as syncs:
        nlp.update(batch, losses=losses, sgd=optimizer)
    assert syncs.seen == [] and reads.seen == [], (syncs.seen, reads.seen)
    assert losses.read()["flat_ner"] > 0
    # The counters see what they count: the tensor path of FLAT's positions reads sizes.
    monkeypatch.setattr(torch_wrapper, "plans_positions_on_host", lambda device: False)
    with HostReads() as reads, SyncCounter() as syncs:
        nlp.update(batch, losses=DeviceLosses(), sgd=optimizer)
    assert (syncs.seen and reads.seen) if architecture == "flat" else not (syncs.seen or reads.seen)
