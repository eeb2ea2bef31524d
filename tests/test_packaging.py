"""Each architecture of the family after `spacy package`: the package installs, and a
fresh interpreter loads it by name (entry points, no `import spacy_flat`) and
predicts what the pipeline predicted before it was packaged."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest
from spacy.cli.package import package
from spacy.language import Language

import spacy_flat

from .util import FAMILY

TEXTS = ["张三在北京大学工作。", "李四", "", "王五住在上海，在华为公司任职。" * 3]
Predictions = List[List[Tuple[int, int, str, float]]]

# Run in a fresh interpreter whose path holds the installed packages: load each by name, predict.
LOAD_AND_PREDICT = """
import json, sys
import spacy
out = {}
for name in json.loads(sys.argv[1]):
    nlp = spacy.load(name)
    out[name] = []
    for doc in nlp.pipe(json.loads(sys.argv[2]), batch_size=4):
        scores = list(doc.spans["flat_ner"].attrs.get("scores", []))
        out[name].append([[e.start_char, e.end_char, e.label_, s] for e, s in zip(doc.ents, scores)])
modules = sorted(m for m in sys.modules if m.startswith("spacy_flat"))
package = sys.modules["spacy_flat"].__file__
print(json.dumps({"predictions": out, "modules": modules, "package": package}))
"""


def predictions(nlp: Language) -> Predictions:
    out = []
    for doc in nlp.pipe(TEXTS, batch_size=4):
        scores = list(doc.spans["flat_ner"].attrs.get("scores", []))
        out.append([(e.start_char, e.end_char, e.label_, float(s)) for e, s in zip(doc.ents, scores)])
    return out


def run(*command: str, **kwargs) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def packaged(
    tmp_path_factory: pytest.TempPathFactory, family_nlp: Callable[[str], Language]
) -> Tuple[Dict[str, Predictions], Dict[str, Predictions]]:
    """Each architecture trained, packaged, installed and run in a fresh interpreter.
    RETURNS: the predictions before packaging and after, by architecture."""
    tmp = tmp_path_factory.mktemp("packaging")
    (tmp / "packages").mkdir()
    expected, directories = {}, []
    for architecture in FAMILY:
        nlp = family_nlp(architecture)
        expected[architecture] = predictions(nlp)
        nlp.to_disk(tmp / architecture)
        # The package directory only, by `spacy package`'s own function in this process (its command
        # line runs in test_project, which builds and checks the project's wheels). That function
        # writes its files without closing them: their ResourceWarnings are spaCy's, not ours.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            package(
                tmp / architecture, tmp / "packages", name=f"test_{architecture}", version="0.0.1",
                create_sdist=False, require_parent=True,
            )  # fmt: skip
        directories.append(str(tmp / "packages" / f"zh_test_{architecture}-0.0.1"))
    site = tmp / "site"
    # Installed from each package's own setup.py, as its wheel would be (pip builds one); with this
    # environment's setuptools, rather than one pip would fetch into a fresh build environment per package.
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    run(*pip, "--target", str(site), *directories)
    names = [f"zh_test_{architecture}" for architecture in FAMILY]
    # The fresh interpreter imports the spacy_flat under test, also where an editable
    # install points at another checkout of the project.
    path = os.pathsep.join([str(site), str(Path(spacy_flat.__file__).parents[1])])
    result = run(
        sys.executable, "-c", LOAD_AND_PREDICT, json.dumps(names), json.dumps(TEXTS),
        env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin", "HOME": str(tmp)}, cwd=tmp,
    )  # fmt: skip
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    # spaCy found the component through the entry points: nothing imported spacy_flat by hand.
    assert "spacy_flat.pipeline.factory" in loaded["modules"] and loaded["package"] == spacy_flat.__file__
    after = {architecture: loaded["predictions"][f"zh_test_{architecture}"] for architecture in FAMILY}
    return expected, after


@pytest.mark.slow
@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_a_packaged_pipeline_installs_loads_by_name_and_predicts_the_same(architecture: str, packaged) -> None:
    expected, after = packaged
    want, got = expected[architecture], after[architecture]
    assert any(want), "the tiny model finds no entity: the comparison would prove nothing"
    assert len(got) == len(want)
    for got_doc, want_doc in zip(got, want):
        assert [tuple(g[:3]) for g in got_doc] == [w[:3] for w in want_doc]
        assert [g[3] for g in got_doc] == pytest.approx([w[3] for w in want_doc], abs=1e-5)
