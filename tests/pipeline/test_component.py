"""The flat_ner component: creation, training, prediction, serialization."""

import pickle
import warnings

import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_flat.errors import PipelineFileError
from spacy_flat.pipeline.flat_ner import FlatNER

from ..util import build_small, scores_of, small_config, small_lexicon, tiny_examples, tiny_records


def ents(doc: Doc):
    return [(e.start_char, e.end_char, e.label_) for e in doc.ents]


def test_add_pipe_defaults_is_paper_sized():
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner")
    assert isinstance(ner, FlatNER)
    cfg = nlp.config["components"]["flat_ner"]["model"]
    assert (cfg["width"], cfg["n_heads"], cfg["ffn_width"], cfg["n_layers"]) == (160, 8, 480, 1)
    assert (cfg["embed_dropout"], cfg["output_dropout"]) == (0.5, 0.3)


def test_add_pipe_with_config():
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner", config={**small_config(), "alignment_mode": "strict"})
    assert nlp.config["components"]["flat_ner"]["model"]["width"] == 32
    with pytest.raises(ValueError, match="alignment_mode"):
        spacy.blank("zh").add_pipe("flat_ner", config={"alignment_mode": "sideways"})


def test_not_initialized_error():
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner", config=small_config())
    with pytest.raises(ValueError, match="not initialized"):
        nlp("张伟在北京。")


def test_initialize_with_embedded_defaults_reads_labels_from_data():
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner", config=small_config())
    nlp.initialize(lambda: tiny_examples(nlp))
    ner = nlp.get_pipe("flat_ner")
    assert ner.labels == ("LOC", "ORG", "PER")
    assert len(ner.lexicon) > 300_000  # jieba's dict.txt, 2+ characters
    assert "北京大学" in ner.lexicon
    assert len(ner.char_vocab) >= 20_941
    doc = nlp("重庆人和药店的老板张三在上海。")
    assert all(e.label_ in ner.labels for e in doc.ents)


def test_initialize_without_entities_fails_clearly():
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner", config=small_config())
    examples = [Example.from_dict(nlp.make_doc("今天天气很好。"), {"entities": []})]
    with pytest.raises(ValueError, match="no entity labels"):
        nlp.initialize(lambda: examples)


def test_overfits_tiny_corpus_exactly(trained_nlp):
    for rec, eg in zip(tiny_records(), tiny_examples(trained_nlp)):
        assert ents(trained_nlp(rec["text"])) == ents(eg.reference), rec["text"]


def test_empty_and_whitespace_docs(trained_nlp):
    assert ents(trained_nlp("")) == []
    assert ents(trained_nlp("   ")) == []
    docs = list(trained_nlp.pipe(["", "张伟毕业于北京大学。", "", " \n\t "]))
    assert ents(docs[1]) == [(0, 2, "PER"), (5, 9, "ORG")]
    assert ents(docs[0]) == ents(docs[2]) == []


def test_update_with_empty_docs_only():
    nlp = build_small(steps=1)
    examples = [Example.from_dict(nlp.make_doc(""), {"entities": []})]
    losses = nlp.update(examples, sgd=nlp.resume_training())
    assert losses["flat_ner"] == 0.0
    mixed = examples + tiny_examples(nlp)[:2]
    assert nlp.update(mixed, sgd=nlp.resume_training())["flat_ner"] > 0.0


def test_pipe_equals_call_and_is_stable(trained_nlp):
    texts = [r["text"] for r in tiny_records()] + ["北京", "张伟，李娜，王芳在上海和广州。" * 3]
    one_by_one = [ents(trained_nlp(t)) for t in texts]
    assert [ents(d) for d in trained_nlp.pipe(texts, batch_size=3)] == one_by_one
    assert [ents(d) for d in trained_nlp.pipe(texts)] == one_by_one


def test_pipe_with_two_processes(trained_nlp):
    texts = [r["text"] for r in tiny_records()]
    expected = [ents(trained_nlp(t)) for t in texts]
    assert [ents(d) for d in trained_nlp.pipe(texts, n_process=2, batch_size=4)] == expected


def test_to_disk_and_spacy_load_give_identical_predictions(trained_nlp, tmp_path):
    texts = [r["text"] for r in tiny_records()]
    trained_nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    for text in texts:
        assert ents(loaded(text)) == ents(trained_nlp(text))
    a = scores_of(trained_nlp, texts[0])
    b = scores_of(loaded, texts[0])
    assert (a == b).all()
    assert loaded.get_pipe("flat_ner").lexicon.words == trained_nlp.get_pipe("flat_ner").lexicon.words


