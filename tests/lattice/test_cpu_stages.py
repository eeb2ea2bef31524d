"""The CPU stages of inference, done as array work over whole batches, give
exactly what the per-row, per-character code they replace gave, on real text
(Resume and Weibo test sentences, joined by line breaks and spaces, with Latin,
digits, punctuation, emoji and full-width forms): code points to character rows
and boundary masks, lattice matching and features, Viterbi, entity spans and
entity probabilities, and the whole component."""

import pickle
import random
from typing import List

import numpy
import pytest
import torch

from spacy_flat.cli.convert import ConversionReport, read_conll
from spacy_flat.crf.host_runs import tag_runs
from spacy_flat.crf.model import FORBIDDEN, ConstrainedCRF
from spacy_flat.decoding.boundaries import BoundaryRules, _Masks
from spacy_flat.decoding.tags import TagSet
from spacy_flat.lattice.char_vocab import CharVocab
from spacy_flat.lattice.features import featurize, hash_rows
from spacy_flat.lattice.flat_lattice import build_lattice
from spacy_flat.lattice.lexicon import Lexicon

from ..crf_reference import ReferenceCRF
from ..util import SHARED, needs_shared

HOSTILE = ["", "a", "😀张三在Ａ公司\u3000工作 \t１２３！", "\n\n", "Ｉｎｔｅｌ公司。\r\n", "x\ud800y"]
SEPARATORS = ["\n", " ", "\r\n", "\u3000", "", "  "]


