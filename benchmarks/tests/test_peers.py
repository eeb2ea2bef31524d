"""benchmarks/peers.py: the peers' word-level tags read as character spans, the UNER test set as documented,
and one scorer for every annotator."""

import peers
import pytest


def test_word_tags_become_character_spans():
    words = ["新华社", "北京", "11", "月", "国务", "院", "总理", "李强"]
    tags = ["B-ORG", "B-LOC", "O", "O", "B-ORG", "I-ORG", "O", "B-PER"]
    assert peers.word_spans(words, tags) == {(0, 3, "ORG"), (3, 5, "LOC"), (8, 11, "ORG"), (13, 15, "PER")}
    # A stray I- starts an entity; a change of type ends one.
    assert peers.word_spans(["上海", "人"], ["I-LOC", "I-PER"]) == {(0, 2, "LOC"), (2, 3, "PER")}


def test_the_shared_uner_test_set_reads_as_documented():
    if not peers.UNER_TEST.exists():
        pytest.skip("../shared/data/uner-gsdsimp is not here")
    sentences = peers.gold("uner")
    assert len(sentences) == 500  # DATASETS.md: 500 sentences, 763 entities, 19,206 characters
    assert sum(len(spans) for _, spans in sentences) == 763
    assert sum(len(text) for text, _ in sentences) == 19206


def test_the_scorer_counts_exact_spans_per_label():
    got = [{(0, 2, "PER"), (3, 5, "LOC")}, {(0, 3, "ORG")}]
    want = [{(0, 2, "PER"), (3, 6, "LOC")}, {(0, 3, "ORG"), (4, 6, "PER")}]
    scores = peers.score(got, want)
    assert scores["all"] == {"p": 66.67, "r": 50.0, "f": 57.14}
    assert scores["PER"] == {"p": 100.0, "r": 50.0, "f": 66.67}
    assert scores["LOC"]["f"] == 0.0 and scores["ORG"]["f"] == 100.0


def test_the_timing_interleaves_and_scores_the_first_round():
    calls = []

    def make(name, spans):
        def annotate(texts):
            calls.append(name)
            return [spans for _ in texts]

        return annotate

    test_sets = {"x": [("李四", {(0, 2, "PER")})]}
    measured = peers.measure({"a": make("a", {(0, 2, "PER")}), "b": make("b", set())}, test_sets, rounds=2)
    assert calls == ["a", "b", "a", "b"]
    assert measured["a"]["scores"]["x"]["all"]["f"] == 100.0 and measured["b"]["scores"]["x"]["all"]["f"] == 0.0
    assert set(measured["a"]["chars_per_s"]) == {"median", "min", "max"}


def test_the_traditional_test_set_keeps_every_offset():
    pytest.importorskip("opencc")
    assert peers.traditional("习近平在北京人民大会堂会见了美国国务卿。") == "習近平在北京人民大會堂會見了美國國務卿。"
    if not peers.UNER_TEST.exists():
        pytest.skip("../shared/data/uner-gsdsimp is not here")
    simplified, converted = peers.gold("uner"), peers.gold("uner-traditional")
    assert [len(t) for t, _ in converted] == [len(t) for t, _ in simplified]
    assert [spans for _, spans in converted] == [spans for _, spans in simplified]
    changed = sum(a != b for (a, _), (b, _) in zip(simplified, converted))
    assert changed > 400  # nearly every Wikipedia sentence has a character that changes


def test_the_spaced_test_set_moves_every_span_with_its_words():
    assert peers.word_spans(["马云", "在", "杭州"], ["B-PER", "O", "B-LOC"], " ") == {(0, 2, "PER"), (5, 7, "LOC")}
    assert peers.word_spans(["阿里巴巴", "集团"], ["B-ORG", "I-ORG"], " ") == {(0, 7, "ORG")}
    if not peers.UNER_TEST.exists():
        pytest.skip("../shared/data/uner-gsdsimp is not here")
    plain, spaced = peers.gold("uner"), peers.gold("uner-spaced")
    assert len(spaced) == len(plain) and sum(len(spans) for _, spans in spaced) == 763
    for (text, spans), (spaced_text, spaced_spans) in zip(plain, spaced):
        assert spaced_text.replace(" ", "") == text.replace(" ", "") and " " in spaced_text
        spaces = [spaced_text[:i].count(" ") for i in range(len(spaced_text) + 1)]
        assert {(s - spaces[s], e - spaces[e], label) for s, e, label in spaced_spans} == spans
