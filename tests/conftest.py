"""The fixtures every test may ask for, and the lanes: `--runslow` and `--rungpu`."""

from typing import Callable, Dict, List

import pytest
from spacy.language import Language

from .util import FAMILY, build_family, build_small


@pytest.fixture(scope="session")
def trained_nlp() -> Language:
    """A small FLAT pipeline, trained once per test run; tests must not update it."""
    return build_small()


# Steps of the shared pipelines: enough that each architecture predicts entities of the tiny corpus.
FAMILY_STEPS = {"tener": 30, "dcsan": 30, "lattice_lstm": 60}


@pytest.fixture(scope="session")
def family_nlp(trained_nlp: Language) -> Callable[[str], Language]:
    """The small pipeline of each architecture of FAMILY, trained once per test run on the first
    call for it (FLAT's is `trained_nlp`); tests must not update them. A test that needs other
    settings trains its own with `build_family`."""
    trained: Dict[str, Language] = {"flat": trained_nlp}

    def get(architecture: str) -> Language:
        if architecture not in trained:
            assert architecture in FAMILY, architecture
            trained[architecture] = build_family(architecture, steps=FAMILY_STEPS[architecture])
        return trained[architecture]

    return get


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="run the tests marked slow (end to end)")
    parser.addoption("--rungpu", action="store_true", help="run the tests marked gpu (needs CUDA)")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"):
            item.add_marker(pytest.mark.skip(reason="slow: run with --runslow"))
        if "gpu" in item.keywords and not config.getoption("--rungpu"):
            item.add_marker(pytest.mark.skip(reason="gpu: run with --rungpu"))
