"""The benchmarks' own tests: their scripts and the tests' helpers importable, and the fixtures they share."""

import sys
from pathlib import Path

import pytest
from spacy.language import Language

ROOT = Path(__file__).resolve().parents[2]
# The scripts import each other by name, as they do when run from benchmarks/; tests.util is the tests' helpers.
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "benchmarks" / "tools"), str(ROOT)]

from tests.util import build_small  # noqa: E402


@pytest.fixture(scope="session")
def trained_nlp() -> Language:
    """A small FLAT pipeline, trained once per test run; tests must not update it."""
    return build_small()
