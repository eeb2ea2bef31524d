"""benchmarks/ holds what a release reruns: standing scripts that its project's workflows run, the records and
their rendering, tools, tests and the archive of settled experiments; every workflow is documented."""

from pathlib import Path

import srsly

BENCHMARKS = Path(__file__).resolve().parents[1]
# The records, their rendering and what the scripts share: no workflow runs them alone.
LIBRARY = {"common.py", "results.py", "render.py", "merge_seeds.py"}
FOLDERS = {"tools", "archive", "tests", "results"}


def project() -> dict:
    return srsly.read_yaml(BENCHMARKS / "project.yml")


def test_the_top_level_holds_standing_scripts_and_the_library_only():
    names = {p.name for p in BENCHMARKS.iterdir() if not p.name.startswith((".", "__"))}
    scripts = {n for n in names if n.endswith(".py")}
    assert names - scripts == FOLDERS | {"project.yml", "README.md"}
    scripts_run = " ".join(line for command in project()["commands"] for line in command["script"])
    standing = scripts - LIBRARY
    assert standing, "no standing scripts"
    assert sorted(n for n in standing if f"python {n}" not in scripts_run) == [], "a script no workflow runs"


def test_every_workflow_runs_known_commands_and_the_readme_names_it():
    spec = project()
    commands = {c["name"] for c in spec["commands"]}
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf8")
    for name, steps in spec["workflows"].items():
        assert set(steps) <= commands, name
        assert f"| `{name}` |" in readme, f"benchmarks/README.md does not describe the workflow {name}"
    assert set(spec["workflows"]["release"]) >= {"accuracy-resume", "time-speed", "time-family", "render"}


def test_archived_topics_say_how_to_run_them():
    topics = [p for p in (BENCHMARKS / "archive").iterdir() if p.is_dir()]
    assert topics
    assert sorted(p.name for p in topics if not (p / "README.md").exists()) == []
