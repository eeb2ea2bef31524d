"""The command line: the same commands under spaCy's CLI (`python -m spacy flat …`, through the
`spacy_cli` entry point) and as `python -m spacy_flat …`; config overrides parsed as spacy train's."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import typer
from spacy.cli._util import app

from spacy_flat.cli.main import main

from ..util import ROOT

COMMANDS = [
    "annotate",
    "calibrate",
    "convert",
    "evaluate",
    "model-card",
    "pretrain-vectors",
    "schedule",
    "train",
    "verify-assets",
]
CONFIG = ROOT / "configs" / "resume.cfg"


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def listed(help_text: str) -> List[str]:
    """The command names of a group's --help, in the order listed."""
    lines = help_text.split("Commands:", 1)[1].splitlines()
    return [line.split()[0] for line in lines if line.startswith("  ") and line.split()]


@pytest.mark.slow
def test_spacy_lists_flat_and_its_commands_through_the_entry_point():
    """No `import spacy_flat` by hand: spaCy's setup_cli loads the `spacy_cli` entry point."""
    spacy_help = run("-m", "spacy", "--help")
    assert spacy_help.returncode == 0, spacy_help.stderr
    assert "flat" in listed(spacy_help.stdout)
    flat_help = run("-m", "spacy", "flat", "--help")
    assert flat_help.returncode == 0, flat_help.stderr
    assert "Usage: python -m spacy flat [OPTIONS] COMMAND" in flat_help.stdout
    assert listed(flat_help.stdout) == COMMANDS


@pytest.mark.slow
def test_python_m_spacy_flat_runs_the_same_group():
    done = run("-m", "spacy_flat", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m spacy_flat [OPTIONS] COMMAND" in done.stdout
    assert listed(done.stdout) == COMMANDS


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> List[Dict[str, Any]]:
    """The calls `train` makes to the training loop, which is not run."""
    from spacy_flat.training import loop

    calls: List[Dict[str, Any]] = []
    monkeypatch.setattr(loop, "train", lambda config, output, **kwargs: calls.append({"config": config, **kwargs}))
    monkeypatch.delenv("SPACY_CONFIG_OVERRIDES", raising=False)
    return calls


def test_train_parses_config_overrides_as_spacy_train(captured: List[Dict[str, Any]], tmp_path: Path):
    args = ["train", str(CONFIG), "--output", str(tmp_path), "--paths.train", "x.spacy", "--keep", "5"]
    args += ["--training.max_steps", "3", "--training.dropout=0.2"]
    assert main(args) == 0
    # Under spaCy's CLI the command parses the same arguments.
    with pytest.raises(SystemExit) as stop:
        typer.main.get_command(app).main(args=["flat", *args], prog_name="python -m spacy")
    assert stop.value.code == 0
    for call in captured:
        assert call["overrides"] == {"paths.train": "x.spacy", "training.max_steps": 3, "training.dropout": 0.2}
        assert call["config"] == CONFIG and call["settings"].keep == 5 and call["use_gpu"] == -1
    assert len(captured) == 2


def test_an_override_without_a_section_is_an_error(captured: List[Dict[str, Any]], tmp_path: Path, capsys):
    assert main(["train", str(CONFIG), "--output", str(tmp_path), "--max_steps", "3"]) == 1
    err = capsys.readouterr().err  # click's wording varies between versions
    assert err.startswith("error: config overrides: No such option") and "--max_steps" in err
    assert err.count("\n") == 1
    assert not captured


def test_an_error_is_one_line_on_stderr_and_status_1(tmp_path: Path, capsys):
    args = ["schedule", str(tmp_path / "missing.cfg"), str(tmp_path / "train.spacy")]
    assert main(args) == 1
    said = capsys.readouterr()
    assert said.err == f"error: {tmp_path / 'missing.cfg'}: no such config\n" and not said.out
    # The same under spaCy's CLI, in a fresh interpreter.
    done = run("-m", "spacy", "flat", *args)
    assert (done.returncode, done.stderr) == (1, said.err)


def test_a_usage_error_is_status_2(capsys):
    assert main(["convert"]) == 2
    assert "Missing argument" in capsys.readouterr().err
    assert main(["no-such-command"]) == 2


def test_list_options_take_every_value_after_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """`--held-back dev.spacy test.spacy` holds both back, as with argparse's nargs="*"; neither is read as
    a corpus."""
    from spacy_flat.vectors import tables

    calls: List[Dict[str, Any]] = []
    monkeypatch.setattr(
        tables, "pretrain_vectors", lambda inputs, output, settings, **kw: calls.append({"inputs": inputs, **kw})
    )
    monkeypatch.setattr(tables, "describe_report", lambda report: [])
    out = str(tmp_path / "out")
    assert main(["pretrain-vectors", "corpus", "--held-back", "dev.spacy", "test.spacy", "--output", out]) == 0
    assert main(["pretrain-vectors", "corpus", "news", "--output", out, "--width", "8", "--no-progress"]) == 0
    assert [call["inputs"] for call in calls] == [[Path("corpus")], [Path("corpus"), Path("news")]]
    assert [call["held_back"] for call in calls] == [[Path("dev.spacy"), Path("test.spacy")], []]
    assert [call["progress"] for call in calls] == [True, False]
