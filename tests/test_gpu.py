"""GPU lane (opt-in: --rungpu; needs CUDA and `pip install -e .[cuda12x]`).

Training and prediction on the GPU against the CPU, mixed precision, the CRF's loss against pytorch-crf,
and decoding on the device (flat_ner's `decoding`): torch on the GPU against NumPy on the host for the
family and the settings that change what is decoded, "auto" choosing the device, and no wait for the
device beyond decoding's two deliberate ones (CUDA's sync debug mode "error").

LANE_DEVICE=cpu (`benchmarks/tools/device_lane.sh`'s dry run, on a machine without CUDA): the device-decoding
tests run on CPU tensors, which checks the tests themselves; the tests that need CUDA skip.
"""

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import spacy
from spacy.language import Language

from .crf.test_device_decoding import LONG, TEXTS, assert_same, outputs
from .util import FAMILY, ROOT, SyncCounter, build_family, build_small, tiny_records

pytestmark = pytest.mark.gpu

DRY_RUN = os.environ.get("LANE_DEVICE") == "cpu"
needs_cuda = pytest.mark.skipif(DRY_RUN, reason="LANE_DEVICE=cpu: a dry run without CUDA")


TRAIN_ON_GPU = """
import json, sys
from pathlib import Path
from thinc.api import require_gpu
require_gpu(0)
sys.path.insert(0, {root!r})
from tests.util import FAMILY, build_family, build_small
texts = json.loads(sys.argv[1])
builds = {{"small": lambda: build_small(steps=60)}}
builds.update({{name: (lambda name=name: build_family(name, steps=40)) for name in sorted(FAMILY)}})
found = {{}}
for name, build in builds.items():
    nlp = build()
    assert nlp.get_pipe("flat_ner").tagger.device.type == "cuda", name
    nlp.to_disk(Path({folder!r}) / name)
    found[name] = [[[e.start_char, e.end_char, e.label_] for e in d.ents] for d in nlp.pipe(texts, batch_size=4)]
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def trained_on_gpu(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Tuple[Path, list]]:
    """FLAT at the small sizes (`build_small`, 60 steps) and each architecture of the family (`build_family`,
    40 steps) trained on the GPU and saved, with the entities each predicted there on the tiny texts; in one
    child process (one start of CUDA for all), so that this one keeps to the CPU."""
    import json
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("trained-on-gpu")
    texts = [r["text"] for r in tiny_records()]
    script = TRAIN_ON_GPU.format(root=str(ROOT), folder=str(folder))
    result = subprocess.run([sys.executable, "-c", script, json.dumps(texts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    return {name: (folder / name, entities) for name, entities in found.items()}


@needs_cuda
def test_train_on_gpu_then_load_and_run_on_cpu(trained_on_gpu: Dict[str, Tuple[Path, list]]):
    """Trained and saved on the GPU, the pipeline predicts on the CPU the entities it predicted there."""
    path, on_gpu = trained_on_gpu["small"]
    assert any(on_gpu), "the GPU-trained model finds no entity: the comparison would prove nothing"
    nlp = spacy.load(path)
    assert nlp.get_pipe("flat_ner").tagger.device.type == "cpu"
    texts = [r["text"] for r in tiny_records()]
    docs = [nlp(text) for text in texts]
    assert [doc.text for doc in docs] == texts
    assert [[[e.start_char, e.end_char, e.label_] for e in doc.ents] for doc in docs] == on_gpu


@needs_cuda
def test_gpu_predictions_match_cpu(tmp_path):
    from thinc.api import require_cpu, require_gpu

    nlp = build_small(steps=40)
    nlp.to_disk(tmp_path / "cpu")
    cpu = [[(e.start_char, e.end_char, e.label_) for e in nlp(r["text"]).ents] for r in tiny_records()]
    require_gpu(0)
    try:
        gpu_nlp = spacy.load(tmp_path / "cpu")
        gpu = [[(e.start_char, e.end_char, e.label_) for e in gpu_nlp(r["text"]).ents] for r in tiny_records()]
    finally:
        require_cpu()
    assert gpu == cpu


@needs_cuda
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mixed_precision_training_on_gpu(dtype: str):
    """Autocast (float16 or bfloat16 matmuls, `mixed_precision_dtype`) trains: the position term and
    the CRF stay float32, the projections run in the chosen type."""
    import subprocess
    import sys

    script = f"""