def real_texts(limit: int = 120) -> List[str]:
    """Resume and Weibo test sentences, three at a time joined by separators, and hostile texts."""
    sentences = []
    for path in (SHARED / "data/resume/test.char.bmes", SHARED / "data/weibo/weiboNER_2nd_conll.test"):
        read = read_conll(path, report=ConversionReport(path))
        sentences.extend("".join(s.chars) for s in read)
    rng = random.Random(0)
    rng.shuffle(sentences)
    groups = range(min(limit, len(sentences) // 3))
    joined = [SEPARATORS[k % len(SEPARATORS)].join(sentences[3 * k : 3 * k + 3]) for k in groups]
    return joined + HOSTILE


def text_lexicon(texts: List[str]) -> Lexicon:
    """Words cut from the texts themselves: many matches, overlapping, of every length."""
    rng = random.Random(1)
    words = []
    for text in texts:
        for _ in range(len(text) // 3):
            start = rng.randrange(max(1, len(text) - 1))
            words.append(text[start : start + rng.choice((2, 2, 3, 4))])
    # murmurhash encodes words as UTF-8, which has no lone surrogates.
    return Lexicon(w for w in words if not any("\ud800" <= c <= "\udfff" for c in w))


@needs_shared
def test_character_rows_equal_a_lookup_per_character():
    texts = real_texts()
    vocab = CharVocab(["张", "三", "a", "1", "，", "。"])
    reference = CharVocab(vocab.entries)
    joined = "".join(texts)
    assert vocab.rows(joined).tolist() == [reference.row(c) for c in joined]
    assert pickle.loads(pickle.dumps(vocab)).rows(joined).tolist() == vocab.rows(joined).tolist()


@needs_shared
@pytest.mark.parametrize(
    "rules",
    [
        BoundaryRules(),
        BoundaryRules(True, True, True, "《(", "》!)"),
        BoundaryRules(space_inside=True, symbol_ends="。"),
    ],
)
def test_boundary_masks_equal_the_rules_per_character(rules):
    texts = real_texts()
    tags = TagSet(["LOC", "ORG", "PER"])
    width = max(len(t) for t in texts) + 3
    masks = _Masks(rules, tags.tags)
    expected = numpy.zeros((len(texts), width, len(tags)), dtype=bool)
    for r, text in enumerate(texts):
        for k, char in enumerate(text):
            expected[r, k] = masks._forbid(char)
    numpy.testing.assert_array_equal(rules.forbidden(texts, tags, width), expected)
    numpy.testing.assert_array_equal(rules.forbidden(iter(texts[:5]), tags, width)[:5], expected[:5])


@needs_shared
@pytest.mark.parametrize("max_words", [-1, 0, 3])
def test_batch_features_equal_the_lattices_built_text_by_text(max_words):
    texts = [t for t in real_texts(60) if t]
    lexicon = text_lexicon(texts)
    vocab = CharVocab(sorted(set("".join(texts)))[:500])
    batch = featurize(texts, lexicon, vocab, word_rows=97, max_words=max_words)
    lattices = [build_lattice(t, lexicon, max_words=max_words) for t in texts]
    width = max(len(lat) for lat in lattices)
    assert batch.heads.shape == (len(texts), width)
    words = []
    for b, (text, lat) in enumerate(zip(texts, lattices)):
        found = lexicon.matches(text) if max_words else []
        if 0 <= max_words < len(found):
            found = sorted(sorted(found, key=lambda m: (m[1] - m[0], m[0]))[:max_words])
        assert lat.word_rows.tolist() == [row for _, _, row in found]
        assert batch.heads[b, : len(lat)].tolist() == lat.heads.tolist()
        assert batch.tails[b, : len(lat)].tolist() == lat.tails.tolist()
        assert batch.token_mask[b].sum() == len(lat) and batch.char_mask[b].sum() == lat.n_chars
        words.extend(text[h : t + 1] for h, t, _ in found)
    numpy.testing.assert_array_equal(batch.word_hashes, hash_rows(words, 97))
    numpy.testing.assert_array_equal(batch.char_rows, numpy.concatenate([vocab.rows(t) for t in texts]))
    starts = numpy.arange(len(texts)) * width
    expected = numpy.concatenate([s + numpy.arange(len(t)) for s, t in zip(starts, texts)])
    numpy.testing.assert_array_equal(batch.char_index, expected)


def toy_crf(labels=("A", "B", "C")):
    tags = TagSet(labels)
    crf = ConstrainedCRF(len(tags), tags.allowed_transitions(), tags.allowed_starts(), tags.allowed_ends())
    with torch.no_grad():
        crf.raw_transitions.normal_(generator=torch.Generator().manual_seed(2))
    return tags, crf


def toy_batch(n_tags, seed, rows=12, width=40, scale=3.0):
    gen = numpy.random.default_rng(seed)
    lengths = gen.integers(0, width + 1, rows)
    lengths[0] = width
    scores = (gen.normal(size=(rows, width, n_tags)) * scale).astype("float32")
    forbidden = gen.random((rows, width, n_tags)) < 0.15
    forbidden[..., 0] = False  # O is never forbidden
    return scores, lengths, forbidden


@pytest.mark.parametrize("seed", range(5))
def test_viterbi_over_the_batch_equals_pytorch_crf_row_by_row(seed):
    tags, crf = toy_crf()
    scores, lengths, forbidden = toy_batch(len(tags), seed)
    masked = numpy.where(forbidden, numpy.float32(FORBIDDEN), scores)
    paths = crf.best_paths(masked, lengths)
    for b, n in enumerate(lengths):
        if n:
            mask = torch.ones(1, n, dtype=torch.bool)
            (expected,) = ReferenceCRF(crf).decode(torch.from_numpy(masked[b : b + 1, :n]), mask=mask)
            assert paths[b, :n].tolist() == expected, (seed, b)


@pytest.mark.parametrize("seed", range(4))
def test_tag_runs_equal_tag_set_decode(seed):
    tags, crf = toy_crf()
    scores, lengths, _ = toy_batch(len(tags), seed)
    paths = crf.best_paths(scores, lengths)
    # Rows that are no valid sequence are read as TagSet.decode reads them.
    paths[1, :3] = [tags.index["B-A"], 0, tags.index["U-C"]]
    lengths[1] = max(lengths[1], 3)
    row, first, end, label = tag_runs(tags.labels).runs(paths, lengths)
    found = [[] for _ in lengths]
    for r, s, e, k in zip(row.tolist(), first.tolist(), end.tolist(), label.tolist()):
        found[r].append((s, e, tags.labels[k]))
    assert found == [tags.decode(paths[b, :n].tolist()) for b, n in enumerate(lengths)]


@pytest.mark.parametrize("seed,scale", [(0, 3.0), (1, 3.0), (2, 400.0)])
@pytest.mark.parametrize("temperature", [1.0, 1.7])
def test_span_probabilities_equal_run_probabilities_row_by_row(seed, scale, temperature):
    """scale 400: emission gaps past float64's range take the log-space fallback."""
    tags, crf = toy_crf()
    scores, lengths, forbidden = toy_batch(len(tags), seed, scale=scale)
    masked = numpy.where(forbidden, numpy.float32(FORBIDDEN), scores)
    paths = crf.best_paths(masked, lengths)
    row, first, end, _ = tag_runs(tags.labels).runs(paths, lengths)
    probs = crf.span_probabilities(masked, lengths, (row, first, end, paths), temperature)
    for b, n in enumerate(lengths):
        mine = [(s, e) for r, s, e in zip(row, first, end) if r == b]
        if not mine:
            continue
        runs = [[(s, paths[b, s:e].tolist()) for s, e in mine]]
        emissions, mask = torch.from_numpy(masked[b : b + 1, :n]), torch.ones(1, n, dtype=torch.bool)
        (expected,) = crf.run_probabilities(emissions, mask, runs, temperature)
        numpy.testing.assert_allclose(probs[row == b], expected, rtol=1e-9, atol=1e-12)


def reference_predictions(ner, docs):
    """What the component predicted before its stages were batched: per-character
    masks, pytorch-crf's Viterbi and TagSet.decode per row, per-run probabilities."""
    segments, plans = ner.segmenter.segments(docs)
    scores = ner.model.predict(segments)
    masks, crf = _Masks(ner.boundary_rules, ner.tag_set.tags), ner.tagger.module.crf
    found = []
    for b, segment in enumerate(segments):
        n = len(segment)
        if not n:
            found.append([])
            continue
        forbid = torch.from_numpy(numpy.stack([masks._forbid(c) for c in segment.text]))[None]
        emissions = torch.from_numpy(numpy.ascontiguousarray(scores[b : b + 1, :n])).masked_fill(forbid, FORBIDDEN)
        mask = torch.ones(1, n, dtype=torch.bool)
        (ids,) = ReferenceCRF(crf).decode(emissions, mask=mask)
        spans = ner.tag_set.decode(ids)
        probs = crf.run_probabilities(emissions, mask, [[(s, ids[s:e]) for s, e, _ in spans]])[0] if spans else []
        found.append([(s, e, label, p) for (s, e, label), p in zip(spans, probs)])
    return ner.segmenter.merge(plans, found)


@needs_shared
@pytest.mark.parametrize("window_size", [512, 48])
def test_the_component_predicts_what_the_row_by_row_stages_did(trained_nlp, window_size):
    nlp = pickle.loads(pickle.dumps(trained_nlp))
    ner = nlp.get_pipe("flat_ner")
    ner.cfg["window_size"] = window_size
    # spaCy's strings are UTF-8: no lone surrogates in a Doc.
    docs = [nlp.make_doc(text) for text in real_texts(40) if "\ud800" not in text]
    expected = reference_predictions(ner, docs)
    predicted = ner.predict(docs)
    assert any(expected)
    assert [[s[:3] for s in doc] for doc in predicted] == [[s[:3] for s in doc] for doc in expected]
    for ours, theirs in zip(predicted, expected):
        numpy.testing.assert_allclose([s[3] for s in ours], [s[3] for s in theirs], rtol=0, atol=1e-6)
