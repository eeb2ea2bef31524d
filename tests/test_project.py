"""The spaCy project end to end on a slice of Resume, with one-step training."""

import itertools
import json
import lzma
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List, Tuple, Union

import pytest
import spacy
import srsly

from spacy_flat.cli.project_assets import md5sum

from .util import ROOT, SHARED, needs_shared


def head_sentences(src: Path, dest: Path, n: int) -> None:
    blocks = src.read_text(encoding="utf8").split("\n\n")[:n]
    dest.write_text("\n\n".join(blocks).strip() + "\n", encoding="utf8")


def run_workflow(project: Path, workflow: str, sliced: Union[str, Tuple[str, ...]], overrides: List[str]) -> None:
    """Run `workflow` in `project`, whose assets under `sliced` are slices of the real
    files: the project declares their checksums, since convert verifies them."""
    config = srsly.read_yaml(project / "project.yml")
    for asset in config["assets"]:
        if asset["dest"].startswith(sliced):
            asset["checksum"] = md5sum(project / asset["dest"])
    srsly.write_yaml(project / "project.yml", config)
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", workflow, str(project), *overrides],
        capture_output=True,
        text=True,
        cwd=project,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@needs_shared
@pytest.mark.slow
def test_project_all_on_a_slice(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "configs", project / "configs")
    assets = project / "assets" / "resume"
    assets.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        head_sentences(SHARED / "data" / "resume" / f"{split}.char.bmes", assets / f"{split}.char.bmes", 20)
    run_workflow(project, "all", "assets/resume/", ["--vars.train_override=training.max_steps=2"])
    scores = json.loads((project / "metrics" / "resume" / "scores.json").read_text(encoding="utf8"))
    assert {"ents_f", "ents_per_type", "span_f", "type_acc"} <= set(scores)
    assert "<table" in (project / "metrics" / "resume" / "samples.html").read_text(encoding="utf8")
    wheels = list((project / "packages").glob("*/dist/*.whl"))
    assert len(wheels) == 1
    meta = json.loads((project / "training" / "resume" / "model-best" / "meta.json").read_text())
    assert any(req.startswith("spacy-flat") for req in meta.get("requirements", [])) or _wheel_requires_flat(wheels[0])


