"""The group loop (layers/flat_model.py): a batch split under the attention budget
scores and trains as one batch would."""

import pickle

import numpy
import pytest
from spacy.training import Example

import spacy_flat.layers.flat_model as groups_module
from spacy_flat.lattice.batching import PADDING_SLACK, budget_batches
from spacy_flat.layers.flat_model import group_lengths

from ..util import FAMILY, one_segment_per_group, tiny_examples


def test_groups_predict_as_one_batch(trained_nlp, monkeypatch):
    ner = trained_nlp.get_pipe("flat_ner")
    docs = [eg.predicted for eg in tiny_examples(trained_nlp)]
    segments, _ = ner.segmenter.segments(docs)
    whole = ner.model.predict(segments)
    seen = one_segment_per_group(monkeypatch)
    split = ner.model.predict(segments)
    assert seen == [len(segments)]
    for row, segment in enumerate(segments):  # beyond a segment's length is padding
        numpy.testing.assert_allclose(split[row, : len(segment)], whole[row, : len(segment)], rtol=1e-5, atol=1e-5)


def test_groups_train_as_one_batch_with_recomputed_attention(trained_nlp, monkeypatch):
    """Several groups in training recompute attention in backward; the step is
    the same as with one group."""
    examples = tiny_examples(trained_nlp)
    steps = []
    for split in (False, True):
        nlp = pickle.loads(pickle.dumps(trained_nlp))
        if split:
            seen = one_segment_per_group(monkeypatch)
        egs = [Example(nlp.make_doc(eg.predicted.text), eg.reference) for eg in examples]
        loss = nlp.update(egs, sgd=nlp.resume_training())["flat_ner"]
        module = nlp.get_pipe("flat_ner").tagger.module
        steps.append((loss, {n: p.detach().numpy().copy() for n, p in module.named_parameters()}))
    assert seen == [len(examples)]
    (loss_a, weights_a), (loss_b, weights_b) = steps
    assert loss_a == numpy.float32(loss_b) or abs(loss_a - loss_b) < 1e-4 * abs(loss_a)
    # Adam divides by the gradients' own scale, so float32 rounding of a near-zero
    # gradient can move a weight by ~1e-6; a wrong recomputation moves it by the step (~1e-3).
    for name, value in weights_a.items():
        numpy.testing.assert_allclose(weights_b[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_recompute_is_used_only_for_several_groups_in_training(trained_nlp, monkeypatch):
    ner = trained_nlp.get_pipe("flat_ner")
    flags: list = []
    tagger = ner.model.get_ref("tagger")
    forward = tagger._func

    def spy(model, batch, is_train):
        flags.append(batch.recompute)
        return forward(model, batch, is_train)

    monkeypatch.setattr(tagger, "_func", spy)
    segments, _ = ner.segmenter.segments([eg.predicted for eg in tiny_examples(trained_nlp)][:3])
    ner.model.predict(segments)
    ner.model.begin_update(segments)
    one_segment_per_group(monkeypatch)
    ner.model.predict(segments)
    ner.model.begin_update(segments)
    assert flags == [False, False, False, False, False, True, True, True]


@pytest.mark.parametrize("seed", range(5))
def test_prediction_groups_bound_their_padding(seed):
    lengths = [int(n) for n in numpy.random.default_rng(seed).integers(1, 110, size=64)]
    whole = list(budget_batches(lengths))
    slack = list(budget_batches(lengths, padding_slack=PADDING_SLACK))
    for groups in (whole, slack):
        assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    for group in slack:
        longest = max(lengths[i] for i in group)
        own = sum(lengths[i] ** 2 for i in group)
        assert len(group) == 1 or len(group) * longest**2 <= PADDING_SLACK * own
    assert len(whole) == 1 < len(slack)
    assert list(budget_batches([10, 11, 12, 100, 101], padding_slack=1.5)) == [[0, 1, 2], [3, 4]]


def test_device_prediction_takes_a_batch_in_one_group():
    """On a GPU a batch of 256 mixed-length docs is one encoder call; on the CPU
    it is split to bound padding; training groups the same on both."""
    lengths = [int(n) for n in numpy.random.default_rng(0).integers(1, 150, size=256)]
    on_device = group_lengths(lengths, is_train=False, on_device=True)
    on_cpu = group_lengths(lengths, is_train=False, on_device=False)
    assert len(on_device) == 1 < len(on_cpu)
    for groups in (on_device, on_cpu):
        assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    assert group_lengths(lengths, True, True) == group_lengths(lengths, True, False)
    assert all(len(group) <= 64 for group in group_lengths(lengths, True, True))
    # Over the device's budget, long docs still split.
    assert len(group_lengths([3000] * 20, is_train=False, on_device=True)) > 1


@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_device_groups_predict_as_cpu_groups(architecture, family_nlp, monkeypatch):
    """The padding a device group adds changes no score, for every architecture (run
    here on the CPU; the GPU lane compares the entities on a GPU)."""
    nlp = family_nlp(architecture)
    ner = nlp.get_pipe("flat_ner")
    docs = [eg.predicted for eg in tiny_examples(nlp)]
    segments, _ = ner.segmenter.segments(docs)
    assert not groups_module.groups_for_device(ner.model.ops)
    cpu = ner.model.predict(segments)
    calls = []
    grouped = groups_module.group_lengths
    monkeypatch.setattr(groups_module, "groups_for_device", lambda ops: True)
    monkeypatch.setattr(groups_module, "group_lengths", lambda *a: calls.append(a) or grouped(*a))
    device = ner.model.predict(segments)
    assert calls and calls[0][2] is True and len(grouped(*calls[0])) == 1 < len(grouped(*calls[0][:2], False))
    for row, segment in enumerate(segments):
        numpy.testing.assert_allclose(device[row, : len(segment)], cpu[row, : len(segment)], rtol=1e-5, atol=1e-5)
