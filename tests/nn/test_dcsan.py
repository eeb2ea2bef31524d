"""DC-SAN (spacy-flat.DcsanTagger.v2): its soft-lexicon sets on a hand-made
sentence, its cross-lattice attention and gated fusion against literal readings of
the paper's equations, gradients, and the architecture in the component."""

import math
from typing import List

import numpy
import pytest
import torch

from spacy_flat.errors import LexiconError
from spacy_flat.lattice.flat_lattice import build_lattice
from spacy_flat.lattice.lexicon import Lexicon
from spacy_flat.lattice.word_counts import (
    count_floor,
    count_matches,
    counts_from_table,
    covered_spans,
    read_word_counts,
)
from spacy_flat.nn.dcsan import CrossLatticeAttention, DcsanEncoder, GatedFusion, soft_lexicon

from ..util import build_family, saved_and_loaded

TEXT = "南京市长江大桥"
WORDS = ["南京", "南京市", "市长", "长江", "长江大桥", "大桥"]


def lattice_tensors(counts=None):
    lexicon = Lexicon(WORDS)
    lat = build_lattice(TEXT, lexicon)
    n = len(lat)
    embeddings = torch.eye(len(WORDS), dtype=torch.float64)  # e_w: one-hot per lexicon word
    words = torch.zeros(1, n, len(WORDS), dtype=torch.float64)
    for k, row in enumerate(lat.word_rows):
        words[0, lat.n_chars + k] = embeddings[row]
    heads = torch.from_numpy(lat.heads)[None]
    tails = torch.from_numpy(lat.tails)[None]
    is_word = (torch.arange(n) >= lat.n_chars)[None]
    z = None
    if counts is not None:
        z = torch.zeros(1, n, dtype=torch.float64)
        for k, row in enumerate(lat.word_rows):
            z[0, lat.n_chars + k] = counts[WORDS[row]]
    return words, heads, tails, is_word, lat.n_chars, z


def word_vector(word):
    return torch.eye(len(WORDS), dtype=torch.float64)[WORDS.index(word)]


def test_soft_lexicon_sets_of_a_hand_made_sentence():
    words, heads, tails, is_word, n_chars, _ = lattice_tensors()
    out = soft_lexicon(words, heads, tails, is_word, n_chars, None, floor=1.0).view(n_chars, 4, -1)
    zero = torch.zeros(len(WORDS), dtype=torch.float64)
    # 长 (3) begins 长江 and 长江大桥 and ends 市长: Z = 3 words of weight b.
    assert torch.allclose(out[3, 0], (word_vector("长江") + word_vector("长江大桥")) / 3)
    assert torch.allclose(out[3, 1], zero) and torch.allclose(out[3, 3], zero)
    assert torch.allclose(out[3, 2], word_vector("市长") / 3)
    # 江 (4) ends 长江 and is inside 长江大桥.
    assert torch.allclose(out[4, 1], word_vector("长江大桥") / 2) and torch.allclose(out[4, 2], word_vector("长江") / 2)
    # Frequencies weigh the words (eq. 4-5): z(w) + b over the sum for all four sets.
    counts = {"南京": 9.0, "南京市": 3.0, "市长": 5.0, "长江": 7.0, "长江大桥": 1.0, "大桥": 2.0}
    words, heads, tails, is_word, n_chars, z = lattice_tensors(counts)
    out = soft_lexicon(words, heads, tails, is_word, n_chars, z + 1.0, floor=1.0).view(n_chars, 4, -1)
    total = (7 + 1) + (1 + 1) + (5 + 1)
    expected_b = ((7 + 1) * word_vector("长江") + (1 + 1) * word_vector("长江大桥")) / total
    assert torch.allclose(out[3, 0], expected_b) and torch.allclose(out[3, 2], (5 + 1) * word_vector("市长") / total)


def test_word_counts_skip_occurrences_inside_a_longer_match():
    lexicon = Lexicon(WORDS)
    counts = dict(zip(lexicon.words, count_matches(lexicon, [TEXT, TEXT, "长江边", "没有词"]).tolist()))
    # 南京 lies inside 南京市, 长江 and 大桥 inside 长江大桥; 市长 overlaps 南京市 without lying inside it.
    assert counts == {"南京": 0.0, "南京市": 2.0, "市长": 2.0, "长江": 1.0, "长江大桥": 2.0, "大桥": 0.0}
    # b: 10% of the seen words occur less often; never below 1.
    assert count_floor(numpy.array([0, 1, 2, 2, 40], dtype="float32")) == pytest.approx(1.3)
    assert count_floor(numpy.zeros(3, dtype="float32")) == 1.0


def test_the_covered_sweep_equals_the_pairwise_definition():
    rng = numpy.random.default_rng(0)
    for _ in range(200):
        pairs = {tuple(sorted(rng.integers(0, 30, size=2))) for _ in range(int(rng.integers(1, 40)))}
        spans = numpy.array(sorted(pairs), dtype="int64")
        heads, tails = spans[:, 0], spans[:, 1]
        contains = (heads[None, :] <= heads[:, None]) & (tails[:, None] <= tails[None, :])
        longer = (tails - heads)[None, :] > (tails - heads)[:, None]
        shuffled = rng.permutation(len(spans))
        got = covered_spans(heads[shuffled], tails[shuffled])
        assert got.tolist() == (contains & longer).any(axis=1)[shuffled].tolist()