@needs_shared
@pytest.mark.slow
def test_project_news_on_a_slice(tmp_path: Path):
    """The general-purpose news pipeline's workflow: MSRA converted with readable labels, the bigram
    table pretrained on slices of the raw corpora (MSRA's dev and test held back), FLAT with the
    word2vec lexicon and that table trained for two steps, evaluated and packaged."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "configs", project / "configs")
    (project / "assets" / "msra").mkdir(parents=True)
    for name in ("train_dev", "test"):
        head_sentences(
            SHARED / "data" / "msra" / f"{name}.char.bmes", project / "assets" / "msra" / f"{name}.char.bmes", 20
        )
    (project / "assets" / "corpora").mkdir()
    for src in sorted((SHARED / "corpora").iterdir()):
        _corpus_slice(src, project / "assets" / "corpora" / src.name, 3 if "jsonl" in src.name else 400)
    (project / "assets" / "vectors").mkdir()
    (project / "assets" / "vectors" / "words.vector").symlink_to(SHARED / "vectors/synonyms-wiki-w2v-100d/words.vector")
    run_workflow(
        project,
        "news",
        ("assets/msra/", "assets/corpora/"),
        ["--vars.train_override=training.max_steps=2", "--vars.msra_dev_sentences=5"],
    )
    labels = {"PER", "LOC", "ORG"}
    report = json.loads((project / "training" / "pretrained" / "msra" / "report.json").read_text(encoding="utf8"))
    assert report["stages"]["sentences"]["held_back_sentences"] > 0
    scores = json.loads((project / "metrics" / "news" / "scores.json").read_text(encoding="utf8"))
    assert set(scores["ents_per_type"]) == labels
    (wheel,) = (project / "packages").glob("zh_flat_news-*/dist/*.whl")
    assert _wheel_requires_flat(wheel)
    model = project / "training" / "news" / "model-best"
    assert list((project / "training" / "news" / "checkpoints").glob("step-*"))
    cfg = json.loads((model / "flat_ner" / "cfg.json").read_text())
    assert cfg["boundaries"] and not cfg["boundaries"]["sentence_end_inside"]
    # The pipeline holds its lexicon and bigram table: it loads without the files it was trained from.
    shutil.rmtree(project / "training" / "pretrained")
    (project / "assets" / "vectors" / "words.vector").unlink()
    nlp = spacy.load(model)
    config = nlp.config["components"]["flat_ner"]["model"]
    assert config["@architectures"] == "spacy-flat.FlatTagger.v2" and config["bigram_vectors"]
    assert set(nlp.get_pipe("flat_ner").labels) == labels


@needs_shared
@pytest.mark.slow
def test_project_general_on_a_slice(tmp_path: Path):
    """The general pipeline's workflow on slices of its four corpora and of the raw text: labels harmonised,
    the bigram table pretrained with every dev and test set held back, FLAT trained on the pool (a short,
    fast schedule, so that calibration has entities to fit), calibrated on the pooled dev sets, scored on
    each test set and packaged with its model card."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "configs", project / "configs")
    config = (project / "configs" / "general.cfg").read_text(encoding="utf8")
    for old, new in (
        ("max_steps = 7220", "max_steps = 120"),
        ("eval_frequency = 1444", "eval_frequency = 60"),
        ("warmup_steps = 902", "warmup_steps = 1"),
        ("total_steps = 7220", "total_steps = 120"),
        ("initial_rate = 0.002", "initial_rate = 0.01"),
    ):
        assert old in config
        config = config.replace(old, new)
    (project / "configs" / "general.cfg").write_text(config, encoding="utf8")
    slices = {
        "msra": {"train_dev.char.bmes": "msra/train_dev.char.bmes", "test.char.bmes": "msra/test.char.bmes"},
        "weibo": {f"weiboNER_2nd_conll.{s}": f"weibo/weiboNER_2nd_conll.{s}" for s in ("train", "dev", "test")},
        "resume": {f"{s}.char.bmes": f"resume/{s}.char.bmes" for s in ("train", "dev", "test")},
        "uner": {f"zh_gsdsimp-ud-{s}.iob2": f"uner-gsdsimp/zh_gsdsimp-ud-{s}.iob2" for s in ("train", "dev", "test")},
    }
    for corpus, files in slices.items():
        (project / "assets" / corpus).mkdir(parents=True)
        for name, src in files.items():
            head_sentences(SHARED / "data" / src, project / "assets" / corpus / name, 40)
    (project / "assets" / "corpora").mkdir()
    for src in sorted((SHARED / "corpora").iterdir()):
        _corpus_slice(src, project / "assets" / "corpora" / src.name, 3 if "jsonl" in src.name else 400)
    (project / "assets" / "vectors").mkdir()
    (project / "assets" / "vectors" / "words.vector").symlink_to(SHARED / "vectors/synonyms-wiki-w2v-100d/words.vector")
    sliced = ("assets/msra/", "assets/weibo/", "assets/resume/", "assets/uner/", "assets/corpora/")
    run_workflow(project, "general", sliced, ["--vars.msra_dev_sentences=10"])
    labels = {"PER", "LOC", "ORG"}
    report = json.loads((project / "training" / "pretrained" / "general" / "report.json").read_text(encoding="utf8"))
    assert report["stages"]["sentences"]["held_back_sentences"] > 0
    for test_set in ("msra", "weibo", "resume", "uner"):
        scores = json.loads((project / "metrics" / "general" / test_set / "scores.json").read_text(encoding="utf8"))
        assert set(scores["ents_per_type"]) <= labels
    last = json.loads((project / "training" / "general" / "model-last" / "meta.json").read_text(encoding="utf8"))
    assert set(last["performance"]["ents_per_corpus"]) == {"msra", "weibo", "resume", "uner"}
    calibrated = project / "training" / "general" / "model-calibrated"
    # The workflow ships the last model, not the one its dev evaluations named best.
    shipped = json.loads((calibrated / "meta.json").read_text(encoding="utf8"))
    assert shipped["performance"] == last["performance"]
    assert json.loads((calibrated / "flat_ner" / "cfg.json").read_text())["temperature"] != 1.0
    (wheel,) = (project / "packages").glob("zh_flat_general-*/dist/*.whl")
    assert _wheel_requires_flat(wheel)
    with zipfile.ZipFile(wheel) as packaged:
        (meta_name,) = [n for n in packaged.namelist() if n.endswith("zh_flat_general/meta.json")]
        meta = json.loads(packaged.read(meta_name))
        # Derived tables only: no corpus file travels with the pipeline.
        assert not [n for n in packaged.namelist() if n.endswith((".spacy", ".bmes", ".iob2", ".xz"))]
    assert {source["license"] for source in meta["sources"]} >= {"research use", "CC BY-SA 3.0", "CC BY-SA 4.0"}
    assert set(meta["test_performance"]) == {
        "MSRA test",
        "Weibo test (named mentions)",
        "Resume test (PER, LOC, ORG)",
        "UNER GSDSimp test",
    }
    assert "| MSRA test | **all** |" in meta["notes"]