import math, spacy
from thinc.api import require_gpu
require_gpu(0)
import sys; sys.path.insert(0, {str(ROOT)!r})
from tests.util import small_config, small_lexicon, tiny_examples, tiny_records
config = small_config()
config["model"]["mixed_precision"] = True
config["model"]["mixed_precision_dtype"] = {dtype!r}
nlp = spacy.blank("zh")
ner = nlp.add_pipe("flat_ner", config=config)
egs = tiny_examples(nlp)
ner.initialize(lambda: egs, nlp=nlp, lexicon=small_lexicon())
import torch
module = next(node for node in ner.model.walk() if node.shims).shims[0]._model
seen = set()
module.encoder.char_proj.register_forward_hook(lambda m, i, o: seen.add(o.dtype))
opt = nlp.create_optimizer()
for _ in range(120):
    losses = nlp.update(egs, sgd=opt)
assert math.isfinite(losses["flat_ner"]), losses
assert seen == {{getattr(torch, {dtype!r})}}, seen
right = sum(
    [(e.start_char, e.end_char, e.label_) for e in nlp(eg.reference.text).ents]
    == [(e.start_char, e.end_char, e.label_) for e in eg.reference.ents]
    for eg in egs
)
assert right >= len(egs) // 2, right
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


@needs_cuda
def test_cupy_arrays_reach_torch_without_deprecated_calls():
    """cupy 14 deprecates ndarray.toDlpack, which thinc's xp2torch calls: under this suite's
    -W error that failed the first GPU run (2026-11-24). xp_to_torch uses the DLPack protocol."""
    import warnings

    import cupy
    import torch

    from spacy_flat.layers.arrays import xp_to_torch

    array = cupy.arange(12, dtype="float32").reshape(3, 4)[:, 1:3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = xp_to_torch(array, device=torch.device("cuda", 0), requires_grad=True)
    assert tensor.is_cuda and tensor.requires_grad
    assert tensor.detach().cpu().tolist() == cupy.asnumpy(array).tolist()


@needs_cuda
def test_crf_nll_on_gpu_equals_pytorch_crf():
    import torch

    from spacy_flat.crf.model import ConstrainedCRF
    from spacy_flat.decoding.tags import TagSet

    from .crf_reference import ReferenceCRF

    tags = TagSet(["A", "B"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends()).cuda()
    gen = torch.Generator().manual_seed(4)
    lengths = torch.tensor([9, 1, 5, 9])
    mask = (torch.arange(9)[None] < lengths[:, None]).cuda()
    gold = torch.randint(0, len(tags), (4, 9), generator=gen).cuda()
    emissions = torch.randn(4, 9, len(tags), generator=gen).cuda().requires_grad_()
    ours = crf.nll(emissions, gold, mask)
    (ours_grad,) = torch.autograd.grad(ours, [emissions])
    theirs = -ReferenceCRF(crf).forward(emissions, gold, mask=mask, reduction="sum")
    (theirs_grad,) = torch.autograd.grad(theirs, [emissions])
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-4, atol=1e-4)


@needs_cuda
@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_each_architecture_trains_on_gpu_and_predicts_as_on_cpu(
    architecture: str, trained_on_gpu: Dict[str, Tuple[Path, list]], tmp_path: Path
):
    """FLAT, TENER, DC-SAN and the Lattice LSTM: trained on the GPU, they predict on the CPU
    what they predicted on the GPU; a CPU-trained one predicts the same on the GPU."""
    from thinc.api import require_cpu, require_gpu

    texts = [r["text"] for r in tiny_records()]
    path, on_gpu = trained_on_gpu[architecture]
    assert any(on_gpu), "the GPU-trained model finds no entity: the comparison would prove nothing"
    loaded = spacy.load(path)
    assert loaded.get_pipe("flat_ner").tagger.device.type == "cpu"
    assert [[[e.start_char, e.end_char, e.label_] for e in d.ents] for d in loaded.pipe(texts)] == on_gpu

    nlp = build_family(architecture, steps=40)
    nlp.to_disk(tmp_path / "cpu")
    cpu = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in nlp.pipe(texts)]
    require_gpu(0)
    try:
        gpu_nlp = spacy.load(tmp_path / "cpu")
        gpu = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in gpu_nlp.pipe(texts)]
    finally:
        require_cpu()
    assert gpu == cpu


