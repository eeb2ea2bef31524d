"""The Lattice LSTM (spacy-flat.LatticeLstmTagger.v2): its batched recurrence
against a literal character-by-character reading of the paper's eq. 11-16, a
batch against each doc alone, and the architecture in the component."""

from typing import List, Tuple

import pytest
import spacy
import torch
from spacy.util import fix_random_seed

from spacy_flat.lattice.char_vocab import CharVocab
from spacy_flat.lattice.features import featurize
from spacy_flat.lattice.lexicon import Lexicon
from spacy_flat.nn.embeddings import LatticeEmbeddings
from spacy_flat.nn.lattice_lstm.encoder import CHAR_GATES, LatticeLstm, LatticeLstmEncoder
from spacy_flat.nn.lattice_lstm.recurrence import LatticeRecurrence
from spacy_flat.nn.lattice_lstm.schedule import word_slots
from spacy_flat.nn.tagger import LatticeTagger
from spacy_flat.pipeline.architectures import build_lattice_lstm_tagger_v2

from ..util import FAMILY, SMALL_WORDS, saved_and_loaded, small_lexicon, tiny_examples

H = 3  # hidden size of one direction
# (length, words as (first, last) characters): nested words, several words ending at
# one character, a single-character word (left out by the paper), rows without words.
SENTENCES: List[Tuple[int, List[Tuple[int, int]]]] = [
    (7, [(0, 1), (0, 2), (2, 3), (3, 4), (3, 6), (5, 6), (4, 4)]),
    (4, [(1, 3), (2, 3), (0, 3)]),
    (2, []),
    (9, [(0, 8), (6, 7)]),
]


def literal_direction(
    lstm: LatticeLstm,
    char_proj: torch.nn.Linear,
    word_proj: torch.nn.Linear,
    d: int,
    x: torch.Tensor,
    xw: torch.Tensor,
    words: List[Tuple[int, int]],
) -> torch.Tensor:
    """One direction of one sentence, character by character, from the paper's
    equations with the full matrices W^c, W^w and W^l and an explicit loop over
    the words ending at each character (eq. 11-16).

    x (n, input width): x^c_j. xw (m, word width): x^w of `words`, which are (b, e) in reading order.
    """
    ch, wh, lh = char_proj.weight, word_proj.weight, lstm.word_gate[d].T
    rows_c = slice(d * 5 * H, d * 5 * H + 4 * H)  # i, o, f, c̃ of eq. 11
    rows_l = slice(d * 5 * H + 4 * H, (d + 1) * 5 * H)  # the character's term of eq. 14
    rows_w = slice(d * 3 * H, (d + 1) * 3 * H)
    w_c, b_c = torch.cat([ch[rows_c], lstm.char_hidden[d].T], 1), char_proj.bias[rows_c]
    w_l, b_l = torch.cat([ch[rows_l], lh], 1), char_proj.bias[rows_l]
    w_w, b_w = torch.cat([wh[rows_w], lstm.word_hidden[d].T], 1), word_proj.bias[rows_w]
    h, c = torch.zeros(H, dtype=x.dtype), torch.zeros(H, dtype=x.dtype)
    hs, cs = [], []
    for j in range(x.shape[0]):
        z = w_c @ torch.cat([x[j], h]) + b_c  # eq. 11
        i, o, f = torch.sigmoid(z[:H]), torch.sigmoid(z[H : 2 * H]), torch.sigmoid(z[2 * H : 3 * H])
        c_tilde = torch.tanh(z[3 * H :])
        ending = [(b, k) for k, (b, e) in enumerate(words) if e == j and b < j]
        if not ending:
            c = f * c + i * c_tilde
        else:
            cells, gates = [], []
            for b, k in ending:
                zw = w_w @ torch.cat([xw[k], hs[b]]) + b_w  # eq. 13, from the state of character b
                iw, fw, cw_tilde = torch.sigmoid(zw[:H]), torch.sigmoid(zw[H : 2 * H]), torch.tanh(zw[2 * H :])
                cw = fw * cs[b] + iw * cw_tilde
                cells.append(cw)
                gates.append(torch.sigmoid(w_l @ torch.cat([x[j], cw]) + b_l))  # eq. 14
            total = torch.exp(i) + sum(torch.exp(g) for g in gates)  # eq. 16
            c = sum(torch.exp(g) / total * cw for g, cw in zip(gates, cells)) + torch.exp(i) / total * c_tilde
        h = o * torch.tanh(c)
        hs.append(h)
        cs.append(c)
    return torch.stack(hs)


