"""Hostile input and long documents through the component: nothing crashes a batch or shifts an offset."""

import pickle

import pytest
import spacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.training import Example

from .util import SHARED, needs_shared, tiny_records

HOSTILE = {
    "empty": "",
    "whitespace": " \t\n  ",
    "latin": "Hello World from OpenAI and Google",
    "digits": "1234567890 2024",
    "punctuation": "。，！？、；：“”（）《》…—",
    "emoji": "张伟😀在北京🎉工作👍🏽",
    "astral": "𠀀𠀁𪚥张伟在北京",
    "combining": "e\u0301张\u0301伟在北京",
    "control": "张伟\x00在\x07北京\x1b工作",
    "replacement": "\ufffd\ufffd张伟在北京\ufffd",
    "fullwidth": "ＡＢＣ１２３张伟在北京，ｈｅｌｌｏ",
    "halfwidth": "ｶﾀｶﾅ张伟在北京",
    "newlines_tabs_spaces": "张伟\n\n在北京\t\t工作   李娜 \n",
    "long_latin_run": "a" * 700,
}


def check_doc(doc, text):
    assert doc.text == text
    previous_end = 0
    for ent in doc.ents:
        assert 0 <= ent.start_char < ent.end_char <= len(text)
        assert ent.text == text[ent.start_char : ent.end_char]
        assert ent.start_char >= previous_end  # no overlaps
        assert not ent.text[0].isspace() and not ent.text[-1].isspace()
        previous_end = ent.end_char


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_alone(trained_nlp, name):
    check_doc(trained_nlp(HOSTILE[name]), HOSTILE[name])


def test_hostile_input_in_one_batch_matches_one_by_one(trained_nlp):
    texts = list(HOSTILE.values())
    batched = list(trained_nlp.pipe(texts, batch_size=len(texts)))
    for text, doc in zip(texts, batched):
        check_doc(doc, text)
        assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == [
            (e.start_char, e.end_char, e.label_) for e in trained_nlp(text).ents
        ]


@pytest.fixture(scope="module")
def pkuseg_model(tmp_path_factory) -> str:
    """A small pkuseg model trained here on jieba's segmentation of the tiny corpus:
    spaCy's own pkuseg models download at initialize, and nothing may download."""
    import jieba
    import spacy_pkuseg

    root = tmp_path_factory.mktemp("pkuseg")
    lines = [" ".join(jieba.cut(record["text"])) for record in tiny_records()]
    (root / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf8")
    spacy_pkuseg.train(str(root / "train.txt"), str(root / "train.txt"), str(root / "model"), train_iter=2)
    return str(root / "model")


def segmented_pipeline(trained_nlp, segmenter: str, pkuseg_model: str) -> spacy.Language:
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"segmenter": segmenter}}})
    if segmenter == "pkuseg":
        nlp.tokenizer.initialize(pkuseg_model=pkuseg_model)
    nlp.add_pipe("flat_ner", source=trained_nlp)
    return nlp


@pytest.mark.parametrize("segmenter", ["jieba", "pkuseg"])
def test_word_segmenter_pipeline(trained_nlp, segmenter, request, tmp_path):
    """Multi-character tokens: entities keep their character offsets, and the
    pipeline (pkuseg model included) saves and loads with the same output."""
    model = request.getfixturevalue("pkuseg_model") if segmenter == "pkuseg" else ""
    nlp = segmented_pipeline(trained_nlp, segmenter, model)
    text = "张伟毕业于北京大学，现在上海工作。"
    assert any(len(token) > 1 for token in nlp.make_doc(text))
    for sample in [text, *HOSTILE.values()]:
        check_doc(nlp(sample), sample)
    # The character-level entities, each snapped out to the words around it.
    doc = nlp(text)
    char_level = [(e.start_char, e.end_char, e.label_) for e in trained_nlp(text).ents]
    snapped = [doc.char_span(s, e, label=label, alignment_mode="expand") for s, e, label in char_level]
    assert char_level and [(e.start_char, e.end_char, e.label_) for e in doc.ents] == [
        (span.start_char, span.end_char, span.label_) for span in snapped
    ]
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    for sample in [text, *HOSTILE.values()]:
        assert [t.text for t in loaded(sample)] == [t.text for t in nlp(sample)]
        assert [(e.start_char, e.end_char, e.label_) for e in loaded(sample).ents] == [
            (e.start_char, e.end_char, e.label_) for e in nlp(sample).ents
        ]


CHARS = st.sampled_from(list("张伟李娜王芳在北京上海大学工作。，！ \n\tA1😀\u0301\x00\ufffdＡ"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(alphabet=CHARS, max_size=40), min_size=1, max_size=6))
def test_pipe_equals_call_on_random_text(trained_nlp, texts):
    piped = list(trained_nlp.pipe(texts, batch_size=3))
    for text, doc in zip(texts, piped):
        check_doc(doc, text)
        assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == [
            (e.start_char, e.end_char, e.label_) for e in trained_nlp(text).ents
        ]


def test_long_document_is_windowed_and_loses_nothing(trained_nlp):
    nlp = pickle.loads(pickle.dumps(trained_nlp))
    sentences = ["张伟毕业于北京大学。", "李娜在上海工作。", "王芳加入了华为公司。"] * 40
    text = "".join(sentences)
    ner = nlp.get_pipe("flat_ner")
    expected = []
    offset = 0
    for sentence in sentences:
        # predict gives (start, end, label, probability): the probability differs with the context.
        expected += [(s[0] + offset, s[1] + offset, s[2]) for s in ner.predict([nlp.make_doc(sentence)])[0]]
        offset += len(sentence)
    ner.cfg["window_size"] = 64
    ner.cfg["window_overlap"] = 8
    doc = nlp(text)
    check_doc(doc, text)
    got = [(e.start_char, e.end_char, e.label_) for e in doc.ents]
    assert len(expected) == 240  # two entities per sentence
    assert got == expected


def test_training_windows_keep_every_gold_entity(trained_nlp):
    nlp = pickle.loads(pickle.dumps(trained_nlp))
    ner = nlp.get_pipe("flat_ner")
    ner.cfg["window_size"] = 24
    ner.cfg["window_overlap"] = 4
    text = "张伟毕业于北京大学。" * 12
    spans = [(i * 10, i * 10 + 2, "PER") for i in range(12)] + [(i * 10 + 5, i * 10 + 9, "ORG") for i in range(12)]
    eg = Example.from_dict(nlp.make_doc(text), {"entities": spans})
    segments, gold = ner._training_segments([eg])
    assert len(segments) > 1
    assert sum(len(ner._tag_set.decode(g)) for g in gold) == len(spans)
    assert sum(len(s.text) for s in segments) == len(text)
    nlp.update([eg], sgd=nlp.resume_training())


@needs_shared
def test_msra_longest_test_sentence(trained_nlp):
    blocks = (SHARED / "data/msra/test.char.bmes").read_text(encoding="utf8").split("\n\n")
    longest = max(("".join(line.split(" ")[0] for line in b.splitlines() if line) for b in blocks), key=len)
    assert len(longest) == 1475
    check_doc(trained_nlp(longest), longest)


@pytest.mark.slow
def test_200k_character_document(trained_nlp):
    text = "张伟毕业于北京大学，现在上海的华为公司工作。" * 9100
    assert len(text) >= 200_000
    check_doc(trained_nlp(text), text)
