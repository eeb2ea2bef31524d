"""What the project ships or shows speaks of the software, not of how it was developed: no rounds of work,
no issue numbers, no names of development tools, in the documents, configs, project, package or benchmarks."""

import re
from pathlib import Path
from typing import Iterator, List

ROOT = Path(__file__).resolve().parents[1]

SHOWN = ["README.md", "BENCHMARKS.md", "CHANGELOG.md", "project.yml", "setup.py", "pyproject.toml"]
FOLDERS = {
    "docs": ("*.md",),
    "configs": ("*.cfg",),
    "spacy_flat": ("*.py",),
    "benchmarks": ("*",),
    "tests": ("*.py",),
    ".ci": ("*",),
}
WORDS = re.compile(
    # pytest's fixture scope is a test run's, not a round of work.
    r"(?<!scope=\")\bsessions?\b"
    r"|\bissues?\s*#?\s*\d+"
    r"|\brounds? of work\b"
    r"|farm-bench|farm-studio|\bdevice tool\b|can_start_another|\bhelper session",
    re.IGNORECASE,
)


def shipped_files() -> Iterator[Path]:
    for name in SHOWN:
        if (ROOT / name).exists():
            yield ROOT / name
    for folder, patterns in FOLDERS.items():
        for pattern in patterns:
            for path in sorted((ROOT / folder).rglob(pattern)):
                # This file names the words it looks for.
                if path == Path(__file__).resolve():
                    continue
                if path.is_file() and "__pycache__" not in path.parts and path.suffix not in {".pyc", ".xz"}:
                    yield path


def hits(path: Path) -> List[str]:
    try:
        text = path.read_text(encoding="utf8")
    except UnicodeDecodeError:
        return []
    return [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()[:100]}"
        for number, line in enumerate(text.splitlines(), 1)
        for match in [WORDS.search(line)]
        if match
    ]


def test_nothing_shipped_speaks_of_how_the_project_is_developed():
    found = [hit for path in shipped_files() for hit in hits(path)]
    assert found == [], "\n".join(found)


def test_the_scan_sees_a_planted_word():
    planted = ["fine", "measured in session 12", "(issue #23)", "fixed in issue 7", "the device tool said"]
    assert [line for line in planted if WORDS.search(line)] == planted[1:]