def _corpus_slice(src: Path, dest: Path, lines: int) -> None:
    """The first lines of a corpus file, in its own format (xz, or a zip's first member); of a
    JSON array (one line), its first `lines` items."""
    if src.suffix == ".zip":
        with zipfile.ZipFile(src) as source, zipfile.ZipFile(dest, "w") as target:
            name = source.namelist()[0]
            target.writestr(name, b"".join(source.open(name).readlines()[:lines]))
        return
    if src.name.endswith(".json.xz"):
        with lzma.open(src, "rt", encoding="utf8") as f:
            items = json.load(f)[:lines]
        dest.write_bytes(lzma.compress(json.dumps(items, ensure_ascii=False).encode("utf8")))
        return
    with lzma.open(src, "rb") as f:
        dest.write_bytes(lzma.compress(b"".join(itertools.islice(f, lines))))


@needs_shared
@pytest.mark.slow
def test_project_pretrained_on_a_slice(tmp_path: Path):
    """Pretrained inputs end to end: convert Weibo, pretrain-vectors on slices of
    every raw corpus (leaving out Weibo's dev and test), train two steps with
    the wiki vectors, our bigram table and the typed word lists, evaluate."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    shutil.copytree(ROOT / "configs", project / "configs")
    (project / "assets" / "weibo").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        name = f"weiboNER_2nd_conll.{split}"
        head_sentences(SHARED / "data" / "weibo" / name, project / "assets" / "weibo" / name, 20)
    (project / "assets" / "corpora").mkdir()
    for src in sorted((SHARED / "corpora").iterdir()):
        # The news JSON lines are one day a line; the others one post or review a line.
        _corpus_slice(src, project / "assets" / "corpora" / src.name, 3 if "jsonl" in src.name else 400)
    (project / "assets" / "lexicons").symlink_to(SHARED / "lexicons")
    (project / "assets" / "vectors").mkdir()
    (project / "assets" / "vectors" / "words.vector").symlink_to(SHARED / "vectors/synonyms-wiki-w2v-100d/words.vector")
    overrides = ["--vars.dataset=weibo", "--vars.train_override=training.max_steps=2"]
    run_workflow(project, "pretrained", ("assets/weibo/", "assets/corpora/"), overrides)
    report = json.loads((project / "training" / "pretrained" / "weibo" / "report.json").read_text(encoding="utf8"))
    assert report["stages"]["bigrams"]["rows"] > 1000
    assert report["stages"]["sentences"]["held_back_sentences"] > 0
    assert json.loads((project / "metrics" / "weibo-pretrained" / "scores.json").read_text(encoding="utf8"))
    cfg = json.loads((project / "training" / "weibo-pretrained" / "model-best" / "flat_ner" / "cfg.json").read_text())
    assert cfg["word_types"][:2] == ["place", "person"]


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


@pytest.mark.parametrize("name", ["resume", "weibo", "msra"])
def test_convert_reads_every_asset_and_writes_each_split(name):
    """`convert` runs the dataset's own command, which converts each of its assets
    (whose file names live only in project.yml) to the DocBins train and evaluate read."""
    from weasel.util.config import substitute_project_variables

    project = substitute_project_variables(srsly.read_yaml(ROOT / "project.yml"), {"vars.dataset": name})
    commands = {command["name"]: command for command in project["commands"]}
    assert commands["convert"]["script"][0].startswith(f"python -m spacy project run convert-{name} . ")
    own = commands[f"convert-{name}"]
    assets = {a["dest"] for a in project["assets"] if a["dest"].startswith(f"assets/{name}/")}
    calls = [line.split() for line in own["script"] if line.startswith("python -m spacy_flat convert ")]
    assert {call[4] for call in calls} == set(own["deps"]) == assets
    dev = {call[call.index("--dev-output") + 1] for call in calls if "--dev-output" in call}
    written = {call[5] for call in calls} | dev
    splits = {f"corpus/{name}/{split}.spacy" for split in ("train", "dev", "test")}
    assert written == set(own["outputs"]) == splits
    assert splits <= set(commands["train"]["deps"]) | set(commands["evaluate"]["deps"])
    assert own["script"][0] == f"python -m spacy_flat verify-assets . assets/{name}/"


def _msra_zip(path: Path, damage: bool = False) -> str:
    """MSRANER.zip laid out as its public home ships it, from ../shared; RETURNS its file:// URL."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in ("train_dev.char.bmes", "test.char.bmes"):
            data = (SHARED / "data" / "msra" / name).read_bytes()
            if damage and name == "test.char.bmes":
                data = data[:-100]  # a truncated download
            zf.writestr(f"MSRANER/{name}", data)
    return path.resolve().as_uri()