def literal(lstm, char_proj, word_proj, x, xw, words):
    """Both directions of one sentence: the backward one reads the characters and words reversed."""
    n = x.shape[0]
    forward = literal_direction(lstm, char_proj, word_proj, 0, x, xw, words)
    reversed_words = [(n - 1 - e, n - 1 - b) for b, e in words]
    backward = literal_direction(lstm, char_proj, word_proj, 1, x.flip(0), xw, reversed_words).flip(0)
    return torch.cat([forward, backward], 1)


def random_lstm(seed: int = 0, directions: int = 2):
    torch.manual_seed(seed)
    lstm = LatticeLstm(H, directions=directions).double()
    with torch.no_grad():
        for param in lstm.parameters():  # not the identity start: every entry counts
            param.normal_(0, 0.7)
    char_proj = torch.nn.Linear(4, lstm.char_terms).double()
    word_proj = torch.nn.Linear(5, lstm.word_terms).double()
    return lstm, char_proj, word_proj


def batch_inputs(x: List[torch.Tensor], xw: List[torch.Tensor], char_proj, word_proj, sentences=SENTENCES):
    """The batch of the sentences: input terms, each word's row, head and tail, lengths."""
    lengths = torch.tensor([n for n, _ in sentences])
    chars = torch.cat(x)
    rows = torch.tensor([b for b, (_, words) in enumerate(sentences) for _ in words], dtype=torch.long)
    heads = torch.tensor([h for _, words in sentences for h, _ in words], dtype=torch.long)
    tails = torch.tensor([t for _, words in sentences for _, t in words], dtype=torch.long)
    return char_proj(chars), word_proj(torch.cat(xw)), rows, heads, tails, lengths


def test_the_batched_recurrence_equals_the_literal_equations():
    """The batch's states equal the paper's cell (eq. 11-16, a forget gate of its own) sentence by sentence."""
    lstm, char_proj, word_proj = random_lstm()
    gen = torch.Generator().manual_seed(1)
    x = [torch.randn(n, 4, dtype=torch.float64, generator=gen) for n, _ in SENTENCES]
    xw = [torch.randn(len(words), 5, dtype=torch.float64, generator=gen) for _, words in SENTENCES]
    chars, words, rows, heads, tails, lengths = batch_inputs(x, xw, char_proj, word_proj)
    out = lstm(chars, words, rows, heads, tails, lengths)
    for b, (n, spans) in enumerate(SENTENCES):
        expected = literal(lstm, char_proj, word_proj, x[b], xw[b], spans)
        torch.testing.assert_close(out[b, :n], expected, atol=1e-10, rtol=1e-10)
    # The words do change the states: without them the cell is a plain LSTM's.
    none = torch.zeros(0, dtype=torch.long)
    plain = lstm(chars, words[:0], none, none, none, lengths)
    assert not torch.allclose(plain[0, :7], out[0, :7])
    torch.testing.assert_close(plain[2, :2], out[2, :2])  # the row without words


