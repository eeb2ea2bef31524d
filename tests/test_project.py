"""The spaCy project end to end on a slice of Resume, with one-step training."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, SHARED, needs_shared


def head_sentences(src: Path, dest: Path, n: int) -> None:
    blocks = src.read_text(encoding="utf8").split("\n\n")[:n]
    dest.write_text("\n\n".join(blocks).strip() + "\n", encoding="utf8")


@needs_shared
def test_project_all_on_a_slice(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "configs", project / "configs")
    assets = project / "assets" / "resume"
    assets.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        head_sentences(SHARED / "data" / "resume" / f"{split}.char.bmes", assets / f"{split}.char.bmes", 20)
    smoke = ["--vars.max_steps=2"]
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "all", str(project), *smoke],
        capture_output=True,
        text=True,
        cwd=project,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    scores = json.loads((project / "metrics" / "resume" / "scores.json").read_text(encoding="utf8"))
    assert {"ents_f", "ents_per_type", "span_f", "type_acc"} <= set(scores)
    assert "<table>" in (project / "metrics" / "resume" / "samples.html").read_text(encoding="utf8")
    wheels = list((project / "packages").glob("*/dist/*.whl"))
    assert len(wheels) == 1
    meta = json.loads((project / "training" / "resume" / "model-best" / "meta.json").read_text())
    assert any(req.startswith("spacy-flat") for req in meta.get("requirements", [])) or _wheel_requires_flat(wheels[0])


def _wheel_requires_flat(wheel: Path) -> bool:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        metadata = next(n for n in zf.namelist() if n.endswith("METADATA"))
        return "Requires-Dist: spacy-flat" in zf.read(metadata).decode()


@pytest.mark.parametrize("name", ["resume", "weibo", "msra"])
def test_project_declares_every_asset_with_checksum(name):
    import srsly

    project = srsly.read_yaml(ROOT / "project.yml")
    assets = [a for a in project["assets"] if a["dest"].startswith(f"assets/{name}/")]
    assert len(assets) >= 2
    assert all(len(a["checksum"]) == 32 for a in assets)
