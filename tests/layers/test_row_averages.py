"""Parameter averages of the embedding tables kept row by row (spacy_flat/layers/row_averages.py):
thinc's own averages whenever they are read, and a checkpoint's restore that goes on exactly."""

import math

import numpy
import pytest
import torch
from thinc.api import SGD

from spacy_flat.layers.row_averages import MAX_DECAY, RowAverages, decay, log_decay_product
from spacy_flat.layers.shim import sgd_rows

from .test_sparse_update import _assert_same, _dense_tables, _train


@pytest.mark.parametrize(
    "since,until", [(0, 1), (0, 40), (3, 3), (17, 250), (89_980, 90_020), (89_990, 89_991), (95_000, 95_100)]
)
def test_the_closed_form_product_is_the_product_of_thinc_decays(since, until):
    literal = sum(math.log(decay(u)) for u in range(since + 1, until + 1))
    ours = float(log_decay_product(torch.tensor([since]), until)[0])
    assert ours == pytest.approx(literal, rel=1e-9, abs=1e-9)


def test_thinc_decay_is_the_one_copied():
    from thinc.api import NumpyOps

    for step in (1, 2, 10, 5_000, 89_990, 89_991, 200_000):
        ema = numpy.zeros(1, dtype="f")
        NumpyOps().update_averages(ema, numpy.ones(1, dtype="f"), step)
        assert float(ema[0]) == pytest.approx(1 - decay(step), rel=1e-5)
    assert decay(10**7) == MAX_DECAY


