"""An earlier commit's inference stages beside today's, in one process: the peer
that `benchmarks/tools/stages.py` times the current code against.

Two copies of `spacy_flat` cannot share a process by name, so the earlier
commit's package is extracted under another name (`spacy_flat_<rev>`) with an
empty `__init__.py` (its factories and architectures would clash with today's
registrations). A pipeline loaded by today's code is then switched to the old
code: the model's featurizer, group loop and array hand-over, the torch module's
and the CRF's classes (so decoding runs the old Viterbi), and the component's
`predict` and `set_annotations` as the old component ran them.
"""

import importlib
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path
from typing import Any, Iterable, List

from spacy.language import Language
from spacy.tokens import Doc

from spacy_flat.lattice.windows import Segment

ROOT = Path(__file__).resolve().parents[2]


def extract(rev: str, folder: Path, *paths: str) -> Path:
    """Write `rev`'s files under `paths` (as `git archive` gives them) into `folder`.

    RETURNS (Path): `folder`.
    """
    archive = folder / "package.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "archive", rev, *paths], cwd=ROOT, check=True, stdout=out)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    archive.unlink()
    return folder


def load_package(rev: str) -> types.ModuleType:
    """Extract `rev`'s `spacy_flat` as a package of another name and import it.

    RETURNS (ModuleType): The package; its modules are imported on first use.
    """
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    name = f"spacy_flat_{sha}"
    folder = extract(rev, Path(tempfile.mkdtemp(prefix="spacy-flat-baseline-")), "spacy_flat")
    (folder / "spacy_flat").rename(folder / name)
    (folder / name / "__init__.py").write_text('"""An earlier commit\'s spacy_flat, registering nothing."""\n')
    sys.path.insert(0, str(folder))
    return importlib.import_module(name)


def use_baseline(nlp: Language, package: types.ModuleType, component: str = "flat_ner") -> None:
    """Switch `nlp`'s FLAT component to `package`'s stage code (see the module docstring)."""
    name = package.__name__
    modules = {
        part: importlib.import_module(f"{name}.{part}")
        for part in (
            "decoding.boundaries",
            "decoding.tags",
            "layers.featurizer",
            "layers.flat_model",
            "layers.tagger_handle",
            "layers.torch_tagger",
            "lattice.windows",
            "crf.model",
            "nn.tagger",
            "pipeline.confidence",
        )
    }
    ner = nlp.get_pipe(component)
    model = ner.model
    model._func = modules["layers.flat_model"]._forward
    model.get_ref("features")._func = modules["layers.featurizer"]._forward
    # Training segments come from today's component: the old featurizer's type check takes both.
    featurizer_globals = modules["layers.featurizer"].__dict__
    featurizer_globals["Segment"] = (modules["lattice.windows"].Segment, Segment)
    tagger = model.get_ref("tagger")
    tagger.attrs["convert_inputs"] = modules["layers.torch_tagger"]._convert_inputs
    tagger.attrs["convert_outputs"] = modules["layers.torch_tagger"]._convert_outputs
    module = tagger.shims[0]._model
    module.__class__ = modules["nn.tagger"].LatticeTagger
    module.crf.__class__ = modules["crf.model"].ConstrainedCRF
    confidence = modules["pipeline.confidence"]
    tag_set = modules["decoding.tags"].TagSet(ner.labels)

    def predict(docs: Iterable[Doc]) -> List[List[Any]]:
        cfg = ner.cfg
        rules = None
        if cfg.get("constrain_boundaries"):
            rules = modules["decoding.boundaries"].BoundaryRules.from_dict(cfg.get("boundaries"))
        segmenter = modules["lattice.windows"].Segmenter(cfg["window_size"], cfg["window_overlap"])
        tagger_handle = modules["layers.tagger_handle"].TorchTagger(model)
        if hasattr(tagger_handle, "predict"):  # the model tags the segments itself (0.3.0 on)
            decoded = confidence.decode_docs(list(docs), segmenter, tagger_handle, rules, tag_set)
        else:
            decoded = confidence.decode_docs(list(docs), segmenter, model, rules, tagger_handle, tag_set)
        if cfg.get("scores_key") is None:
            return decoded.spans()
        return decoded.scored(cfg.get("temperature", 1.0), cfg["threshold"])

    def set_annotations(docs: Iterable[Doc], spans: List[List[Any]]) -> None:
        cfg = ner.cfg
        for doc, doc_spans in zip(docs, spans):
            confidence.write_entities(
                doc, doc_spans, cfg["alignment_mode"], ner.alignment_report, cfg.get("scores_key")
            )

    ner.predict = predict  # type: ignore[method-assign]
    ner.set_annotations = set_annotations  # type: ignore[method-assign]
