"""FLAT+BERT: character features from a shared transformer (tiny ALBERT from ../shared)."""

import numpy
import pytest
import spacy
import spacy_transformers  # noqa: F401  (the [test] extra installs it: these tests never skip)
from spacy.training import Example

from spacy_flat.nn.dcsan import DcsanEncoder

from ..util import (
    SHARED,
    needs_shared,
    one_segment_per_group,
    small_config,
    small_lexicon,
    tiny_examples,
    tiny_records,
)

TINY_BERT = SHARED / "vectors" / "albert-tiny-chinese"


def build(use_char_embeddings: bool = True, architecture: str = "spacy-flat.FlatTransformerTagger.v2"):
    nlp = spacy.blank("zh")
    nlp.add_pipe(
        "transformer",
        config={
            "model": {
                "@architectures": "spacy-transformers.TransformerModel.v3",
                "name": str(TINY_BERT),
                "tokenizer_config": {"use_fast": True},
                "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 64, "stride": 48},
            }
        },
    )
    model = {
        **small_config()["model"],
        "@architectures": architecture,
        "use_char_embeddings": use_char_embeddings,
        "tok2vec": {
            "@architectures": "spacy-transformers.TransformerListener.v1",
            "grad_factor": 1.0,
            "pooling": {"@layers": "reduce_mean.v1"},
            "upstream": "*",
        },
    }
    nlp.add_pipe("flat_ner", config={"model": model})
    return nlp


def ents(doc):
    return [(e.start_char, e.end_char, e.label_) for e in doc.ents]


@pytest.fixture(scope="module")
def trained_trf(tmp_path_factory):
    if not TINY_BERT.exists():
        pytest.skip(f"{TINY_BERT} is absent")
    nlp = build()
    examples = tiny_examples(nlp)
    nlp.initialize(lambda: examples)
    nlp.get_pipe("flat_ner").initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    optimizer = nlp.create_optimizer()
    trf_before = nlp.get_pipe("transformer").model.to_bytes()
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    nlp.trf_changed = nlp.get_pipe("transformer").model.to_bytes() != trf_before  # type: ignore[attr-defined]
    return nlp


@needs_shared
@pytest.mark.slow
def test_trains_jointly_and_predicts(trained_trf):
    assert trained_trf.trf_changed  # the transformer is fine-tuned, not frozen
    assert trained_trf.get_pipe("flat_ner").cfg["feature_width"] == 312
    hits = sum(
        ents(trained_trf(r["text"])) == ents(eg.reference) for r, eg in zip(tiny_records(), tiny_examples(trained_trf))
    )
    assert hits >= 8


@needs_shared
@pytest.mark.slow
def test_every_character_gets_a_vector_latin_digits_unknown(trained_trf):
    ner = trained_trf.get_pipe("flat_ner")
    for text in ["Hello张伟2024年在北京😀", "  ", "ＡＢＣ工作", "𠀀张伟"]:
        doc = trained_trf(text)
        assert doc.text == text
        assert all(0 <= e.start_char < e.end_char <= len(text) for e in doc.ents)
        # One row of finite tag scores per character, whatever the tokenizer made of it.
        segments, _ = ner.segmenter.segments(list(trained_trf.pipe([text], disable=["flat_ner"])))
        scores = numpy.asarray(ner.model.predict(segments))
        assert scores.shape[0] == 1 and scores.shape[1] >= len(text) and scores.shape[2] == len(ner.tag_set)
        assert numpy.isfinite(scores[0, : len(text)]).all()


@needs_shared
@pytest.mark.slow
def test_save_and_load_give_identical_predictions(trained_trf, tmp_path):
    trained_trf.to_disk(tmp_path / "trf")
    loaded = spacy.load(tmp_path / "trf")
    texts = [r["text"] for r in tiny_records()] + ["王芳和李娜在上海的复旦大学见面。"]
    assert [ents(d) for d in loaded.pipe(texts)] == [ents(d) for d in trained_trf.pipe(texts)]
    # Entity probabilities on the transformer architecture too, the same after loading.
    before = [d.spans["flat_ner"].attrs["scores"] for d in trained_trf.pipe(texts)]
    after = [d.spans["flat_ner"].attrs["scores"] for d in loaded.pipe(texts)]
    assert all(0 < p <= 1 for row in after for p in row)
    assert [len(row) for row in after] == [len(d.ents) for d in loaded.pipe(texts)]
    assert numpy.allclose([p for row in after for p in row], [p for row in before for p in row], atol=1e-5)
    assert not any(
        p.name.endswith((".bin", ".safetensors")) for p in (tmp_path / "trf").rglob("*") if "pytorch_model" in p.name
    )