def test_to_bytes_round_trip(trained_nlp):
    data = trained_nlp.to_bytes()
    nlp2 = spacy.blank("zh")
    nlp2.add_pipe("flat_ner", config=small_config())
    nlp2.from_bytes(data)
    for rec in tiny_records():
        assert ents(nlp2(rec["text"])) == ents(trained_nlp(rec["text"]))


def test_pickle_round_trip(trained_nlp):
    nlp2 = pickle.loads(pickle.dumps(trained_nlp))
    assert ents(nlp2("张伟毕业于北京大学。")) == ents(trained_nlp("张伟毕业于北京大学。"))


def test_missing_file_in_saved_pipeline_is_named(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "p")
    (tmp_path / "p" / "flat_ner" / "lexicon.msgpack").unlink()
    with pytest.raises(PipelineFileError, match=r"lexicon\.msgpack"):
        spacy.load(tmp_path / "p")


def test_damaged_weights_are_reported(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "p")
    (tmp_path / "p" / "flat_ner" / "model").write_bytes(b"not a model")
    with pytest.raises(PipelineFileError, match="model"):
        spacy.load(tmp_path / "p")


def test_lexicon_takes_new_words_on_next_call(trained_nlp):
    nlp = pickle.loads(pickle.dumps(trained_nlp))
    lexicon = nlp.get_pipe("flat_ner").lexicon
    before = len(lexicon)
    assert "人和药店" not in lexicon
    lexicon.add("人和药店")
    assert len(lexicon) == before + 1 and "人和药店" in lexicon
    plain = scores_of(trained_nlp, "重庆人和药店")
    with_word = scores_of(nlp, "重庆人和药店")
    assert not (plain == with_word).all()  # the new word changed the lattice


def test_jieba_segmenter_pipeline_keeps_character_offsets(trained_nlp):
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"segmenter": "jieba"}}})
    nlp.add_pipe("flat_ner", source=trained_nlp)
    text = "张伟毕业于北京大学。"
    ner = nlp.get_pipe("flat_ner")
    before = dict(ner.alignment_report)  # sourcing shares the component: it has counted other tests' docs
    doc = nlp(text)
    counted = {key: ner.alignment_report[key] - before[key] for key in before}
    assert len(doc) < len(text)  # words, not characters
    char_level = ents(trained_nlp(text))
    assert char_level
    # Each character-level entity, snapped to the words around it ("expand"), as it stands in the doc.
    snapped = [doc.char_span(s, e, label=label, alignment_mode="expand") for s, e, label in char_level]
    assert ents(doc) == [(span.start_char, span.end_char, span.label_) for span in snapped]
    exact = sum(span.start_char == s and span.end_char == e for span, (s, e, _) in zip(snapped, char_level))
    assert counted == {"exact": exact, "snapped": len(char_level) - exact, "dropped": 0}


def test_unaligned_spans_are_counted_in_strict_mode(trained_nlp):
    nlp = spacy.blank("zh")
    # A copy: sourcing shares the component object, and this test changes its settings.
    nlp.add_pipe("flat_ner", source=pickle.loads(pickle.dumps(trained_nlp)))
    ner = nlp.get_pipe("flat_ner")
    ner.cfg["alignment_mode"] = "strict"
    doc = Doc(nlp.vocab, words=["张伟毕业", "于", "北京大学", "。"], spaces=[False] * 4)
    before = dict(ner.alignment_report)
    ner(doc)
    assert [e.text for e in doc.ents] == ["北京大学"]
    assert ner.alignment_report["dropped"] == before["dropped"] + 1


def test_word2vec_lexicon_trains_with_its_vectors_and_round_trips(tmp_path):
    """A lexicon with vectors: they feed the word embeddings through their own
    projection, which learns, and the saved pipeline needs no vector file."""
    import numpy
    import torch
    from spacy.util import fix_random_seed

    from spacy_flat.lattice.loaders import create_word2vec_lexicon

    from ..util import SMALL_WORDS

    rng = numpy.random.default_rng(0)
    rows = [f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=6)) for w in SMALL_WORDS]
    lines = [f"{len(SMALL_WORDS)} 6", *rows]
    (tmp_path / "words.vector").write_text("\n".join(lines) + "\n", encoding="utf8")
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=create_word2vec_lexicon(str(tmp_path / "words.vector")))
    module = ner.tagger.module.embeddings
    assert module.vector_proj is not None and module.vector_proj.in_features == 6
    before = module.vector_proj.weight.detach().clone()
    optimizer = nlp.create_optimizer()
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    assert not torch.equal(before, module.vector_proj.weight.detach())
    texts = [r["text"] for r in tiny_records()]
    assert sum(ents(nlp(t)) == ents(eg.reference) for t, eg in zip(texts, examples)) >= len(texts) // 2
    nlp.to_disk(tmp_path / "pipeline")
    (tmp_path / "words.vector").unlink()
    loaded = spacy.load(tmp_path / "pipeline")
    for text in texts:
        assert ents(loaded(text)) == ents(nlp(text))