def _sparse_steps(steps: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        rows = torch.randint(0, 30, (6,), generator=generator)
        values = torch.randn(6, 4, generator=generator)
        yield torch.sparse_coo_tensor(rows[None], values, (30, 4), check_invariants=True)


def _thinc_run(steps: int):
    optimizer = SGD(0.1, grad_clip=1.0, L2=0.0, use_averages=True)
    table = torch.randn(30, 4, generator=torch.Generator().manual_seed(5)).numpy()
    for grad in _sparse_steps(steps):
        table, _ = optimizer((1, "table"), table, grad.to_dense().numpy().copy())
    return torch.from_numpy(table), torch.from_numpy(optimizer.averages[(1, "table")])


def test_row_wise_averages_equal_thinc_dense_averages_when_read():
    expected_table, expected_average = _thinc_run(25)
    optimizer = SGD(0.1, grad_clip=1.0, L2=0.0, use_averages=True)
    table = torch.randn(30, 4, generator=torch.Generator().manual_seed(5))
    records: dict = {}
    for grad in _sparse_steps(25):
        sgd_rows(optimizer, (1, "table"), table, grad, 1.0, records)
    torch.testing.assert_close(table, expected_table, rtol=1e-6, atol=1e-6)
    record = records["table"]
    stale = record.exact_at < record.step
    assert stale.any()  # rows no recent step touched are brought up to date when read...
    stored = torch.from_numpy(optimizer.averages[(1, "table")]).clone()
    assert not torch.allclose(stored[stale], expected_average[stale])
    torch.testing.assert_close(record.current(table), expected_average, rtol=1e-5, atol=1e-6)
    assert torch.equal(torch.from_numpy(optimizer.averages[(1, "table")]), stored)  # ...in a copy


def test_averaged_rows_need_the_records():
    table, grad = torch.zeros(30, 4), next(iter(_sparse_steps(1)))
    with pytest.raises(ValueError, match="needs the records"):
        sgd_rows(SGD(0.1, use_averages=True), (1, "table"), table, grad, 1.0)


def test_a_record_writes_through_to_the_optimizers_array():
    average = numpy.zeros((3, 2), dtype="f")
    record = RowAverages.exact(average, torch.from_numpy(average), step=0)
    record.update(torch.tensor([1]), torch.zeros(1, 2), torch.ones(1, 2), step=1)
    assert average[1].tolist() == pytest.approx([1 - decay(1)] * 2)
    assert average[0].tolist() == [0.0, 0.0]


def _averaged(nlp, optimizer):
    """Every parameter's average, read as evaluation and saving read it (`use_params`)."""
    module = next(shim._model for node in nlp.get_pipe("flat_ner").model.walk() for shim in node.shims)
    with nlp.use_params(optimizer.averages):
        return {name: p.detach().clone() for name, p in module.named_parameters()}


def test_training_with_averages_matches_thincs_dense_averages(monkeypatch):
    """A Lattice LSTM trained with averaged SGD: the same weights and the same averages of every
    parameter, tables included, as with thinc's dense step; reading them leaves the weights trained."""
    weights, sparse_flags, (nlp, optimizer) = _train("lattice_lstm", SGD(0.05, grad_clip=5.0, L2=0.0), keep=True)
    assert sparse_flags == [True] * 6
    shim = next(shim for node in nlp.get_pipe("flat_ner").model.walk() for shim in node.shims)
    assert set(shim.row_averages) == {"embeddings.char_embed.weight", "embeddings.word_embed.table.weight"}
    averages = _averaged(nlp, optimizer)
    _dense_tables(monkeypatch)
    dense_weights, _, dense_run = _train("lattice_lstm", SGD(0.05, grad_clip=5.0, L2=0.0), keep=True)
    _assert_same(weights, dense_weights)
    _assert_same(averages, _averaged(*dense_run))
    table = "embeddings.char_embed.weight"
    assert not torch.equal(averages[table], weights[table])
    assert torch.equal(shim._model.embeddings.char_embed.weight.detach(), weights[table])


def test_a_row_stepped_at_every_update_is_not_rounded_through_a_factor_of_one():
    expected = torch.zeros(2, 3)
    average = numpy.zeros((2, 3), dtype="f")
    record = RowAverages.exact(average, torch.from_numpy(average), step=0)
    generator = torch.Generator().manual_seed(3)
    weights = torch.zeros(2, 3)
    for step in range(1, 200):
        after = weights + torch.randn(2, 3, generator=generator)
        record.update(torch.tensor([0, 1]), weights, after, step)
        expected -= (1.0 - decay(step)) * (expected - after)  # thinc's arithmetic, in float32
        weights = after
    assert torch.equal(record.view, expected)


def test_an_update_out_of_step_is_refused():
    average = numpy.zeros((3, 2), dtype="f")
    record = RowAverages.exact(average, torch.from_numpy(average), step=4)
    with pytest.raises(RuntimeError, match="out of step"):
        record.update(torch.tensor([1]), torch.zeros(1, 2), torch.ones(1, 2), step=6)


def test_an_average_in_other_memory_gets_every_update_written_back():
    """Where the table's device is not the array's (thinc keeps MPS arrays on the host), the record
    steps its own tensor and writes the rows it updated into the optimizer's array."""
    average = numpy.zeros((4, 2), dtype="f")
    record = RowAverages.exact(average, torch.zeros(4, 2), step=0)
    assert not record.shared
    record.update(torch.tensor([2]), torch.zeros(1, 2), torch.ones(1, 2), step=1)
    assert average[2].tolist() == pytest.approx([1 - decay(1)] * 2)
    assert numpy.array_equal(average, record.view.numpy())


def _pipeline():
    import spacy
    from thinc.util import fix_random_seed

    from ..util import FAMILY, small_lexicon, tiny_examples

    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={"model": {**FAMILY["lattice_lstm"], "embed_dropout": 0.0}})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    shim = next(shim for node in ner.model.walk() for shim in node.shims)
    # Alternate halves of the data, so that some rows of the tables wait several steps for an update.
    halves = [examples[: len(examples) // 2], examples[len(examples) // 2 :]]
    return nlp, shim, halves


def test_a_checkpoint_of_the_row_averages_read_back_goes_on_bit_for_bit():
    """The optimizer's state and the records through msgpack (read-only arrays), into a new optimizer:
    the averages then read the same as those of the run never stopped."""
    import srsly

    from spacy_flat.training.optimizer_state import (
        optimizer_state,
        parameter_names,
        restore_optimizer,
        restore_row_averages,
        row_average_state,
    )

    def sgd():
        return SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=True)

    nlp, shim, halves = _pipeline()
    optimizer = sgd()
    for step in range(8):
        nlp.update(halves[step % 2], sgd=optimizer)
    never_stopped = _averaged(nlp, optimizer)

    nlp, shim, halves = _pipeline()
    optimizer = sgd()
    for step in range(5):
        nlp.update(halves[step % 2], sgd=optimizer)
    assert any(bool((record.exact_at < record.step).any()) for record in shim.row_averages.values())
    names = parameter_names(nlp)
    saved = srsly.msgpack_loads(
        srsly.msgpack_dumps(
            {"optimizer": optimizer_state(optimizer, names, 5), "rows": row_average_state(nlp, optimizer, names)}
        )
    )
    optimizer = sgd()
    restore_optimizer(optimizer, saved["optimizer"], names, replay_check=True)
    restore_row_averages(nlp, optimizer, saved["rows"], names)
    for step in range(5, 8):
        nlp.update(halves[step % 2], sgd=optimizer)
    resumed = _averaged(nlp, optimizer)
    for name in never_stopped:
        assert torch.equal(resumed[name], never_stopped[name]), name


def test_a_table_stepped_densely_after_rows_goes_on_from_exact_averages(monkeypatch):
    """Rows first, then thinc's dense step (as if the gradients came back dense): the averages end as a
    run stepped densely throughout, and the record is given up."""
    nlp, shim, halves = _pipeline()
    optimizer = SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=True)
    for step in range(4):
        nlp.update(halves[step % 2], sgd=optimizer)
    assert shim.row_averages
    _dense_tables(monkeypatch)
    for module in shim._model.modules():
        if isinstance(module, torch.nn.Embedding):
            module.sparse = False
    for step in range(4, 7):
        nlp.update(halves[step % 2], sgd=optimizer)
    assert not shim.row_averages
    mixed = _averaged(nlp, optimizer)

    nlp, shim, halves = _pipeline()
    optimizer = SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=True)
    for step in range(7):
        nlp.update(halves[step % 2], sgd=optimizer)
    _assert_same(mixed, _averaged(nlp, optimizer))


