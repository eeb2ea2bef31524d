"""Entity probabilities from the CRF (confidence.py, ConstrainedCRF.run_probabilities):
exact against brute force, aligned with doc.ents, thresholded, and the same
under windows, nlp.pipe and save/load."""

import itertools

import numpy
import pytest
import spacy
import torch

from spacy_flat.crf.model import ConstrainedCRF
from spacy_flat.decoding.tags import TagSet

from ..util import build_small


def brute_force(crf: ConstrainedCRF, emissions: torch.Tensor, first: int, run, temperature: float = 1.0) -> float:
    """Sum the probability of every tag sequence whose characters from `first` on take `run`."""
    em = emissions[0].double().numpy() / temperature
    trans = crf.transitions.double().detach().numpy() / temperature
    start = crf.start_transitions.double().detach().numpy() / temperature
    end = crf.end_transitions.double().detach().numpy() / temperature
    n, n_tags = em.shape
    scores = {}
    for path in itertools.product(range(n_tags), repeat=n):
        score = start[path[0]] + end[path[-1]] + sum(em[t, y] for t, y in enumerate(path))
        scores[path] = score + sum(trans[a, b] for a, b in zip(path, path[1:]))
    # Shifted by the best score, so that gaps beyond float64's exp range stay exact.
    best = max(scores.values())
    weights = {path: numpy.exp(score - best) for path, score in scores.items()}
    total = sum(weights.values())
    return sum(w for path, w in weights.items() if list(path[first : first + len(run)]) == list(run)) / total


@pytest.mark.parametrize("temperature", [1.0, 2.5])
def test_run_probabilities_equal_brute_force_on_a_toy_crf(temperature):
    torch.manual_seed(0)
    tags = TagSet(["A", "B"])  # O + BILU x 2 = 9 tags
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    emissions = torch.randn(1, 3, len(tags)) * 2
    mask = torch.ones(1, 3, dtype=torch.bool)
    t = tags.index
    runs = [
        (0, [t["U-A"]]),
        (1, [t["B-B"], t["L-B"]]),
        (0, [t["B-A"], t["I-A"], t["L-A"]]),
        (2, [t["U-B"]]),
        (0, [t["B-A"], t["L-A"]]),
    ]
    (found,) = crf.run_probabilities(emissions, mask, [runs], temperature)
    expected = [brute_force(crf, emissions, first, run, temperature) for first, run in runs]
    numpy.testing.assert_allclose(found, expected, rtol=1e-6)
    assert all(0 < p <= 1 for p in found)