def test_bigram_vectors_widen_the_character_input_learn_and_round_trip(tmp_path):
    """bigram_vectors: the lexicon's vector of each character's bigram joins the
    character input; the saved pipeline needs no vector file, and a lexicon
    without vectors is refused at initialize."""
    import numpy
    import torch
    from spacy.util import fix_random_seed

    from spacy_flat.lattice.lexicon import Lexicon

    from ..util import SMALL_WORDS

    config = small_config()
    config["model"]["bigram_vectors"] = True
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=config)
    examples = tiny_examples(nlp)
    with pytest.raises(ValueError, match=r"bigram_vectors = true needs a bigram table .* or a lexicon with vectors"):
        ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    rng = numpy.random.default_rng(0)
    vectors = rng.normal(size=(len(SMALL_WORDS), 6)).astype("float32")
    fix_random_seed(0)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=lambda: Lexicon(SMALL_WORDS, vectors))
    char_width, char_proj = ner.tagger.module.embeddings.char_width, ner.tagger.module.encoder.char_proj
    assert char_proj.in_features == char_width + 6
    bigram_columns = char_proj.weight[:, char_width:].detach().clone()
    optimizer = nlp.create_optimizer()
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    assert not torch.equal(bigram_columns, char_proj.weight[:, char_width:].detach())
    texts = [r["text"] for r in tiny_records()]
    assert sum(ents(nlp(t)) == ents(eg.reference) for t, eg in zip(texts, examples)) >= len(texts) // 2
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("flat_ner").tagger.module.encoder.char_proj.in_features == char_width + 6
    for text in texts:
        assert ents(loaded(text)) == ents(nlp(text))


def test_word2vec_char_vectors_set_the_table_and_need_a_matching_width(tmp_path):
    """Character vectors from a word2vec file (the paper's Giga vectors are one):
    the table is copied in at initialize, the width must match char_width, and
    the saved pipeline needs no vector file."""
    import numpy

    from spacy_flat.lattice.loaders import create_word2vec_char_vectors

    chars = sorted({c for r in tiny_records() for c in r["text"]})
    rng = numpy.random.default_rng(0)
    vectors = {c: rng.normal(size=6) for c in chars}
    lines = [f"{len(chars)} 6"] + [f"{c} " + " ".join(f"{x:.5f}" for x in v) for c, v in vectors.items()]
    (tmp_path / "chars.vec").write_text("\n".join(lines) + "\n", encoding="utf8")
    load_chars = create_word2vec_char_vectors(str(tmp_path / "chars.vec"))
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    examples = tiny_examples(nlp)
    with pytest.raises(ValueError, match=r"width 6 but the model's char_width is 128; set .* char_width = 6"):
        ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon(), char_vectors=load_chars)
    config = small_config()
    config["model"]["char_width"] = 6
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=config)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon(), char_vectors=load_chars)
    table = ner.tagger.module.embeddings.char_embed.weight.detach().numpy()
    assert numpy.allclose(table[ner.char_vocab.row(chars[0])], vectors[chars[0]], atol=1e-5)
    optimizer = nlp.create_optimizer()
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(tmp_path / "pipeline")
    (tmp_path / "chars.vec").unlink()
    loaded = spacy.load(tmp_path / "pipeline")
    for eg in examples:
        assert ents(loaded(eg.reference.text)) == ents(nlp(eg.reference.text))


def test_weights_saved_from_cuda_load_on_a_machine_without_cuda(trained_nlp, tmp_path):
    """A GPU-saved pipeline's weights record each tensor's device as "cuda:0".
    Saving here with that tag (torch's own storage-location registry) writes the
    same bytes a GPU would on this CPU-only machine: plain `torch.load` refuses
    them, `spacy.load` must not."""
    import io
    import zipfile

    import srsly
    import torch
    import torch.serialization as serialization

    if torch.cuda.is_available():
        pytest.skip("the GPU lane covers a machine with CUDA")
    entry = (0, lambda storage: "cuda:0", lambda storage, location: None)
    serialization._package_registry.insert(0, entry)
    try:
        trained_nlp.to_disk(tmp_path / "pipeline")
    finally:
        serialization._package_registry.remove(entry)
    # The component's thinc model file holds the torch.save payload of its one shim.
    shims = srsly.msgpack_loads((tmp_path / "pipeline" / "flat_ner" / "model").read_bytes())["shims"]
    state = next(srsly.msgpack_loads(blob)["state"] for node in shims for blob in node)
    with zipfile.ZipFile(io.BytesIO(state)) as zf:
        assert b"cuda:0" in zf.read(next(n for n in zf.namelist() if n.endswith("data.pkl")))
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(io.BytesIO(state), weights_only=True)
    loaded = spacy.load(tmp_path / "pipeline")
    for rec in tiny_records():
        assert ents(loaded(rec["text"])) == ents(trained_nlp(rec["text"]))


