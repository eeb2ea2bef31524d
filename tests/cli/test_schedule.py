"""`python -m spacy_flat schedule`: warm-up and decay counted in epochs of the user's corpus."""

import io
import math
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.util import load_config

from spacy_flat.cli.convert import convert
from spacy_flat.cli.main import main
from spacy_flat.cli.schedule import PER_EPOCH, count_batches, epoch_schedule, schedule_for
from spacy_flat.errors import FlatError

from ..util import ROOT, TINY, tiny_records

RESUME = ROOT / "configs" / "resume.cfg"
LATTICE = ROOT / "configs" / "resume_lattice_lstm.cfg"


@pytest.fixture()
def tiny_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.spacy"
    convert(TINY, path, log=io.StringIO())
    return path


def test_count_batches_follows_the_configs_batcher(tiny_corpus: Path):
    config = load_config(RESUME)
    config["training"]["batcher"] = {"@batchers": "spacy.batch_by_sequence.v1", "size": 2, "get_length": None}
    assert count_batches(config, tiny_corpus) == math.ceil(len(tiny_records()) / 2)


def test_epoch_schedule_warms_up_one_epoch_and_ends_at_the_last_step():
    assert epoch_schedule(362, 30, 1000) == {
        "training.optimizer.learn_rate.warmup_steps": 362,
        "training.optimizer.learn_rate.total_steps": 10860,
        "training.eval_frequency": 362,
        "training.max_steps": 10860,
        "training.max_epochs": 0,
    }
    # The interval divides the run, so its last step (rate zero) is evaluated.
    one_epoch = epoch_schedule(5521, 1, 2760)
    assert one_epoch["training.max_steps"] % one_epoch["training.eval_frequency"] == 0
    # A short run warms up for a tenth of it, not a whole epoch.
    assert epoch_schedule(100, 5, 50)["training.optimizer.learn_rate.warmup_steps"] == 50
    with pytest.raises(FlatError):
        epoch_schedule(0, 5, 50)


def test_schedules_counted_in_epochs_get_their_epoch_counted(tiny_corpus: Path, tmp_path: Path, capsys):
    """A schedule of one's own that holds a rate per epoch (`steps_per_epoch`) gets the epoch's length."""
    config = load_config(LATTICE)
    config["training"]["optimizer"]["learn_rate"] = {
        "@schedules": "my.epoch_decay.v1",
        "initial_rate": 0.15,
        "decay": 0.05,
        "steps_per_epoch": 1,
    }
    steps = count_batches(config, tiny_corpus)
    overrides = schedule_for(config, tiny_corpus, epochs=30)
    assert overrides == epoch_schedule(steps, 30, config["training"]["eval_frequency"], warmup=False)
    assert overrides[PER_EPOCH] == steps and overrides["training.max_steps"] == 30 * steps
    assert "training.optimizer.learn_rate.warmup_steps" not in overrides
    config.to_disk(tmp_path / "decay.cfg")
    assert main(["schedule", str(tmp_path / "decay.cfg"), str(tiny_corpus), "--epochs", "30"]) == 0
    out = capsys.readouterr().out
    assert f"the rate decays after every {steps} steps" in out
    assert out.strip().splitlines()[-1].startswith(f"--{PER_EPOCH} {steps} ")


def test_schedule_command_writes_a_config_that_trains_to_a_zero_rate(tiny_corpus: Path, tmp_path: Path, capsys):
    out = tmp_path / "scheduled.cfg"
    assert main(["schedule", str(RESUME), str(tiny_corpus), "--epochs", "4", "--output", str(out)]) == 0
    steps = count_batches(RESUME, tiny_corpus)
    written = load_config(out)
    rate = written["training"]["optimizer"]["learn_rate"]
    assert (rate["warmup_steps"], rate["total_steps"]) == (min(steps, steps * 4 // 10), steps * 4)
    assert (written["training"]["max_epochs"], written["training"]["max_steps"]) == (0, steps * 4)
    assert written["training"]["eval_frequency"] == min(steps, load_config(RESUME)["training"]["eval_frequency"])
    assert f"{steps} batches per epoch" in capsys.readouterr().out
    # Everything else is the original config.
    written["training"] = load_config(RESUME)["training"]
    assert written == load_config(RESUME)


def test_schedule_command_prints_train_overrides(tiny_corpus: Path, capsys):
    assert main(["schedule", str(RESUME), str(tiny_corpus), "--epochs", "30"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("--training.optimizer.learn_rate.warmup_steps ")
    # The configs count their runs in steps (max_epochs = 0): the epochs must be said.
    assert main(["schedule", str(RESUME), str(tiny_corpus)]) == 1
    assert "pass the number of epochs the run trains (--epochs)" in capsys.readouterr().err


def test_schedule_errors_name_the_file(tiny_corpus: Path, tmp_path: Path, capsys):
    assert main(["schedule", str(RESUME), str(tmp_path / "missing.spacy"), "--epochs", "3"]) == 1
    assert "missing.spacy: no such training DocBin" in capsys.readouterr().err
    empty = tmp_path / "empty.spacy"
    DocBin().to_disk(empty)
    with pytest.raises(FlatError, match=r"empty\.spacy: the DocBin holds no documents"):
        count_batches(RESUME, empty)
    config = load_config(RESUME)
    config["training"]["optimizer"]["learn_rate"] = 0.001
    with pytest.raises(FlatError, match="neither a warm-up schedule"):
        schedule_for(config, tiny_corpus)


def test_count_batches_uses_the_configs_tokenizer(tiny_corpus: Path):
    """Examples are as long as `nlp.make_doc(text)`: jieba's words, not characters."""
    config = load_config(RESUME)
    config["training"]["batcher"]["size"] = 40
    by_char = count_batches(config, tiny_corpus)
    config["nlp"]["tokenizer"]["segmenter"] = "jieba"
    assert count_batches(config, tiny_corpus) < by_char


@pytest.mark.slow
def test_a_scheduled_run_evaluates_its_last_step(tiny_corpus: Path, tmp_path: Path):
    """spacy train evaluates at steps 0, f, 2f, ...: a run of whole epochs would
    end at step N - 1 unevaluated. The schedule makes it stop at step N after
    evaluating it, so model-best can be the fully trained model."""
    from spacy.cli.train import train

    steps = count_batches(RESUME, tiny_corpus)
    overrides = schedule_for(RESUME, tiny_corpus, epochs=2)
    seen: list = []

    @spacy.registry.loggers("spacy-flat-tests.steps.v1")
    def steps_logger():  # type: ignore[no-untyped-def]
        def setup(nlp, stdout=None, stderr=None):  # type: ignore[no-untyped-def]
            return (lambda info: seen.append((info["step"], info["score"])) if info else None), (lambda: None)

        return setup

    train(
        RESUME,
        tmp_path / "out",
        overrides={
            **overrides,
            "paths.train": str(tiny_corpus),
            "paths.dev": str(tiny_corpus),
            "components.flat_ner.model.width": 32,
            "components.flat_ner.model.n_heads": 4,
            "components.flat_ner.model.ffn_width": 64,
            "training.logger": {"@loggers": "spacy-flat-tests.steps.v1"},
        },
    )
    last_step, last_score = seen[-1]
    assert last_step == 2 * steps and last_score is not None
