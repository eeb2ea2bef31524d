"""Windows (windows.py): plans that tile a text, cuts that spare entities,
segments for every doc and merging without loss."""

import spacy
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_flat.lattice.windows import Segmenter, merge_window_spans, plan_windows


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("甲乙丙丁。！\n ")), min_size=0, max_size=300),
    size=st.integers(min_value=8, max_value=80),
    overlap=st.integers(min_value=0, max_value=20),
)
def test_windows_tile_the_text(text, size, overlap):
    windows = plan_windows(text, size, overlap)
    assert windows[0].own_start == 0 and windows[-1].own_end == len(text)
    for a, b in zip(windows, windows[1:]):
        assert a.own_end == b.own_start
    for w in windows:
        assert w.start <= w.own_start <= w.own_end <= w.end
        assert w.end - w.start <= size


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=30, max_value=300),
    entities=st.lists(st.tuples(st.integers(0, 299), st.integers(1, 6)), max_size=20),
    size=st.integers(min_value=16, max_value=60),
)
def test_windows_never_cut_protected_spans(n, entities, size):
    text = "字" * n
    spans = []
    for start, length in sorted(entities):
        end = min(n, start + length)
        if start < n and (not spans or start >= spans[-1][1]):
            spans.append((start, end))
    windows = plan_windows(text, size, 4, protected=spans)
    for start, end in spans:
        assert any(w.own_start <= start and end <= w.own_end for w in windows), (start, end)


def test_merge_keeps_an_entity_across_a_window_edge():
    text = "甲" * 50
    windows = plan_windows(text, 24, 6)
    assert len(windows) > 1
    cut = windows[0].own_end
    entity = (cut - 2, cut + 2, "X")  # straddles the first cut
    per_window = []
    for w in windows:
        spans = []
        if w.start <= entity[0] and entity[1] <= w.end:
            spans.append((entity[0] - w.start, entity[1] - w.start, "X"))
        per_window.append(spans)
    assert merge_window_spans(windows, per_window) == [entity]


def test_every_doc_has_a_segment_and_merging_restores_doc_offsets():
    nlp = spacy.blank("zh")
    docs = [nlp.make_doc(t) for t in ["", "张伟。" * 20, "李娜"]]
    segmenter = Segmenter(window_size=16, window_overlap=2)
    segments, plans = segmenter.segments(docs)
    assert [len(plan) for plan in plans[::2]] == [1, 1] and len(plans[1]) > 1
    assert len(segments) == sum(len(plan) for plan in plans)
    assert segments[0].doc is docs[0] and len(segments[0]) == 0
    assert all(s.text == s.doc.text[s.start : s.end] for s in segments)
    # One PER at the start of every segment, in segment offsets.
    spans = [[(0, 2, "PER")] if s.text.startswith("张伟") else [] for s in segments]
    merged = segmenter.merge(plans, spans)
    assert merged[0] == [] and merged[2] == []
    assert merged[1] and all(docs[1].text[a:b] == "张伟" for a, b, _ in merged[1])


def test_training_segments_are_own_parts_with_their_entities():
    nlp = spacy.blank("zh")
    text = "张伟毕业于北京大学。" * 6
    entities = [(i * 10, i * 10 + 2, "PER") for i in range(6)]
    pairs = Segmenter(window_size=24, window_overlap=4).training_segments(nlp.make_doc(text), entities)
    assert "".join(segment.text for segment, _ in pairs) == text
    assert sum(len(inside) for _, inside in pairs) == len(entities)
    for segment, inside in pairs:
        assert all(segment.text[a:b] == "张伟" for a, b, _ in inside)
