"""The encoder on tensors alone: the cheap position term equals the paper's literal one."""

import pytest
import torch

from spacy_flat.nn.embeddings import LatticeEmbeddings
from spacy_flat.nn.flat import position_scores as position_scores_module
from spacy_flat.nn.flat.encoder import FlatAttention, FlatEncoder
from spacy_flat.nn.flat.position_scores import position_scores
from spacy_flat.nn.flat.positions import PositionFusion, relative_positions, sinusoid
from spacy_flat.nn.tagger import LatticeTagger


def random_lattice(batch: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    n_chars = torch.randint(3, 12, (batch,), generator=gen)
    rows = []
    for n in n_chars.tolist():
        heads = list(range(n))
        tails = list(range(n))
        for _ in range(int(torch.randint(0, 8, (1,), generator=gen))):
            h = int(torch.randint(0, n - 1, (1,), generator=gen))
            t = min(n - 1, h + int(torch.randint(1, 4, (1,), generator=gen)))
            heads.append(h)
            tails.append(t)
        rows.append((heads, tails))
    width = max(len(h) for h, _ in rows)
    heads = torch.zeros(batch, width, dtype=torch.long)
    tails = torch.zeros(batch, width, dtype=torch.long)
    mask = torch.zeros(batch, width, dtype=torch.bool)
    for b, (h, t) in enumerate(rows):
        heads[b, : len(h)] = torch.tensor(h)
        tails[b, : len(t)] = torch.tensor(t)
        mask[b, : len(h)] = True
    return heads, tails, mask


def literal_position_scores(attn: FlatAttention, fusion: PositionFusion, q, heads, tails):
    """Eq. 8 and the position half of eq. 11, built pair by pair as in the paper."""
    batch, n = heads.shape
    width = fusion.width
    hh = heads[:, :, None] - heads[:, None, :]
    th = tails[:, :, None] - heads[:, None, :]
    ht = heads[:, :, None] - tails[:, None, :]
    tt = tails[:, :, None] - tails[:, None, :]
    lo, hi = -2 * n - 8, 2 * n + 8
    table = sinusoid(torch.arange(lo, hi + 1), width)
    kinds = [hh] if fusion.head_only else [hh, th, ht, tt]
    parts = [table[k - lo] for k in kinds]
    if fusion.head_only:
        w = fusion.w_r.weight[:, :width]
        r = torch.relu(parts[0] @ w.t() + fusion.w_r.bias)
    else:
        r = torch.relu(fusion.w_r(torch.cat(parts, dim=-1)))  # B n n d
    rk = attn.w_kr(r).view(batch, n, n, attn.n_heads, attn.head_width)
    qv = q + attn.v[None, :, None, :]  # B H n hw
    return torch.einsum("bhid,bijhd->bhij", qv, rk)


# PositionFusion's settings: the four distances, FLAT_head's p_hh alone.
FUSIONS = {"four": {}, "head": {"head_only": True}}


@pytest.mark.parametrize("fusion_kind", sorted(FUSIONS))
@pytest.mark.parametrize("budget", [1 << 23, 64])
@pytest.mark.parametrize("splits", [1, 3])
def test_position_term_matches_literal(fusion_kind, budget, splits, monkeypatch):
    """Values and gradients (to the queries, v, W_kR and W_r) equal the literal term's, the
    queries of a length scored whole or in runs of heads against their own triples."""
    monkeypatch.setattr(position_scores_module, "POSITION_SCORE_BUDGET", budget)
    monkeypatch.setattr(position_scores_module, "HEAD_SPLITS", splits)
    monkeypatch.setattr(position_scores_module, "MIN_ROWS_TO_SPLIT", 1)
    torch.manual_seed(0)
    heads, tails, mask = random_lattice(4, seed=1)
    width, n_heads = 16, 4
    attn = FlatAttention(width, n_heads)
    fusion = PositionFusion(width, **FUSIONS[fusion_kind])
    with torch.no_grad():
        attn.v.normal_()
    pos = relative_positions(heads, tails, mask)
    q = torch.randn(heads.shape[0], n_heads, heads.shape[1], width // n_heads, requires_grad=True)
    pair = (mask[:, :, None] & mask[:, None, :])[:, None].expand(-1, n_heads, -1, -1)
    weights = torch.randn(pair.shape)
    results = []
    for impl in ("fast", "literal"):
        if impl == "fast":
            rk = attn.w_kr(fusion(pos)).view(-1, n_heads, width // n_heads).permute(1, 2, 0)
            scores = position_scores(q + attn.v[None, :, None, :], rk, pos)
        else:
            scores = literal_position_scores(attn, fusion, q, heads, tails)
        params = [q, attn.v, attn.w_kr.weight, fusion.w_r.weight, fusion.w_r.bias]
        grads = torch.autograd.grad((scores * weights)[pair].sum(), params)
        results.append((scores[pair].detach(), grads))
    (fast, fast_grads), (slow, slow_grads) = results
    assert torch.allclose(fast, slow, atol=1e-4)
    for a, b in zip(fast_grads, slow_grads):
        assert torch.allclose(a, b, atol=1e-3, rtol=1e-3)


def test_position_scores_gradcheck(monkeypatch):
    """Finite differences agree with the hand-written backward, across several chunks."""
    monkeypatch.setattr(position_scores_module, "POSITION_SCORE_BUDGET", 40)
    monkeypatch.setattr(position_scores_module, "MIN_ROWS_TO_SPLIT", 1)
    # Two sentences, cut into 20 chunks: finite differences cost a forward pass per input number.
    heads, tails, mask = random_lattice(2, seed=1)
    pos = relative_positions(heads, tails, mask)
    assert len(position_scores_module._plan_chunks(pos, 2)) >= 10
    n_heads, hw = 2, 2
    gen = torch.Generator().manual_seed(0)
    qv = torch.randn(2, n_heads, heads.shape[1], hw, dtype=torch.float64, generator=gen, requires_grad=True)
    rk = torch.randn(n_heads, hw, pos.n_triples, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: position_scores(a, b, pos), (qv, rk))


def test_runs_of_heads_score_fewer_triples():
    """Cut into runs of heads, the chunks of a length's queries cover less of its block."""
    heads, tails, mask = random_lattice(4, seed=1)
    pos = relative_positions(heads, tails, mask)
    whole = sum((u1 - u0) * len(rows) for u0, u1, rows in position_scores_module._plan_chunks(pos, 2))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(position_scores_module, "MIN_ROWS_TO_SPLIT", 1)
        runs = position_scores_module._plan_chunks(pos, 2)
    covered = sum((u1 - u0) * len(rows) for u0, u1, rows in runs)
    assert covered < 0.8 * whole
    rows = torch.cat([rows for _, _, rows in runs])
    assert torch.equal(rows.sort().values, torch.nonzero(mask.transpose(0, 1).reshape(-1)).squeeze(1))


def test_triples_are_deduplicated():
    heads, tails, mask = random_lattice(3, seed=2)
    pos = relative_positions(heads, tails, mask)
    triples = torch.stack([pos.hh, pos.len_i, pos.len_j], 1)
    assert torch.unique(triples, dim=0).shape[0] == pos.n_triples
    assert pos.n_triples < int(mask.sum(1).pow(2).sum())


def test_the_triples_are_those_of_the_real_pairs():
    """Padded tokens (rows of several lengths) add no triple, and each real pair indexes its own."""
    heads, tails, mask = random_lattice(5, seed=7)
    assert not mask.all()
    pos = relative_positions(heads, tails, mask)
    table = list(zip(pos.hh.tolist(), pos.len_i.tolist(), pos.len_j.tolist()))
    real = set()
    for b in range(heads.shape[0]):
        for i in torch.nonzero(mask[b]).squeeze(1).tolist():
            for j in torch.nonzero(mask[b]).squeeze(1).tolist():
                triple = (
                    int(heads[b, i] - heads[b, j]),
                    int(tails[b, i] - heads[b, i]),
                    int(tails[b, j] - heads[b, j]),
                )
                real.add(triple)
                assert table[int(pos.index[b, i, j])] == triple
    assert set(table) == real and len(table) == len(real)


@pytest.mark.parametrize("fusion_kind", sorted(FUSIONS))
def test_fused_positions_kept_for_prediction_follow_the_weights(fusion_kind):
    torch.manual_seed(0)
    fusion = PositionFusion(16, **FUSIONS[fusion_kind])
    heads, tails, mask = random_lattice(3, seed=4)
    pos = relative_positions(heads, tails, mask)
    fresh = fusion(pos)  # autograd on: built per call, nothing kept
    with torch.inference_mode():
        kept = fusion(pos)
        assert torch.allclose(kept, fresh, atol=1e-6)
        assert fusion(pos) is not kept and fusion._cached is not None
    with torch.no_grad():
        fusion.w_r.weight.mul_(0.5)  # an optimizer step in place
    changed = fusion(pos)
    with torch.inference_mode():
        assert torch.allclose(fusion(pos), changed, atol=1e-6)
        # Distances past the kept range rebuild the tables.
        far = relative_positions(heads * 40, tails * 40, mask)
        with torch.enable_grad():
            expected = fusion(far)
        assert torch.allclose(fusion(far), expected, atol=1e-6)


def test_fused_positions_kept_outside_autocast_are_not_reused_inside_it():
    torch.manual_seed(0)
    fusion = PositionFusion(16)
    heads, tails, mask = random_lattice(3, seed=4)
    pos = relative_positions(heads, tails, mask)
    with torch.inference_mode():
        full = fusion(pos)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            half = fusion(pos)
        again = fusion(pos)
    assert fusion._cached is not None and fusion._cached[2].dtype == torch.float32
    assert torch.equal(again, full)  # the float32 tables are rebuilt, not the bfloat16 ones reused
    assert not torch.equal(half, full) and torch.allclose(half.float(), full, atol=0.05)


def _tagger_and_inputs(dropout: float = 0.0, n_layers: int = 1, seed: int = 3):
    """A small FLAT tagger and the inputs of a random two-row batch."""
    torch.manual_seed(0)
    heads, tails, mask = random_lattice(2, seed=seed)
    embeddings = LatticeEmbeddings(
        char_width=8,
        word_width=8,
        word_rows=50,
        bigram_width=0,
        bigram_rows=0,
        bigram_vectors=False,
        embed_dropout=dropout,
    )
    encoder = FlatEncoder(
        embeddings.char_input_width,
        8,
        width=16,
        n_heads=4,
        ffn_width=32,
        n_layers=n_layers,
        dropout=dropout,
        attention_dropout=dropout,
        scaled=True,
    )
    model = LatticeTagger(embeddings, encoder, output_dropout=0.0)
    model.configure(
        n_chars=30,
        vector_width=0,
        n_tags=3,
        transitions=[(0, 0), (0, 1), (1, 2), (2, 0)],
        starts=[0, 1],
        ends=[0, 2],
    )
    counts = [int((heads[b][mask[b]] == tails[b][mask[b]]).sum()) for b in range(2)]
    width = heads.shape[1]
    char_index = torch.cat([b * width + torch.arange(c) for b, c in enumerate(counts)])
    sizes = mask.sum(1).tolist()
    word_index = torch.cat([b * width + torch.arange(c, s) for b, (c, s) in enumerate(zip(counts, sizes))])
    char_mask = torch.arange(max(counts))[None] < torch.tensor(counts)[:, None]
    inputs = (
        torch.randint(0, 30, (len(char_index),)),
        torch.randint(0, 50, (len(word_index), 2)),
        heads,
        tails,
        char_index,
        word_index,
        mask,
        char_mask,
    )
    return model, inputs


def test_tagger_gradients_flow_and_padding_is_ignored():
    model, inputs = _tagger_and_inputs()
    heads, tails, mask, char_mask = inputs[2], inputs[3], inputs[6], inputs[7]
    out = model(*inputs)
    assert out.shape == (2, char_mask.shape[1], 3)
    assert ((tails == heads) & mask).any()
    model.loss(out, torch.zeros(char_mask.shape, dtype=torch.long), char_mask).backward()
    w_r = model.encoder.position.w_r.weight
    assert w_r.grad is not None and w_r.grad.abs().sum() > 0


def test_recompute_gives_the_same_scores_and_gradients_with_dropout():
    """Activation recomputation (a training batch in several groups) keeps the
    dropout masks of the forward, so values and gradients do not change."""
    results = []
    for recompute in (False, True):
        model, inputs = _tagger_and_inputs(dropout=0.3, n_layers=2)
        model.train()
        torch.manual_seed(1)
        out = model(*inputs, recompute=recompute)
        out.pow(2).sum().backward()
        results.append((out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (out_a, grads_a), (out_b, grads_b) = results
    torch.testing.assert_close(out_a, out_b)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], msg=name)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_last_layer_without_word_rows_gives_the_same_characters(n_layers, monkeypatch):
    """The last layer computes only the character rows (no output reads the
    words'); scores and gradients equal those of the whole layer."""
    from spacy_flat.nn.attention_layers import ResidualLayer

    full = ResidualLayer.forward
    results = []
    for whole in (False, True):
        # Seed 5: the longest row has 11 characters among 18 tokens.
        model, inputs = _tagger_and_inputs(n_layers=n_layers, seed=5)
        if whole:
            monkeypatch.setattr(ResidualLayer, "forward", lambda self, x, *a, n_queries=None: full(self, x, *a))
        out = model(*inputs)
        out.pow(2).sum().backward()
        encoder = model.encoder
        results.append((out.detach(), encoder.char_proj.weight.grad.clone(), encoder.position.w_r.weight.grad.clone()))
    (out_a, g_a, r_a), (out_b, g_b, r_b) = results
    assert inputs[7].shape[1] < inputs[2].shape[1]  # the last layer did drop word rows
    assert torch.allclose(out_a, out_b, atol=1e-5)
    assert torch.allclose(g_a, g_b, atol=1e-5) and torch.allclose(r_a, r_b, atol=1e-5)