def test_word_counts_file_is_read_and_kept_with_the_lexicon(tmp_path):
    path = tmp_path / "words.counts.tsv"
    path.write_text("长江\t7\n南京\t3\n\n长江\t1\n不在词表\t100\n", encoding="utf8")
    table = read_word_counts(path)
    assert table == {"长江": 8.0, "南京": 3.0, "不在词表": 100.0}
    lexicon = Lexicon(WORDS)
    assert lexicon.counts is None
    seen, floor = counts_from_table(lexicon, table)
    assert seen == 2 and floor == pytest.approx(3.5)
    lexicon.add("江边")  # added later: never counted
    loaded = Lexicon.from_bytes(lexicon.to_bytes())
    assert loaded.counts is not None and loaded.count_floor == pytest.approx(3.5)
    assert loaded.counts[loaded.index("长江")] == 8.0 and loaded.counts[loaded.index("江边")] == 0.0
    assert Lexicon.from_bytes(Lexicon(WORDS).to_bytes()).counts is None
    bad = tmp_path / "bad.tsv"
    bad.write_text("长江\t7\n南京 3\n", encoding="utf8")
    with pytest.raises(LexiconError, match=r"bad\.tsv:2"):
        read_word_counts(bad)


def test_cross_lattice_attention_and_fusion_equal_the_literal_equations():
    torch.manual_seed(0)
    layer = CrossLatticeAttention(8, 2).double()
    fusion = GatedFusion(8).double()
    y, x = torch.randn(1, 4, 8, dtype=torch.float64), torch.randn(1, 4, 8, dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False]])
    got = layer(y, x, mask)
    heads = []
    for h in range(2):
        part = slice(4 * h, 4 * h + 4)
        q, k, v = layer.w_y(y)[0, :, part], layer.w_x(x)[0, :, part], layer.w_xv(x)[0, :, part]
        scores = (q @ k.T) / math.sqrt(4)  # eq. 7
        scores[:, 3] = -1e30
        heads.append(torch.softmax(scores, -1) @ v)  # eq. 8
    inter = layer.w_t(torch.cat(heads, -1))  # eq. 9
    assert torch.allclose(got[0], layer.merge(torch.cat([x[0], inter], -1)), atol=1e-10)  # eq. 10
    h_c, h_w = torch.tanh(fusion.w_c(got)), torch.tanh(fusion.w_w(y))  # eq. 11-12
    g = torch.sigmoid(fusion.w_g(torch.cat([h_c, h_w], -1)))  # eq. 13
    assert torch.allclose(fusion(got, y), g * got + (1 - g) * y)  # eq. 14


def test_gradients_pass_gradcheck():
    torch.manual_seed(0)
    layer = CrossLatticeAttention(4, 2).double()
    words, heads, tails, is_word, n_chars, _ = lattice_tensors()
    proj = torch.nn.Linear(4 * len(WORDS), 4).double()

    def run(emb, chars):
        y = proj(soft_lexicon(emb, heads, tails, is_word, n_chars, None, 1.0))
        return layer(y, chars, torch.ones(1, n_chars, dtype=torch.bool))

    emb = words.clone().requires_grad_(True)
    chars = torch.randn(1, n_chars, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(run, (emb, chars))


@pytest.fixture(scope="module")
def dcsan_nlp():
    losses: List[float] = []
    return build_family("dcsan", steps=60, losses=losses), losses


def test_dcsan_trains_saves_loads_and_batches_like_one_doc_at_a_time(dcsan_nlp, tmp_path):
    nlp, losses = dcsan_nlp
    assert losses[-1] < losses[0] / 5
    encoder = nlp.get_pipe("flat_ner").tagger.module.encoder
    assert isinstance(encoder, DcsanEncoder) and not hasattr(encoder, "word_proj")
    # Word frequencies were counted on the training texts and weigh the sets.
    lexicon = nlp.get_pipe("flat_ner").lexicon
    assert lexicon.counts is not None and lexicon.counts.sum() > 0 and lexicon.count_floor >= 1.0
    seen = []
    original = encoder.dcsan.forward
    encoder.dcsan.forward = lambda *args: seen.append(args[-1]) or original(*args)
    nlp("张三在北京大学工作。")
    del encoder.dcsan.forward
    assert seen[0] is not None and bool((seen[0] >= lexicon.count_floor).all())
    loaded = saved_and_loaded(nlp, tmp_path / "dcsan")
    numpy.testing.assert_array_equal(loaded.get_pipe("flat_ner").lexicon.counts, lexicon.counts)
    ner = loaded.get_pipe("flat_ner")
    ner.cfg["window_size"], ner.cfg["window_overlap"] = 12, 3
    doc = loaded("张三在北京大学工作。李四住在上海。" * 4)
    assert len(doc.spans["flat_ner"]) == len(doc.ents)