@needs_shared
@pytest.mark.slow
@pytest.mark.parametrize("damage", [False, True])
def test_msra_fetch_unzip_and_checksums(tmp_path: Path, damage: bool):
    """fetch-msra (from a local copy of the zip, standing in for its public home), then
    `spacy project assets --extra` copies both files; a damaged one stops `verify-assets`
    (which the convert step runs first), named with its md5."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project)
    url = _msra_zip(tmp_path / "MSRANER.zip", damage=damage)
    run = [sys.executable, "-m", "spacy", "project"]
    fetched = subprocess.run(
        [*run, "run", "fetch-msra", str(project), f"--vars.msra_zip={url}"], capture_output=True, text=True, cwd=project
    )
    assert fetched.returncode == 0, fetched.stdout[-3000:] + fetched.stderr[-3000:]
    mirrors = [f"--vars.{name}_home={SHARED / 'data' / name}" for name in ("resume", "weibo")]
    mirrors.append(f"--vars.word_vectors_home={SHARED / 'vectors' / 'synonyms-wiki-w2v-100d'}")
    mirrors.append(f"--vars.uner_home={SHARED / 'data' / 'uner-gsdsimp'}")
    mirrors += [f"--vars.corpora_home={SHARED / 'corpora'}", f"--vars.lexicons_home={SHARED / 'lexicons'}"]
    assets = subprocess.run(
        [*run, "assets", str(project), "--extra", *mirrors], capture_output=True, text=True, cwd=project
    )
    assert assets.returncode == 0, (assets.stdout + assets.stderr)[-3000:]  # weasel only warns on a mismatch
    verify = [sys.executable, "-m", "spacy_flat", "verify-assets", str(project), "assets/msra/"]
    verified = subprocess.run(verify, capture_output=True, text=True)
    if damage:
        assert verified.returncode == 1
        assert "assets/msra/test.char.bmes: md5" in verified.stderr and "train_dev" not in verified.stderr
    else:
        assert verified.returncode == 0, verified.stderr
        for name in ("train_dev.char.bmes", "test.char.bmes"):
            copied = project / "assets" / "msra" / name
            assert copied.read_bytes() == (SHARED / "data" / "msra" / name).read_bytes()


def test_verify_assets_names_missing_files(tmp_path: Path):
    from spacy_flat.cli.project_assets import verify_assets
    from spacy_flat.errors import AssetError

    shutil.copy(ROOT / "project.yml", tmp_path)
    with pytest.raises(AssetError, match=r"assets/weibo/weiboNER_2nd_conll.train: missing"):
        verify_assets(tmp_path, "assets/weibo/")
    with pytest.raises(AssetError, match="no asset under"):
        verify_assets(tmp_path, "assets/nothing/")
