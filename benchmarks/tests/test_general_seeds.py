"""general_seeds.py runs the workflow's own commands for each seed, moved to the seed's folders."""

from pathlib import Path

import pytest
from general_seeds import figures_of, seed_commands
from weasel.util import load_project_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def project():
    return load_project_config(ROOT)


def test_seed_zero_runs_the_workflow_as_it_is(project):
    by_name = {c["name"]: c["script"] for c in project["commands"]}
    want = by_name["train-general"] + by_name["calibrate-general"] + by_name["evaluate-general"]
    assert seed_commands(project, 0) == want


def test_a_further_seed_has_its_own_folders_and_seed(project):
    lines = seed_commands(project, 2)
    assert not [line for line in lines if "training/general/" in line or "metrics/general/" in line]
    assert not [line for line in lines if "--output training/general " in line]
    trains = [line for line in lines if " train " in line]
    assert len(trains) == 1 and trains[0].endswith("--system.seed 2") and "--output training/general-s2 " in trains[0]
    assert sum("--system.seed" in line for line in lines) == 1
    assert sum("metrics/general-s2/" in line for line in lines) == 4


def test_figures_over_seeds():
    def run(shift: float) -> dict:
        tests = {"msra": 89 + shift, "weibo": 60 + shift, "resume": 92 + shift, "uner": 71 + shift}
        return {"tests": tests, "dev_f": 80, "dev_macro": 76, "temperature": 1.5, "ece_before": 0.08, "ece_after": 0.01}

    figures = figures_of([run(0), run(1), run(2)])
    assert figures["test_sets"]["msra"] == {"mean": 90.0, "per_seed": [89.0, 90.0, 91.0], "sd": 1.0}
    assert figures["test_f1"]["mean"] == 79.0
    assert figures["ece"]["after"]["mean"] == 0.01
