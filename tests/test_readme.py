"""The README's front door works as written: its first block holds the main job and the test command, and its
quick start runs as it stands and prints what it says."""

import contextlib
import io
import re
from pathlib import Path

import pytest

from .util import heading_anchors

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(language: str) -> list:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf8"), re.S)


def test_the_readme_opens_with_the_main_job_and_the_tests():
    text = README.read_text(encoding="utf8")
    first = text.index("```bash")
    assert text[:first].strip() == "# spacy-flat", "the two commands come first"
    commands = [line for line in blocks("bash")[0].splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert "spacy project run all ." in commands[0] and commands[0].startswith("pip install torch==2.13.0")
    assert commands[1] == "python -m pytest"


def test_the_quick_start_runs_and_finds_its_entities(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # it saves flat_model/ where it runs
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks("python")[0], str(README), "exec"), {})
    printed = out.getvalue().splitlines()
    assert printed[0] == "[('重庆', 'LOC', 0, 2), ('张三', 'PER', 9, 11), ('上海', 'LOC', 12, 14)]"
    assert printed[1].startswith("[('重庆', ")
    assert (tmp_path / "flat_model" / "flat_ner").is_dir()


DOCUMENTS = ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "CHANGELOG.md", "docs/*.md", "benchmarks/README.md"]
DOCUMENTS += ["benchmarks/archive/DECISIONS.md", "benchmarks/archive/*/README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_documents_links_resolve():
    """Every relative link of the documents names a file that exists, and a heading it has."""
    root = README.parent
    broken = []
    headings: dict = {}  # each linked page's anchors, read once
    for pattern in DOCUMENTS:
        for page in sorted(root.glob(pattern)):
            text = re.sub(r"```.*?```", "", page.read_text(encoding="utf8"), flags=re.S)
            for target in LINK.findall(text):
                if re.match(r"[a-z]+:", target) or target == "#":
                    continue
                name, _, fragment = target.partition("#")
                path = (page.parent / name).resolve() if name else page
                if not path.exists():
                    broken.append(f"{page.relative_to(root)}: {target} (no such file)")
                elif fragment and path.suffix == ".md":
                    if path not in headings:
                        headings[path] = heading_anchors(path.read_text(encoding="utf8"))
                    if fragment in headings[path]:
                        continue
                    broken.append(f"{page.relative_to(root)}: {target} (no such heading)")
    assert broken == []