@needs_shared
def test_transformer_features_alone(tmp_path):
    nlp = build(use_char_embeddings=False)
    examples = tiny_examples(nlp)
    nlp.initialize(lambda: examples)
    module = nlp.get_pipe("flat_ner").tagger.module
    embeddings = module.embeddings
    # The characters' input is the transformer's vectors (and the bigrams), no character table.
    assert not embeddings.use_char_embeddings and embeddings.feature_width > 0
    widths = embeddings.feature_width + embeddings.bigram_width + embeddings.bigram_vector_width
    assert module.encoder.char_proj.in_features == embeddings.char_input_width == widths
    losses = nlp.update(examples, losses={})
    assert numpy.isfinite(losses["flat_ner"]) and losses["flat_ner"] > 0
    assert nlp("张伟在北京。").text == "张伟在北京。"


@needs_shared
def test_transformer_features_follow_the_characters_read_past_spaces():
    """With skip_spaces, each character read takes the features of its own token in the doc."""
    nlp = build(use_char_embeddings=False)
    examples = tiny_examples(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("flat_ner")
    ner.cfg["skip_spaces"] = True
    text = "张伟 在 北京 工作。"
    docs = list(nlp.pipe([text], disable=["flat_ner"]))
    (segment,), _ = ner.segmenter.segments(docs)
    assert segment.text == "张伟在北京工作。" and [text[i] for i in segment.char_offsets()] == list(segment.text)
    scores = numpy.asarray(ner.model.predict([segment]))
    assert scores.shape[1] >= len(segment.text) and numpy.isfinite(scores[0, : len(segment.text)]).all()
    doc = nlp(text)
    assert doc.text == text and all(0 <= e.start_char < e.end_char <= len(text) for e in doc.ents)


@needs_shared
@pytest.mark.slow
def test_dcsan_on_transformer_features_trains_saves_and_loads(tmp_path):
    """DC-SAN with BERT: the transformer's vectors are the characters the word sets attend to."""
    if not TINY_BERT.exists():
        pytest.skip(f"{TINY_BERT} is absent")
    nlp = build(architecture="spacy-flat.DcsanTransformerTagger.v2")
    examples = tiny_examples(nlp)
    nlp.initialize(lambda: examples)
    ner = nlp.get_pipe("flat_ner")
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    module = ner.tagger.module
    assert isinstance(module.encoder, DcsanEncoder) and module.embeddings.feature_width > 0
    assert ner.lexicon.counts is not None
    optimizer = nlp.create_optimizer()
    losses = [nlp.update(examples, sgd=optimizer, losses={})["flat_ner"] for _ in range(40)]
    assert losses[-1] < losses[0] / 3
    texts = ["张三在北京大学工作。", "王五住在上海。"]
    nlp.to_disk(tmp_path / "dcsan-trf")
    loaded = spacy.load(tmp_path / "dcsan-trf")
    assert [ents(d) for d in loaded.pipe(texts)] == [ents(nlp(t)) for t in texts]


def test_flat_learns_at_its_own_rate():
    from spacy_transformers.architectures import transformer_listener_tok2vec_v1

    from spacy_flat.pipeline.architectures import build_flat_transformer_tagger_v2

    listener = transformer_listener_tok2vec_v1(pooling=spacy.registry.layers.get("reduce_mean.v1")(), grad_factor=1.0)
    model = build_flat_transformer_tagger_v2(listener, learn_rate_scale=2.0)
    assert model.get_ref("tagger").shims[0].lr_scale == 2.0


@needs_shared
@pytest.mark.slow
def test_budget_groups_score_as_one_batch(trained_trf, monkeypatch):
    texts = [r["text"] for r in tiny_records()] + ["王芳和李娜在上海的复旦大学见面。", "张伟"]
    docs = list(trained_trf.pipe(texts, disable=["flat_ner"]))
    ner = trained_trf.get_pipe("flat_ner")
    segments, _ = ner.segmenter.segments(docs)
    whole = ner.model.predict(segments)
    whole_ents = [ents(d) for d in trained_trf.pipe(texts)]
    counts = one_segment_per_group(monkeypatch)
    split = ner.model.predict(segments)
    assert counts == [len(texts)]
    for row, text in enumerate(texts):
        numpy.testing.assert_allclose(split[row, : len(text)], whole[row, : len(text)], rtol=1e-4, atol=1e-4)
    # The entities of the pipeline split into one-segment groups are those of the whole batch.
    assert any(whole_ents) and [ents(d) for d in trained_trf.pipe(texts)] == whole_ents


def spy_on_listener(monkeypatch, nlp) -> list:
    """Record each call of flat_ner's listener: (doc lengths, vector rows, gradient sum or None)."""
    tok2vec = nlp.get_pipe("flat_ner").model.get_ref("tok2vec")
    listener_forward = tok2vec._func
    calls: list = []

    def spy(model, docs, is_train):
        vectors, backprop = listener_forward(model, docs, is_train)
        call = {"docs": [len(doc) for doc in docs], "rows": [len(v) for v in vectors], "gradient": None}
        calls.append(call)

        def spied_backprop(d_vectors):
            call["gradient"] = sum(float(numpy.abs(d).sum()) for d in d_vectors)
            return backprop(d_vectors)

        return vectors, spied_backprop

    monkeypatch.setattr(tok2vec, "_func", spy)
    return calls


@needs_shared
@pytest.mark.slow
def test_budget_groups_train_the_transformer(monkeypatch):
    nlp = build()
    examples = tiny_examples(nlp)
    nlp.initialize(lambda: examples)
    calls = spy_on_listener(monkeypatch, nlp)
    counts = one_segment_per_group(monkeypatch)
    optimizer = nlp.create_optimizer()
    losses = [nlp.update(examples, sgd=optimizer)["flat_ner"] for _ in range(2)]
    assert counts and all(count == len(examples) for count in counts)
    assert all(numpy.isfinite(loss) and loss > 0 for loss in losses)
    # Every group's gradient reaches the transformer's listener.
    assert len(calls) == 2 and all(call["gradient"] > 0 for call in calls)


@needs_shared
@pytest.mark.slow
def test_training_gives_each_doc_its_own_transformer_features(monkeypatch):
    """In training the listener returns the vectors of the batch as the
    transformer saw it (its batch id is a sum, blind to order), so FLAT must ask
    for every doc, in the batch's order: 0.1.0 sorted the docs by length and
    gave them each other's vectors, and crashed on an empty doc."""
    nlp = build()
    examples = sorted(tiny_examples(nlp), key=lambda eg: len(eg.predicted), reverse=True)
    examples.insert(3, Example.from_dict(nlp.make_doc(""), {"entities": []}))
    nlp.initialize(lambda: examples)
    calls = spy_on_listener(monkeypatch, nlp)
    losses = nlp.update(examples, sgd=nlp.create_optimizer())
    assert numpy.isfinite(losses["flat_ner"]) and losses["flat_ner"] > 0
    lengths = [len(eg.predicted) for eg in examples]
    assert [(call["docs"], call["rows"]) for call in calls] == [(lengths, lengths)]


@needs_shared
@pytest.mark.slow
def test_200k_character_document_in_bounded_memory(trained_trf, tmp_path):
    """Windows apply with transformer features too: one 200,000-character doc
    is encoded as 512-character segments, never as one n x n attention."""
    import subprocess
    import sys

    trained_trf.to_disk(tmp_path / "trf")
    script = f"""
import resource, spacy
nlp = spacy.load({str(tmp_path / "trf")!r})
text = "张伟毕业于北京大学，现在上海的华为公司工作。" * 9100
doc = nlp(text)
assert doc.text == text and all(0 <= e.start_char < e.end_char <= len(text) for e in doc.ents)
print(len(text), len(doc.ents), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    n_chars, n_ents, peak_mb = map(int, result.stdout.split())
    assert n_chars >= 200_000 and n_ents > 0
    # One attention over the whole doc would need 200,000^2 x 4 bytes = 160 GB.
    assert peak_mb < 6000, f"peak resident memory {peak_mb} MB"
