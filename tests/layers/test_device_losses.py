"""Losses left on the model's device until read (layers/losses.py): the same numbers as the
floats' running sum, bit for bit on a CPU, and flat_ner's update adding its loss without reading it."""

import copy

import numpy
import torch
from spacy.util import fix_random_seed

from spacy_flat.layers.losses import DeviceLosses

from ..util import SyncCounter, build_small, tiny_examples


def test_the_device_sum_is_the_float_sum_bit_for_bit():
    rng = numpy.random.default_rng(0)
    values = rng.gamma(2.0, 30.0, size=200).astype("float32")
    floats = {"flat_ner": 7.25}
    device = DeviceLosses(floats)
    for value in values:
        floats["flat_ner"] += float(value)
        device.add("flat_ner", torch.tensor(value))
    assert "flat_ner" in device._pending  # nothing read yet
    assert device.read()["flat_ner"] == floats["flat_ner"]
    assert not device._pending


def test_floats_and_tensors_mix_and_reading_a_name_brings_it_back():
    losses = DeviceLosses()
    losses.add("a", 1.5)
    losses.add("a", torch.tensor(2.0))
    losses.add("a", 0.25)
    losses.add("b", torch.tensor(4.0))
    assert losses["a"] == 3.75 and isinstance(losses["a"], float)
    assert "b" in losses._pending
    losses["b"] = 1.0  # a value set outright replaces the pending sum
    assert losses.read() == {"a": 3.75, "b": 1.0}
    losses["a"] += 1.0  # spaCy's components add floats this way
    assert losses["a"] == 4.75


def test_flat_ner_leaves_its_loss_on_the_device_and_it_is_the_same():
    nlp = build_small(steps=2)
    other = copy.deepcopy(nlp)
    batch = tiny_examples(nlp)[:6]
    fix_random_seed(3)
    plain = nlp.update(batch, losses={})
    fix_random_seed(3)
    device = DeviceLosses()
    with SyncCounter() as counter:
        other.update(batch, losses=device)
    assert "flat_ner" in device._pending
    # The encoder's position index still reads sizes (their own reads); the loss adds none.
    assert counter.seen.count("_local_scalar_dense.default") <= 4
    assert device.read()["flat_ner"] == plain["flat_ner"] > 0
