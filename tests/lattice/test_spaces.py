"""Spaces beside Chinese characters, read past (`skip_spaces`), with the doc's offsets kept."""

import pytest
import spacy
from spacy.language import Language

from spacy_flat.lattice.spaces import read_offsets
from spacy_flat.lattice.windows import Segmenter

from ..util import tiny_records


def read(text: str) -> str:
    offsets = read_offsets(text)
    return text if offsets is None else "".join(text[i] for i in offsets[:-1])


def test_runs_of_spaces_beside_a_chinese_character_are_read_past() -> None:
    assert read_offsets("马云在杭州创办了阿里巴巴") is None
    assert read("马云 在  杭州\t创办了\u3000阿里巴巴") == "马云在杭州创办了阿里巴巴"
    # Between Latin words a space stays; beside a Chinese character it goes, at either side of the run.
    assert read("苹果 CEO Tim Cook 说") == "苹果CEO Tim Cook说"
    assert read(" 北京 ") == "北京"
    # Line breaks are not spaces: they end a line, and the boundary rules see them.
    assert read("阿里巴巴 \n 集团") == "阿里巴巴\n集团"
    assert read("a b") == "a b" and read("") == ""
    offsets = read_offsets("马云 在")
    assert offsets == [0, 1, 3, 4]


def test_the_segmenter_maps_spans_both_ways() -> None:
    nlp = spacy.blank("zh")
    text = "马云 在 杭州 创办了 阿里巴巴 集团。"
    doc = nlp.make_doc(text)
    segmenter = Segmenter(512, 32, skip_spaces=True)
    (segment,), plans = segmenter.segments([doc])
    assert segment.text == "马云在杭州创办了阿里巴巴集团。"
    assert [text[i] for i in segment.char_offsets()] == list(segment.text)
    # An entity read over the skipped space covers it in the doc.
    found = segmenter.merge(plans, [[(0, 2, "PER"), (3, 5, "LOC"), (8, 14, "ORG")]])
    assert found == [[(0, 2, "PER"), (5, 7, "LOC"), (12, 19, "ORG")]]
    assert text[12:19] == "阿里巴巴 集团"
    ((train_segment, inside),) = segmenter.training_segments(doc, [(0, 2, "PER"), (12, 19, "ORG")])
    assert train_segment.text == segment.text and inside == [(0, 2, "PER"), (8, 14, "ORG")]
    # Off, the segment is the doc's text and its offsets a slice.
    (plain,), _ = Segmenter(512, 32).segments([doc])
    assert plain.text == text and plain.char_offsets() == slice(0, len(text))


def test_windows_of_a_long_spaced_doc_map_back() -> None:
    nlp = spacy.blank("zh")
    words = ["张三", "在", "北京", "工作", "。"] * 12
    text = " ".join(words)
    doc = nlp.make_doc(text)
    segmenter = Segmenter(window_size=24, window_overlap=4, skip_spaces=True)
    segments, plans = segmenter.segments([doc])
    assert len(segments) > 2
    # Each segment finds every 张三 it reads; merging keeps each once, in the doc's offsets.
    per_segment = [[(k, k + 2, "PER") for k in range(len(s.text) - 1) if s.text[k : k + 2] == "张三"] for s in segments]
    (found,) = segmenter.merge(plans, per_segment)
    expected = [(i, i + 2, "PER") for i in range(len(text)) if text.startswith("张三", i)]
    assert found == expected
    for segment in segments:
        assert "".join(text[i] for i in segment.char_offsets()) == segment.text


def test_a_pipeline_reads_spaced_text_as_the_text_without_spaces(trained_nlp: Language) -> None:
    """The model reads exactly what it reads without the spaces: the same entities, moved, and the same
    probabilities."""
    texts = [record["text"] for record in tiny_records()]
    spaced = [" ".join(text) for text in texts]  # a space between every two characters

    def entities(batch):
        docs = list(trained_nlp.pipe(batch))
        found = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs]
        return found, [float(p) for doc in docs for p in doc.spans["flat_ner"].attrs["scores"]]

    ner = trained_nlp.get_pipe("flat_ner")
    plain_found, plain_scores = entities(texts)
    ner.cfg["skip_spaces"] = True
    try:
        found, scores = entities(spaced)
        unchanged, _ = entities(texts)
    finally:
        ner.cfg["skip_spaces"] = False
    assert any(plain_found) and unchanged == plain_found
    # Character k of a text stands at 2k in its spaced form.
    assert found == [[(2 * s, 2 * e - 1, label) for s, e, label in doc] for doc in plain_found]
    assert scores == pytest.approx(plain_scores, abs=1e-5)
    docs = list(trained_nlp.pipe(spaced))
    assert [doc.text for doc in docs] == spaced