AVERAGED_SGD_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import torch
from thinc.api import SGD, PyTorchShim, require_gpu
if {gpu!r}:
    require_gpu(0)
from spacy_flat.layers.shim import InPlacePyTorchShim
from tests.layers.test_row_averages import _averaged, _pipeline

def run(dense):
    nlp, shim, halves = _pipeline()
    if dense:  # thinc's dense step and average, as before the rows' records
        shim.begin_update = lambda inputs: PyTorchShim.begin_update(shim, inputs)
    optimizer = SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=True)
    for step in range(8):
        nlp.update(halves[step % 2], sgd=optimizer)
    if not dense:
        assert shim.row_averages and all(r.shared for r in shim.row_averages.values()), "records not over the arrays"
        table = shim._model.embeddings.char_embed.weight
        assert all(r.view.device.type == table.device.type for r in shim.row_averages.values())
    return {{name: value.cpu() for name, value in _averaged(nlp, optimizer).items()}}

rows, dense = run(False), run(True)
for name in rows:
    torch.testing.assert_close(rows[name], dense[name], rtol=1e-4, atol=1e-6, msg=name)
print("ok", sorted(rows))
"""


@needs_cuda
def test_averaged_sgd_keeps_the_tables_averages_row_by_row_on_gpu():
    """The rows' records over cupy arrays share their memory (DLPack) and give thinc's dense averages."""
    import subprocess
    import sys

    script = AVERAGED_SGD_SCRIPT.format(root=str(ROOT), gpu=True)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1].startswith("ok")


# ---- decoding on the device ----


@contextmanager
def on_gpu() -> Iterator[None]:
    """thinc and spaCy on GPU 0 (on the CPU in the dry run), back on the CPU after."""
    from thinc.api import require_cpu, require_gpu

    if DRY_RUN:
        yield
        return
    require_gpu(0)
    try:
        yield
    finally:
        require_cpu()


@contextmanager
def sync_debug_error() -> Iterator[None]:
    """CUDA's sync debug mode "error": an operation that makes the host wait for the device raises,
    unless decoding marked it as one of its two deliberate waits (`expected_sync`)."""
    import torch

    if DRY_RUN:
        yield
        return
    before = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(before)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, trained_nlp: Language) -> Dict[str, Path]:
    """The small pipelines trained on the CPU (FLAT: the one trained once per test run), saved to load on a GPU."""
    folder = tmp_path_factory.mktemp("decoding")
    out = {}
    for architecture in sorted(FAMILY):
        nlp = trained_nlp if architecture == "flat" else build_family(architecture, steps=15)
        nlp.to_disk(folder / architecture)
        out[architecture] = folder / architecture
    return out


def on_device(path: Path) -> Language:
    """The pipeline saved at `path`, loaded under `on_gpu` (its model on the GPU)."""
    nlp = spacy.load(path)
    assert nlp.get_pipe("flat_ner").tagger.device.type == ("cpu" if DRY_RUN else "cuda")
    return nlp


@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_every_architecture_decodes_on_the_gpu_as_numpy_does(saved: Dict[str, Path], architecture: str):
    with on_gpu():
        nlp = on_device(saved[architecture])
        host = outputs(nlp, TEXTS, "numpy")
        device = outputs(nlp, TEXTS, "torch")
    assert any(ents for ents, _ in host), "a model with no entities compares nothing"
    assert_same(host, device)


@pytest.mark.parametrize("architecture", ["flat", "dcsan"])
@pytest.mark.parametrize(
    "cfg",
    [
        {"constrain_boundaries": True},
        {"constrain_boundaries": False},
        {"temperature": 2.5},
        {"temperature": 0.4, "threshold": 0.5},
        {"scores_key": None},
        {"window_size": 24, "window_overlap": 4},
    ],
    ids=["boundary-rules", "no-boundary-rules", "temperature", "threshold", "no-scores", "windows"],
)
def test_settings_decode_on_the_gpu_as_numpy_does(saved: Dict[str, Path], architecture: str, cfg: Dict[str, Any]):
    texts = [*TEXTS, LONG]
    with on_gpu():
        nlp = on_device(saved[architecture])
        host = outputs(nlp, texts, "numpy", **cfg)
        device = outputs(nlp, texts, "torch", **cfg)
        if "window_size" in cfg:  # the long document is cut into several windows
            ner = nlp.get_pipe("flat_ner")
            ner.cfg.update(cfg)
            assert len(ner.segmenter.segments([nlp.make_doc(LONG)])[0]) > 2
    assert any(ents for ents, _ in host)
    assert_same(host, device)


def test_empty_documents_decode_to_nothing_on_the_gpu(saved: Dict[str, Path]):
    with on_gpu():
        nlp = on_device(saved["flat"])
        device = outputs(nlp, ["", "", " "], "torch")
        assert device == outputs(nlp, ["", "", " "], "numpy")
        mixed = ["", TEXTS[0], ""]
        assert_same(outputs(nlp, mixed, "numpy"), outputs(nlp, mixed, "torch"))
    assert device == [([], [])] * 3


@needs_cuda
def test_auto_decodes_on_the_gpu(saved: Dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    calls: Dict[str, int] = {"device_runs": 0, "best_paths": 0}
    with on_gpu():
        nlp = on_device(saved["flat"])
        ner = nlp.get_pipe("flat_ner")
        assert ner.cfg["decoding"] == "auto" and ner.decodes_on_device
        tagger = type(ner.tagger)
        for name in calls:

            def counted(self: Any, *args: Any, _name: str = name, _real: Callable = getattr(tagger, name)) -> Any:
                calls[_name] += 1
                return _real(self, *args)

            monkeypatch.setattr(tagger, name, counted)
        auto = outputs(nlp, TEXTS, "auto")
        monkeypatch.undo()
        device = outputs(nlp, TEXTS, "torch")
    assert calls["device_runs"] > 0 and calls["best_paths"] == 0, calls
    assert auto == device


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_device_runs_wait_for_the_gpu_only_where_expected(saved: Dict[str, Path], batch: int):
    """`TorchTagger.device_runs` under sync debug mode "error": decoding asks the device for values twice a
    batch (the count of entity marks, the copy of the runs) and nowhere else, whatever the batch's size."""
    texts = [text for text in TEXTS * 16 if text.strip()][:batch]
    with on_gpu():
        nlp = on_device(saved["flat"])
        ner = nlp.get_pipe("flat_ner")
        segments, _ = ner.segmenter.segments([nlp.make_doc(t) for t in texts])
        scores = ner.model.predict(segments)
        lengths = [len(s) for s in segments]
        forbidden = ner.boundary_rules.forbidden([s.text for s in segments], ner.tag_set, scores.shape[1])
        found: List[Any] = []
        with SyncCounter() as counter, sync_debug_error():
            for probabilities in (True, False):
                found.append(ner.tagger.device_runs(scores, lengths, forbidden, ner.tag_set.labels, 1.5, probabilities))
    assert all(runs is not None for runs in found)
    assert len(found[0][0][0]) > 0 and found[1][1] is None
    assert len(counter.seen) <= 4, counter.seen  # two a call