def test_training_on_labels_the_model_lacks_warns_once_per_label():
    """A sourced model trained on data with other labels skips those entities,
    and says so instead of losing them silently."""
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    text = "张伟教授在北京大学读书。"
    entities = [(0, 2, "PER"), (2, 4, "TITLE"), (5, 9, "SCHOOL")]
    eg = Example.from_dict(nlp.make_doc(text), {"entities": entities})
    with pytest.warns(UserWarning, match=r"skips gold entities labelled \['SCHOOL', 'TITLE'\]"):
        nlp.update([eg], sgd=nlp.resume_training())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nlp.update([eg], sgd=nlp.resume_training())


def test_loading_without_the_weights_keeps_the_resources(trained_nlp):
    data = trained_nlp.get_pipe("flat_ner").to_bytes()
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=small_config())
    ner.from_bytes(data, exclude=["model"])
    assert ner.lexicon is not None and ner.lexicon.words == trained_nlp.get_pipe("flat_ner").lexicon.words
    assert ner.labels == trained_nlp.get_pipe("flat_ner").labels and ner.is_initialized


def test_settings_given_at_load_time_win_over_saved_ones(trained_nlp, tmp_path):
    trained_nlp.to_disk(tmp_path / "p")
    nlp = spacy.load(
        tmp_path / "p", config={"components": {"flat_ner": {"constrain_boundaries": False, "window_size": 64}}}
    )
    ner = nlp.get_pipe("flat_ner")
    assert ner.cfg["window_size"] == 64 and ner.boundary_rules is None
    assert ner.cfg["boundaries"] == trained_nlp.get_pipe("flat_ner").cfg["boundaries"]  # learned state is kept


def test_get_loss_of_empty_docs_is_zero(trained_nlp):
    from spacy.training import Example

    ner = trained_nlp.get_pipe("flat_ner")
    examples = [Example.from_dict(trained_nlp.make_doc(""), {"entities": []})]
    segments, _ = ner._training_segments(examples)
    scores = ner.model.predict(segments)
    loss, d_scores = ner.get_loss(examples, scores)
    assert loss == 0.0 and not d_scores.any()


def test_a_pretrained_bigram_table_feeds_every_character_and_round_trips(tmp_path):
    """The paper's bigram embedding: each character gets its bigram's pretrained
    vector; a learned vector stands in where the table lacks the bigram."""
    import numpy

    from spacy_flat.lattice.loaders import create_word2vec_bigram_vectors

    bigrams = ["张伟", "毕业", "北京", "大学", "上海", "工作"]
    rng = numpy.random.default_rng(0)
    rows = [f"{b} " + " ".join(f"{x:.4f}" for x in rng.normal(size=4)) for b in [*bigrams, "北京大学", "张"]]
    (tmp_path / "bigrams.vec").write_text(f"{len(rows)} 4\n" + "\n".join(rows) + "\n", encoding="utf8")
    table = create_word2vec_bigram_vectors(str(tmp_path / "bigrams.vec"))()
    assert sorted(table.words) == sorted(bigrams)  # only two-character entries
    config = small_config()
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=config)
    examples = tiny_examples(nlp)
    with pytest.raises(ValueError, match="bigram_vectors = true"):
        ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon(), bigram_vectors=lambda: table)
    config["model"]["bigram_vectors"] = True
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=config)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon(), bigram_vectors=lambda: table)
    module = ner.tagger.module.embeddings
    assert module.bigram_vector_width == 4 and module.bigram_fallback is not None
    segments, _ = ner.segmenter.segments([nlp.make_doc("张伟在北京")])
    batch, _ = ner.model.get_ref("features")(segments, is_train=False)
    assert batch.bigram_missing.tolist() == [False, True, True, False, True]
    optimizer = nlp.create_optimizer()
    for _ in range(20):
        nlp.update(examples, sgd=optimizer)
    assert module.bigram_fallback.detach().abs().sum() > 0  # the stand-in learns
    nlp.to_disk(tmp_path / "p")
    assert (tmp_path / "p" / "flat_ner" / "bigrams.msgpack").exists()
    loaded = spacy.load(tmp_path / "p")
    texts = [r["text"] for r in tiny_records()]
    assert [ents(d) for d in loaded.pipe(texts)] == [ents(d) for d in nlp.pipe(texts)]


def test_the_model_says_it_reads_segments_when_given_docs(trained_nlp):
    ner = trained_nlp.get_pipe("flat_ner")
    with pytest.raises(TypeError, match=r"ner\.segmenter\.segments"):
        ner.model.predict([trained_nlp.make_doc("张伟")])
