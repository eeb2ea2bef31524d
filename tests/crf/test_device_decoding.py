"""Decoding in torch on the model's device (crf/device_decoding.py, layers/device_decoder.py) against
the NumPy path on the host: the same entities, probabilities within 1e-5, on CPU tensors, for every
architecture and the settings that change what is decoded; and at most two host synchronisations a
batch, whatever its size."""

from typing import Any, Dict, List, Tuple

import pytest
import spacy
import torch

import spacy_flat.crf.device_decoding as device_decoding
import spacy_flat.layers.device_decoder as device_decoder
from spacy_flat.pipeline.confidence import decode_docs

from ..test_robustness import HOSTILE, pkuseg_model, segmented_pipeline  # noqa: F401  (a fixture)
from ..util import SyncCounter, tiny_records

TEXTS = [
    *(record["text"] for record in tiny_records()),
    "",
    "张伟毕业于北京大学，现在上海工作。\n李娜在华为公司。",
    *HOSTILE.values(),
]
# Longer than the window below: cut into several overlapping windows and merged.
LONG = "。".join(["张伟毕业于北京大学", "李娜在上海华为公司工作", "王芳去了南京"] * 6)


def outputs(nlp: spacy.Language, texts: List[str], decoding: str, **cfg: Any) -> List[Tuple[list, list]]:
    ner = nlp.get_pipe("flat_ner")
    saved = dict(ner.cfg)
    ner.cfg.update(decoding=decoding, **cfg)
    try:
        docs = list(nlp.pipe(texts, batch_size=16))
    finally:
        ner.cfg.clear()
        ner.cfg.update(saved)
    key = cfg.get("scores_key", saved["scores_key"])
    return [
        (
            [(e.start_char, e.end_char, e.label_) for e in doc.ents],
            list(doc.spans[key].attrs["scores"]) if key is not None else [],
        )
        for doc in docs
    ]


def assert_same(host: List[Tuple[list, list]], device: List[Tuple[list, list]]) -> None:
    assert [ents for ents, _ in device] == [ents for ents, _ in host]
    for (_, want), (_, got) in zip(host, device):
        assert got == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize("architecture", ["flat", "tener", "dcsan", "lattice_lstm"])
def test_every_architecture_decodes_the_same_on_the_device(family_nlp, architecture: str):
    nlp = family_nlp(architecture)
    host = outputs(nlp, TEXTS, "numpy")
    assert any(ents for ents, _ in host), "a model with no entities compares nothing"
    assert_same(host, outputs(nlp, TEXTS, "torch"))


@pytest.mark.parametrize(
    "cfg",
    [
        {"constrain_boundaries": False},
        {"temperature": 2.5},
        {"temperature": 0.4, "threshold": 0.5},
        {"scores_key": None},
        {"window_size": 24, "window_overlap": 4},
    ],
    ids=["no-boundary-rules", "temperature", "threshold", "no-scores", "windows"],
)
def test_settings_decode_the_same_on_the_device(family_nlp, cfg: Dict[str, Any]):
    nlp = family_nlp("flat")
    texts = [*TEXTS, LONG]
    host = outputs(nlp, texts, "numpy", **cfg)
    assert any(ents for ents, _ in host)
    assert_same(host, outputs(nlp, texts, "torch", **cfg))
    if "threshold" in cfg:  # the threshold dropped some
        assert sum(len(e) for e, _ in host) < sum(len(e) for e, _ in outputs(nlp, texts, "numpy"))


@pytest.mark.parametrize("segmenter", ["jieba", "pkuseg"])
def test_word_segmenters_decode_the_same_on_the_device(family_nlp, segmenter: str, request):
    model = request.getfixturevalue("pkuseg_model") if segmenter == "pkuseg" else ""
    nlp = segmented_pipeline(family_nlp("flat"), segmenter, model)
    host = outputs(nlp, TEXTS, "numpy")
    assert any(ents for ents, _ in host)
    assert_same(host, outputs(nlp, TEXTS, "torch"))


def test_only_empty_docs_decode_to_nothing(family_nlp):
    assert outputs(family_nlp("flat"), ["", "", " "], "torch") == outputs(family_nlp("flat"), ["", "", " "], "numpy")


def test_float32_forward_backward_as_on_mps(family_nlp, monkeypatch):
    """Apple's MPS has no float64: the probabilities in float32 (log space) still agree closely."""
    nlp = family_nlp("flat")
    host = outputs(nlp, TEXTS, "numpy")
    monkeypatch.setattr(device_decoding, "wide_dtype", lambda device: torch.float32)
    device = outputs(nlp, TEXTS, "torch")
    assert [ents for ents, _ in device] == [ents for ents, _ in host]
    for (_, want), (_, got) in zip(host, device):
        assert got == pytest.approx(want, abs=1e-4)