# ---- a training step on the device ----


@pytest.mark.parametrize("architecture", ["flat", "dcsan", "tener"])
def test_a_training_step_on_the_gpu_never_waits_for_it(
    saved: Dict[str, Path], architecture: str, monkeypatch: pytest.MonkeyPatch
):
    """`nlp.update` as the training loop calls it (the loss left on the device in `DeviceLosses`) under
    sync debug mode "error": FLAT's positions planned on the host, the inputs and gold tags copied from
    pinned memory, the loss, backward and the optimizer's step queued, nothing read back."""
    import spacy_flat.layers.torch_tagger as torch_wrapper
    from spacy_flat.layers.losses import DeviceLosses

    from .util import tiny_examples

    if DRY_RUN:  # plan on the host as on a GPU
        monkeypatch.setattr(torch_wrapper, "plans_positions_on_host", lambda device: True)

    with on_gpu():
        nlp = on_device(saved[architecture])
        optimizer = nlp.create_optimizer()
        batch = tiny_examples(nlp)[:8]
        nlp.update(batch, sgd=optimizer, losses=DeviceLosses())  # allocations and kernels made once
        losses = DeviceLosses()
        with SyncCounter() as counter, sync_debug_error():
            nlp.update(batch, sgd=optimizer, losses=losses)
        assert losses.read()["flat_ner"] > 0
    assert counter.seen == [], counter.seen