def test_gradients_pass_gradcheck():
    """Finite differences agree with autograd through the gathers, the merge and both directions."""
    lstm, char_proj, word_proj = random_lstm(seed=2)
    gen = torch.Generator().manual_seed(3)
    sentences = SENTENCES[:2]  # every kind of step, in few characters: finite differences are slow
    x = [torch.randn(n, 4, dtype=torch.float64, generator=gen) for n, _ in sentences]
    xw = [torch.randn(len(w), 5, dtype=torch.float64, generator=gen) for _, w in sentences]
    identity = torch.nn.Identity()
    raw, raw_words, rows, heads, tails, lengths = batch_inputs(x, xw, identity, identity, sentences)
    valid = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
    names = [name for name, _ in lstm.named_parameters()]

    def run(chars: torch.Tensor, words: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
        out = torch.func.functional_call(
            lstm, dict(zip(names, params)), (char_proj(chars), word_proj(words), rows, heads, tails, lengths)
        )
        return out[valid]

    params = (p.detach().clone().requires_grad_() for p in lstm.parameters())
    inputs = (raw.requires_grad_(), raw_words.requires_grad_(), *params)
    assert torch.autograd.gradcheck(run, inputs)


@pytest.mark.parametrize("directions", [2, 1])
def test_outputs_and_gradients_equal_autograd_through_the_literal_equations(directions):
    """The hand-written backward against autograd through the literal equations,
    for every input and weight, in one direction and in two."""
    lstm, char_proj, word_proj = random_lstm(seed=4, directions=directions)
    gen = torch.Generator().manual_seed(5)
    x = [torch.randn(n, 4, dtype=torch.float64, generator=gen) for n, _ in SENTENCES]
    xw = [torch.randn(len(words), 5, dtype=torch.float64, generator=gen) for _, words in SENTENCES]
    weights = [*lstm.parameters(), *char_proj.parameters(), *word_proj.parameters()]
    inputs = [t.requires_grad_() for t in x + xw]
    out = lstm(*batch_inputs(x, xw, char_proj, word_proj))
    with torch.no_grad():
        torch.testing.assert_close(lstm(*batch_inputs(x, xw, char_proj, word_proj)), out)  # inference alone
    expected = []
    for b, (_, spans) in enumerate(SENTENCES):
        if directions == 2:
            expected.append(literal(lstm, char_proj, word_proj, x[b], xw[b], spans))
        else:
            expected.append(literal_direction(lstm, char_proj, word_proj, 0, x[b], xw[b], spans))
    valid = torch.cat([out[b, :n] for b, (n, _) in enumerate(SENTENCES)])
    torch.testing.assert_close(valid, torch.cat(expected), atol=1e-10, rtol=1e-10)
    upstream = torch.randn(valid.shape, dtype=torch.float64, generator=gen)
    ours = torch.autograd.grad(valid, weights + inputs, upstream, allow_unused=True, materialize_grads=True)
    theirs = torch.autograd.grad(
        torch.cat(expected), weights + inputs, upstream, allow_unused=True, materialize_grads=True
    )
    for mine, reference in zip(ours, theirs):
        torch.testing.assert_close(mine, reference, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("directions", [2, 1])
def test_the_recurrence_function_passes_gradcheck(directions):
    """Finite differences against the hand-written backward of the recurrence alone, on
    nested words, several words ending at one character, rows without words and a
    single-character word."""
    gen = torch.Generator().manual_seed(6)
    hidden, n_words = 2, sum(len(words) for _, words in SENTENCES)
    lengths = torch.tensor([n for n, _ in SENTENCES])
    spans = [(b, *span) for b, (_, words) in enumerate(SENTENCES) for span in words]
    rows, heads, tails = torch.tensor(spans).T
    steps, batch = int(lengths.max()), len(SENTENCES)
    plan = word_slots(rows, heads, tails, lengths, steps, batch, directions, torch.float64)
    assert max(plan.packed) >= 2 and n_words == len(spans)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float64, generator=gen).requires_grad_()

    x = randn(int(lengths.sum()), directions * (CHAR_GATES + 1) * hidden)
    words = randn(n_words, directions * 3 * hidden)
    weights = randn(directions, hidden, CHAR_GATES * hidden), randn(directions, hidden, 3 * hidden)
    weights += (randn(directions, hidden, hidden),)
    valid = torch.arange(steps)[None, :] < lengths[:, None]  # padding's h holds no meaning
    assert torch.autograd.gradcheck(lambda *t: LatticeRecurrence.apply(*t, plan)[valid], (x, words, *weights))
    none = torch.zeros(0, dtype=torch.long)  # and a batch without words: the plain LSTM
    plan = word_slots(none, none, none, lengths, steps, batch, directions, torch.float64)
    assert torch.autograd.gradcheck(lambda *t: LatticeRecurrence.apply(*t, plan)[valid], (x, words[:0], *weights))


def tagger() -> Tuple[LatticeTagger, Lexicon, CharVocab]:
    torch.manual_seed(0)
    embeddings = LatticeEmbeddings(
        char_width=8, word_width=8, word_rows=50, bigram_width=0, bigram_rows=0, bigram_vectors=False, embed_dropout=0.0
    )
    encoder = LatticeLstmEncoder(embeddings.char_input_width, 8, width=16)
    model = LatticeTagger(embeddings, encoder, output_dropout=0.0)
    chars = CharVocab(sorted(set("".join(SMALL_WORDS)) | set("张三在工作王五住李四。，")))
    model.configure(
        n_chars=len(chars),
        vector_width=0,
        n_tags=3,
        transitions=[(0, 0), (0, 1), (1, 2), (2, 0), (1, 1)],
        starts=[0, 1],
        ends=[0, 2],
    )
    return model, Lexicon(SMALL_WORDS), chars


TEXTS = ["张三在北京大学工作。", "李四", "王五住在上海，在华为公司任职。", "清华大学毕业"]


def run_tagger(model: LatticeTagger, lexicon: Lexicon, chars: CharVocab, texts: List[str]):
    """Emissions and the summed CRF loss of `texts` as one batch (gold: tag 0 everywhere but one 1-2 run)."""
    batch = featurize(texts, lexicon, chars, word_rows=50)
    names = ("char_rows", "word_hashes", "heads", "tails", "char_index", "word_index", "token_mask", "char_mask")
    tensors = {name: torch.from_numpy(getattr(batch, name)) for name in names}
    emissions = model(**tensors)
    mask = tensors["char_mask"]
    tags = torch.zeros(mask.shape, dtype=torch.long)
    tags[:, 0], tags[:, 1] = 1, 2
    return emissions, model.loss(emissions, tags, mask)


def test_a_batch_gives_each_doc_the_scores_loss_and_gradients_it_has_alone():
    model, lexicon, chars = tagger()
    emissions, loss = run_tagger(model, lexicon, chars, TEXTS)
    assert len(featurize(TEXTS, lexicon, chars, word_rows=50).word_index) >= 6
    loss.backward()
    batched = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    assert "encoder.lattice.word_hidden" in batched and "encoder.word_proj.weight" in batched
    model.zero_grad()
    total = 0.0
    for b, text in enumerate(TEXTS):
        alone, alone_loss = run_tagger(model, lexicon, chars, [text])
        torch.testing.assert_close(emissions[b, : len(text)], alone[0], atol=1e-5, rtol=1e-5)
        alone_loss.backward()  # gradients accumulate over the docs
        total += alone_loss.item()
    assert loss.item() == pytest.approx(total, rel=1e-5)
    for name, grad in batched.items():
        torch.testing.assert_close(grad, model.get_parameter(name).grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.fixture(scope="module")
def lstm_nlp(family_nlp):
    return family_nlp("lattice_lstm")


def test_the_lattice_lstm_trains_saves_loads_and_batches_like_one_doc_at_a_time(lstm_nlp, tmp_path):
    nlp = lstm_nlp
    ner = nlp.get_pipe("flat_ner")
    module = ner.tagger.module
    assert isinstance(module.encoder, LatticeLstmEncoder)
    doc = nlp("张伟毕业于北京大学。")
    assert [(e.text, e.label_) for e in doc.ents] == [("张伟", "PER"), ("北京大学", "ORG")]
    loaded = saved_and_loaded(nlp, tmp_path / "lattice_lstm")
    loaded_ner = loaded.get_pipe("flat_ner")
    loaded_ner.cfg["window_size"], loaded_ner.cfg["window_overlap"] = 12, 3
    doc = loaded("张三在北京大学工作。李四住在上海。" * 4)
    assert len(doc.spans["flat_ner"]) == len(doc.ents)


def test_the_builder_takes_the_papers_sizes_and_no_attention_settings():
    """Table 3's sizes by default, the paper's four-gate cell, no attention settings, an even width."""
    module = build_lattice_lstm_tagger_v2().get_ref("tagger").shims[0]._model
    lstm = module.encoder.lattice
    assert lstm.hidden == 100 and module.embeddings.embed_dropout.p == 0.5 and module.output_dropout.p == 0.5
    assert lstm.char_hidden.shape == (2, 100, 4 * 100) and lstm.word_hidden.shape == (2, 100, 3 * 100)
    assert module.encoder.char_proj.out_features == lstm.char_terms == 2 * 5 * 100
    with pytest.raises(TypeError, match="n_heads"):
        build_lattice_lstm_tagger_v2(n_heads=8)
    with pytest.raises(ValueError, match="not even"):
        build_lattice_lstm_tagger_v2(width=201)
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner", config={"model": {"@architectures": "spacy-flat.LatticeLstmTagger.v2", "width": 60}})
    assert nlp.config["components"]["flat_ner"]["model"]["word_width"] == 50


def test_bigrams_reach_the_lstm_through_the_character_terms():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    model = {**FAMILY["lattice_lstm"], "bigram_width": 8, "bigram_rows": 100}
    ner = nlp.add_pipe("flat_ner", config={"model": model})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    embeddings, encoder = ner.tagger.module.embeddings, ner.tagger.module.encoder
    assert encoder.char_proj.in_features == embeddings.char_width + 8
    assert encoder.char_proj.out_features == encoder.lattice.char_terms
    optimizer = nlp.create_optimizer()
    before = embeddings.bigram_embed.table.weight.detach().clone()
    losses = [nlp.update(examples, sgd=optimizer, losses={})["flat_ner"] for _ in range(5)]
    # The bigram table learned: its gradient reached it through the character terms.
    assert losses[-1] < losses[0] and not torch.equal(embeddings.bigram_embed.table.weight.detach(), before)
