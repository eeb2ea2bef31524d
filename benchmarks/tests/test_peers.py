"""benchmarks/peers.py: word-level tags read as character spans, UNER's file format with its errors named by
line, and one scorer for every annotator."""

from pathlib import Path

import peers
import pytest


def test_word_tags_become_character_spans():
    words = ["新华社", "北京", "11", "月", "国务", "院", "总理", "李强"]
    tags = ["B-ORG", "B-LOC", "O", "O", "B-ORG", "I-ORG", "O", "B-PER"]
    assert peers.word_spans(words, tags) == {(0, 3, "ORG"), (3, 5, "LOC"), (8, 11, "ORG"), (13, 15, "PER")}
    # A stray I- starts an entity; a change of type ends one.
    assert peers.word_spans(["上海", "人"], ["I-LOC", "I-PER"]) == {(0, 2, "LOC"), (2, 3, "PER")}


def test_uner_sentences_are_read_as_characters(tmp_path: Path):
    path = tmp_path / "t.iob2"
    path.write_text(
        "# sent_id = a\n# text = 自从兴建人文大楼\n1\t自从\tO\t-\t-\n2\t兴建\tO\t-\t-\n"
        "3\t人文\tB-LOC\t-\tx\n4\t大楼\tI-LOC\t-\tx\n\n"
        "# text = 李四\n1\t李四\tB-PER\t-\t-\n",
        encoding="utf8",
    )
    assert peers.read_iob2_words(path) == [("自从兴建人文大楼", {(4, 8, "LOC")}), ("李四", {(0, 2, "PER")})]


def test_a_broken_line_is_named_with_its_file_and_number(tmp_path: Path):
    path = tmp_path / "t.iob2"
    path.write_text("# text = 李四\n1\t李四\tB-PER\n2 王五\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"t\.iob2:3"):
        peers.read_iob2_words(path)
    path.write_text("# text = 李四来\n1\t李四\tB-PER\n", encoding="utf8")
    with pytest.raises(ValueError, match="do not spell"):
        peers.read_iob2_words(path)


def test_the_shared_uner_test_set_reads_as_documented():
    if not peers.UNER_TEST.exists():
        pytest.skip("../shared/data/uner-gsdsimp is not here")
    sentences = peers.read_iob2_words(peers.UNER_TEST)
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