def test_use_params_entered_twice_swaps_once():
    nlp, _, halves = _pipeline()
    optimizer = SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=True)
    for step in range(3):
        nlp.update(halves[step % 2], sgd=optimizer)
    once = _averaged(nlp, optimizer)
    with nlp.use_params(optimizer.averages):
        twice = _averaged(nlp, optimizer)
    for name in once:
        assert torch.equal(once[name], twice[name]), name


def test_two_components_keep_their_own_records_through_a_checkpoint():
    """Two Lattice LSTM pipes, each with its own shim and tables: the checkpoint's records are keyed by
    each shim's parameters' stable names, so each pipe gets its own back and both go on bit for bit."""
    import spacy
    import srsly
    from thinc.util import fix_random_seed

    from spacy_flat.training.optimizer_state import (
        optimizer_state,
        parameter_names,
        restore_optimizer,
        restore_row_averages,
        row_average_state,
    )

    from ..util import FAMILY, small_lexicon, tiny_examples

    pipes = ("flat_ner", "flat_ner_b")

    def pipeline():
        fix_random_seed(0)
        nlp = spacy.blank("zh")
        for name in pipes:
            nlp.add_pipe("flat_ner", name=name, config={"model": {**FAMILY["lattice_lstm"], "embed_dropout": 0.0}})
        examples = tiny_examples(nlp)
        for name in pipes:
            nlp.get_pipe(name).initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
        # The pipes see different halves at each step, so their tables' rows fall out of step differently.
        return nlp, [examples[: len(examples) // 2], examples[len(examples) // 2 :]]

    def step(nlp, halves, k, optimizer):
        for j, name in enumerate(pipes):
            nlp.get_pipe(name).update(halves[(k + j) % 2], sgd=optimizer)

    def averaged(nlp, optimizer):
        with nlp.use_params(optimizer.averages):
            return {
                f"{name}:{key}": p.detach().clone()
                for name in pipes
                for node in nlp.get_pipe(name).model.walk()
                for shim in node.shims
                for key, p in shim._model.named_parameters()
            }

    def sgd():
        return SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=True)

    nlp, halves = pipeline()
    optimizer = sgd()
    for k in range(8):
        step(nlp, halves, k, optimizer)
    never_stopped = averaged(nlp, optimizer)

    nlp, halves = pipeline()
    optimizer = sgd()
    for k in range(5):
        step(nlp, halves, k, optimizer)
    names = parameter_names(nlp)
    rows = row_average_state(nlp, optimizer, names)
    assert {name.split("/", 1)[0] for name in rows} == set(pipes)
    saved = srsly.msgpack_loads(srsly.msgpack_dumps({"optimizer": optimizer_state(optimizer, names, 5), "rows": rows}))
    optimizer = sgd()
    restore_optimizer(optimizer, saved["optimizer"], names, replay_check=True)
    restore_row_averages(nlp, optimizer, saved["rows"], names)
    for k in range(5, 8):
        step(nlp, halves, k, optimizer)
    resumed = averaged(nlp, optimizer)
    table = "embeddings.char_embed.weight"
    assert not torch.equal(never_stopped[f"flat_ner:{table}"], never_stopped[f"flat_ner_b:{table}"])
    for name in never_stopped:
        assert torch.equal(resumed[name], never_stopped[name]), name
