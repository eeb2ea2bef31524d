"""GPU lane (opt-in: --rungpu; needs CUDA and `pip install -e .[cuda12x]`)."""

import pytest
import spacy

from .conftest import FAMILY, ROOT, build_family, build_small, tiny_records

pytestmark = pytest.mark.gpu


def test_train_on_gpu_then_load_and_run_on_cpu(tmp_path):
    import subprocess
    import sys

    # Trained in a child process so that this one never activates the GPU.
    script = f"""
import spacy, torch
from thinc.api import require_gpu
require_gpu(0)
import sys; sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import build_small
nlp = build_small(steps=60)
assert nlp.get_pipe("flat_ner").tagger.device.type == "cuda"
nlp.to_disk({str(tmp_path / "gpu")!r})
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    nlp = spacy.load(tmp_path / "gpu")  # this process never activated the GPU
    for rec in tiny_records():
        doc = nlp(rec["text"])
        assert doc.text == rec["text"]


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


def test_mixed_precision_training_on_gpu():
    """thinc's autocast (float16 matmuls) trains: the position term and the CRF stay float32."""
    import subprocess
    import sys

    script = f"""
import math, spacy
from thinc.api import require_gpu
require_gpu(0)
import sys; sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import small_config, small_lexicon, tiny_examples, tiny_records
config = small_config()
config["model"]["mixed_precision"] = True
nlp = spacy.blank("zh")
ner = nlp.add_pipe("flat_ner", config=config)
egs = tiny_examples(nlp)
ner.initialize(lambda: egs, nlp=nlp, lexicon=small_lexicon())
opt = nlp.create_optimizer()
for _ in range(120):
    losses = nlp.update(egs, sgd=opt)
assert math.isfinite(losses["flat_ner"]), losses
right = sum(
    [(e.start_char, e.end_char, e.label_) for e in nlp(eg.reference.text).ents]
    == [(e.start_char, e.end_char, e.label_) for e in eg.reference.ents]
    for eg in egs
)
assert right >= len(egs) // 2, right
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


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


def test_crf_nll_on_gpu_equals_pytorch_crf():
    import torch
    import torchcrf

    from spacy_flat.decoding.tags import TagSet
    from spacy_flat.nn.crf import ConstrainedCRF

    tags = TagSet(["A", "B"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends()).cuda()
    gen = torch.Generator().manual_seed(4)
    lengths = torch.tensor([9, 1, 5, 9])
    mask = (torch.arange(9)[None] < lengths[:, None]).cuda()
    gold = torch.randint(0, len(tags), (4, 9), generator=gen).cuda()
    emissions = torch.randn(4, 9, len(tags), generator=gen).cuda().requires_grad_()
    ours = crf.nll(emissions, gold, mask)
    (ours_grad,) = torch.autograd.grad(ours, [emissions])
    theirs = -torchcrf.CRF.forward(crf, emissions, gold, mask=mask, reduction="sum")
    (theirs_grad,) = torch.autograd.grad(theirs, [emissions])
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("architecture", sorted(FAMILY))
def test_each_architecture_trains_on_gpu_and_predicts_as_on_cpu(architecture, tmp_path):
    """FLAT, TENER and DC-SAN: trained on the GPU (a child process), they predict on the
    CPU what they predicted on the GPU; a CPU-trained one predicts the same on the GPU."""
    import json
    import subprocess
    import sys

    from thinc.api import require_cpu, require_gpu

    texts = [r["text"] for r in tiny_records()]
    script = f"""
import json, sys
from thinc.api import require_gpu
require_gpu(0)
sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import build_family
nlp = build_family({architecture!r}, steps=40)
assert nlp.get_pipe("flat_ner").tagger.device.type == "cuda"
nlp.to_disk({str(tmp_path / "gpu")!r})
texts = json.loads(sys.argv[1])
print(json.dumps([[[e.start_char, e.end_char, e.label_] for e in d.ents] for d in nlp.pipe(texts, batch_size=4)]))
"""
    result = subprocess.run([sys.executable, "-c", script, json.dumps(texts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    on_gpu = json.loads(result.stdout.strip().splitlines()[-1])
    assert any(on_gpu), "the GPU-trained model finds no entity: the comparison would prove nothing"
    loaded = spacy.load(tmp_path / "gpu")  # this process never activated the GPU
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
from tests.test_row_averages import _averaged, _pipeline

def run(dense):
    nlp, shim, halves = _pipeline()
    if dense:  # thinc's dense step and average, as before the rows' records
        shim.begin_update = lambda inputs: PyTorchShim.begin_update(shim, inputs)
    optimizer = SGD(0.05, grad_clip=5.0, L2=0.0, use_averages=True)
    for step in range(8):
        nlp.update(halves[step % 2], sgd=optimizer)
    if not dense:
        assert shim.row_averages and all(r.shared for r in shim.row_averages.values()), "records not over the arrays"
        assert all(r.view.device.type == shim._model.char_embed.weight.device.type for r in shim.row_averages.values())
    return {{name: value.cpu() for name, value in _averaged(nlp, optimizer).items()}}

rows, dense = run(False), run(True)
for name in rows:
    torch.testing.assert_close(rows[name], dense[name], rtol=1e-4, atol=1e-6, msg=name)
print("ok", sorted(rows))
"""


def test_averaged_sgd_keeps_the_tables_averages_row_by_row_on_gpu():
    """The rows' records over cupy arrays share their memory (DLPack) and give thinc's dense averages."""
    import subprocess
    import sys

    script = AVERAGED_SGD_SCRIPT.format(root=str(ROOT), gpu=True)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1].startswith("ok")