def test_rows_of_different_lengths_in_one_batch_score_as_alone():
    torch.manual_seed(1)
    tags = TagSet(["A"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    emissions = torch.randn(2, 5, len(tags))
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    runs = [[(1, [tags.index["B-A"], tags.index["L-A"]])], [(1, [tags.index["B-A"], tags.index["L-A"]])]]
    together = crf.run_probabilities(emissions, mask, runs)
    alone = crf.run_probabilities(emissions[1:, :3], mask[1:, :3], runs[1:])
    assert together[1] == pytest.approx(alone[0], rel=1e-9)
    assert together[1][0] == pytest.approx(brute_force(crf, emissions[1:, :3], 1, runs[1][0][1]), rel=1e-6)


@pytest.fixture(scope="module")
def nlp(trained_nlp):
    return trained_nlp


TEXTS = ["张三在北京大学工作，李四住在上海。", "王五在华为公司任职。", "", "今天天气很好。", "赵六毕业于清华大学。" * 3]


def scored(doc):
    group = doc.spans["flat_ner"]
    return [(s.start_char, s.end_char, s.label_) for s in group], list(group.attrs["scores"])


def test_scores_are_probabilities_aligned_with_the_entities(nlp):
    for doc in nlp.pipe(TEXTS):
        spans, scores = scored(doc)
        assert spans == [(e.start_char, e.end_char, e.label_) for e in doc.ents]
        assert len(scores) == len(doc.ents) and all(0 < p <= 1 for p in scores)


def test_pipe_windows_and_save_load_keep_the_scores(nlp, tmp_path):
    one_by_one = [scored(nlp(text)) for text in TEXTS]
    batched = [scored(doc) for doc in nlp.pipe(TEXTS, batch_size=5)]
    for (spans_a, a), (spans_b, b) in zip(one_by_one, batched):
        assert spans_a == spans_b and numpy.allclose(a, b, atol=1e-6)
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    for text, (spans, scores) in zip(TEXTS, one_by_one):
        got_spans, got = scored(loaded(text))
        assert got_spans == spans and numpy.allclose(got, scores, atol=1e-6)
    ner = loaded.get_pipe("flat_ner")
    ner.cfg["window_size"], ner.cfg["window_overlap"] = 12, 3
    long_doc = loaded("。".join(TEXTS[:2] * 4))
    spans, scores = scored(long_doc)
    assert len(spans) == len(long_doc.ents) > 2 and all(0 < p <= 1 for p in scores)


def test_threshold_drops_exactly_the_entities_below_it(nlp):
    ner = nlp.get_pipe("flat_ner")
    docs = [scored(nlp(text)) for text in TEXTS]
    all_scores = sorted(p for _, scores in docs for p in scores)
    cut = (all_scores[len(all_scores) // 2 - 1] + all_scores[len(all_scores) // 2]) / 2
    ner.cfg["threshold"] = cut
    try:
        for text, (spans, scores) in zip(TEXTS, docs):
            kept = [(span, p) for span, p in zip(spans, scores) if p >= cut]
            got_spans, got = scored(nlp(text))
            assert got_spans == [span for span, _ in kept] and numpy.allclose(got, [p for _, p in kept])
    finally:
        ner.cfg["threshold"] = 0.0


def test_scores_can_be_switched_off_and_a_threshold_needs_them():
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match="threshold needs entity probabilities"):
        nlp.add_pipe("flat_ner", config={"scores_key": None, "threshold": 0.5})
    with pytest.raises(ValueError, match=r"probability in \[0, 1\]"):
        nlp.add_pipe("flat_ner", name="other", config={"threshold": 1.5})
    trained = build_small(steps=5)
    trained.get_pipe("flat_ner").cfg["scores_key"] = None
    doc = trained(TEXTS[0])
    assert "flat_ner" not in doc.spans
    assert all(len(span) == 3 for span in trained.get_pipe("flat_ner").predict([doc])[0])


def test_emission_gaps_beyond_float64_fall_back_to_log_space():
    """A step whose scores differ by more than ~745 empties a rescaled row; the
    probabilities must stay exact, never NaN read as 1.0."""
    tags = TagSet(["A"])
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    emissions = torch.zeros(2, 3, len(tags))
    emissions[0, 1, tags.index["O"]], emissions[0, 2, tags.index["L-A"]] = 800.0, 1000.0
    mask = torch.ones(2, 3, dtype=torch.bool)
    runs = [[(1, [tags.index["B-A"], tags.index["L-A"]]), (0, [tags.index["O"]])]] * 2
    found = crf.run_probabilities(emissions, mask, runs)
    assert all(0 < p < 1 for p in found[0])
    assert found[0][0] > found[0][1]
    assert found[0] == pytest.approx([brute_force(crf, emissions[:1], s, r) for s, r in runs[0]], rel=1e-6)
    assert found[1] == pytest.approx([brute_force(crf, emissions[1:], s, r) for s, r in runs[1]], rel=1e-6)


def test_decoded_spans_carry_each_docs_text_and_write_the_same_entities(nlp, monkeypatch):
    """`predict` hands `set_annotations` each doc's text with its spans (`DocSpans`), rebuilt from
    its windows' own parts, so writing the entities never reads `doc.text` again; written from
    plain lists (reading `doc.text`), the entities are the same."""
    import spacy_flat.pipeline.confidence as confidence
    from spacy_flat.pipeline.confidence import DocSpans

    ner = nlp.get_pipe("flat_ner")
    texts = ["张伟毕业于北京大学。" * 9, "", "  李娜 在 上海 。", "王芳去了南京"]
    given = []
    place = confidence.place_char_entities

    def spy(doc, spans, mode, report, text=None):  # type: ignore[no-untyped-def]
        given.append(text)
        return place(doc, spans, mode, report, text)

    monkeypatch.setattr(confidence, "place_char_entities", spy)
    saved = dict(ner.cfg)
    ner.cfg.update(window_size=24, window_overlap=4)
    try:
        docs = [nlp.make_doc(text) for text in texts]
        spans = ner.predict(docs)
        assert [s.text for s in spans] == texts and all(isinstance(s, DocSpans) for s in spans)
        ner.set_annotations(docs, spans)
        assert given == texts  # the texts decoding read, not None
        plain = [nlp.make_doc(text) for text in texts]
        ner.set_annotations(plain, [list(s) for s in spans])
        assert given[len(texts) :] == [None] * len(texts)
    finally:
        ner.cfg.clear()
        ner.cfg.update(saved)
    assert any(doc.ents for doc in docs)
    assert [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs] == [
        [(e.start_char, e.end_char, e.label_) for e in d.ents] for d in plain
    ]