def test_an_invalid_path_is_decoded_again_on_the_host(family_nlp, monkeypatch):
    """A row that is no valid BILUO sequence (constrained Viterbi gives none) sends the batch to the
    host path, which reads such rows as spaCy does."""
    nlp = family_nlp("flat")
    host = outputs(nlp, TEXTS, "numpy")
    viterbi = device_decoding.viterbi
    ner = nlp.get_pipe("flat_ner")
    inside = ner.tag_set.tags.index(next(tag for tag in ner.tag_set.tags if tag.startswith("I-")))

    def broken(*args: Any) -> torch.Tensor:
        paths = viterbi(*args)
        paths[0, 0] = inside  # an entity's inside tag at a row's start
        return paths

    monkeypatch.setattr(device_decoder, "viterbi", broken)
    calls: List[Any] = []
    real = ner.tagger.best_paths

    def counted(self: Any, *args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(type(ner.tagger), "best_paths", counted)
    assert_same(host, outputs(nlp, TEXTS, "torch"))
    assert calls, "the host path decoded no batch"


def test_auto_decodes_on_the_host_on_a_cpu(family_nlp):
    ner = family_nlp("flat").get_pipe("flat_ner")
    assert ner.cfg["decoding"] == "auto" and not ner.decodes_on_device
    ner.cfg["decoding"] = "torch"
    try:
        assert ner.decodes_on_device
    finally:
        ner.cfg["decoding"] = "auto"
    with pytest.raises(ValueError, match="decoding must be one of"):
        spacy.blank("zh").add_pipe("flat_ner", config={"decoding": "cuda"})


def test_device_decoded_batches_score_only_at_their_temperature(family_nlp):
    nlp = family_nlp("flat")
    ner = nlp.get_pipe("flat_ner")
    docs = [nlp.make_doc(text) for text in TEXTS]
    args = (docs, ner.segmenter, ner.tagger, ner.boundary_rules, ner.tag_set)
    decoded = decode_docs(*args, on_device=True, temperature=2.0)
    on_device, on_host = decoded.scored(2.0), decode_docs(*args).scored(2.0)
    assert [[span[:3] for span in doc] for doc in on_device] == [[span[:3] for span in doc] for doc in on_host]
    assert [span[3] for doc in on_device for span in doc] == pytest.approx(
        [span[3] for doc in on_host for span in doc], abs=1e-5
    )
    with pytest.raises(ValueError, match=r"at temperature 2\.0"):
        decoded.scored(1.0)


def test_the_sync_counter_sees_what_waits_for_the_device():
    values = torch.arange(6.0) - 2
    with SyncCounter() as counter:
        values[values > 0].sum()  # a boolean mask: its size is data
        values.nonzero()
        float(values.max())
        values.to("cpu", copy=True)
        values * 2  # waits for nothing
    assert len(counter.seen) == 4, counter.seen


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_decoding_a_batch_asks_the_device_at_most_twice(family_nlp, batch: int):
    nlp = family_nlp("flat")
    ner = nlp.get_pipe("flat_ner")
    texts = (TEXTS * 8)[:batch]
    segments, _ = ner.segmenter.segments([nlp.make_doc(t) for t in texts])
    scores = ner.model.predict(segments)
    lengths = [len(s) for s in segments]
    forbidden = ner.boundary_rules.forbidden([s.text for s in segments], ner.tag_set, scores.shape[1])
    with SyncCounter() as counter:
        found = ner.tagger.device_runs(scores, lengths, forbidden, ner.tag_set.labels, 1.0, True)
    assert found is not None and len(found[0][0]) > 0
    assert len(counter.seen) <= 2, counter.seen
    assert "nonzero" in " ".join(counter.seen)  # the counter sees what it counts


def test_calibration_keeps_its_emissions_on_the_host(family_nlp, tmp_path):
    """`calibrate` scores one decoding at many temperatures: it keeps host emissions, never the
    device path's runs, whatever the pipeline's `decoding` (on a GPU: no device memory held)."""
    import io

    import numpy

    from spacy_flat.cli.calibrate import Scored
    from spacy_flat.cli.convert import convert

    from ..util import TINY

    convert(TINY, tmp_path / "dev.spacy", log=io.StringIO())
    nlp = family_nlp("flat")
    ner = nlp.get_pipe("flat_ner")
    ner.cfg["decoding"] = "torch"
    try:
        scored = Scored(nlp, ner, [tmp_path / "dev.spacy"], batch_size=4)
    finally:
        ner.cfg["decoding"] = "auto"
    assert len(scored.batches) > 1
    assert all(isinstance(b.tagged.scores, numpy.ndarray) for b in scored.batches)
    assert scored.outcomes(0.5) and scored.outcomes(2.0)
