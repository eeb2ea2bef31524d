"""Entity scores on character offsets, and the paper's Span F and Type Acc, against counts by hand."""

import pytest
import spacy
from spacy.training import Example

from spacy_flat.cli.evaluate import span_scores
from spacy_flat.pipeline.scorer import score_char_entities

# (text, gold entities, predicted entities), character offsets.
DOCS = [
    ("张伟在北京大学工作", [(0, 2, "PER"), (3, 7, "ORG")], [(0, 2, "PER"), (3, 5, "LOC")]),
    ("李娜去上海", [(0, 2, "PER"), (3, 5, "LOC")], [(3, 5, "ORG")]),
    ("北京很冷", [], [(0, 2, "LOC")]),
]


def examples():
    nlp = spacy.blank("zh")
    made = []
    for text, gold, pred in DOCS:
        reference, predicted = nlp.make_doc(text), nlp.make_doc(text)
        reference.ents = [reference.char_span(s, e, label=label) for s, e, label in gold]
        predicted.ents = [predicted.char_span(s, e, label=label) for s, e, label in pred]
        made.append(Example(predicted, reference))
    return made


def test_entity_scores_count_exact_spans_with_their_labels():
    # Overall: 1 true positive (张伟 PER), 3 false positives, 3 misses.
    scores = score_char_entities(examples())
    assert scores["ents_p"] == pytest.approx(0.25) and scores["ents_r"] == pytest.approx(0.25)
    assert scores["ents_f"] == pytest.approx(0.25)
    per_type = scores["ents_per_type"]
    assert per_type["PER"] == pytest.approx({"p": 1.0, "r": 0.5, "f": 2 / 3})
    # ORG: one predicted where gold has LOC, one gold missed; LOC: two wrong, one missed.
    assert per_type["ORG"] == pytest.approx({"p": 0.0, "r": 0.0, "f": 0.0})
    assert per_type["LOC"] == pytest.approx({"p": 0.0, "r": 0.0, "f": 0.0})
    assert sorted(per_type) == ["LOC", "ORG", "PER"]


def test_entity_scores_are_none_without_any_entity():
    nlp = spacy.blank("zh")
    empty = [Example(nlp.make_doc("今天很冷"), nlp.make_doc("今天很冷"))]
    assert score_char_entities(empty) == {"ents_p": None, "ents_r": None, "ents_f": None, "ents_per_type": None}


def test_span_f_ignores_the_type_and_type_accuracy_counts_the_right_spans_typed_right():
    # Boundaries: 2 right (张伟 and 上海), 2 wrong (北京 of 北京大学, and of 北京很冷), 2 missed.
    scores = span_scores(examples())
    assert scores["span_p"] == pytest.approx(0.5) and scores["span_r"] == pytest.approx(0.5)
    assert scores["span_f"] == pytest.approx(0.5)
    # Of the two predictions with gold boundaries (张伟 PER, 上海 as ORG), one has the gold type.
    assert scores["type_acc"] == pytest.approx(0.5)
