"""FLAT's projected position rows kept between prediction batches: the rows computed per
batch, whatever batches came before, following the weights, bounded, and never saved."""

import copy
import pickle
import threading

import pytest
import torch
from thinc.api import SGD, Adam

from spacy_flat.layers.torch_steps import torch_step
from spacy_flat.nn.flat import position_keys
from spacy_flat.nn.flat.encoder import FlatAttention
from spacy_flat.nn.flat.position_keys import PositionKeyCache
from spacy_flat.nn.flat.positions import PositionFusion, relative_positions

from .test_encoder import _tagger_and_inputs, random_lattice


def _modules(head_only: bool = False, seed: int = 0):
    torch.manual_seed(seed)
    return PositionFusion(16, head_only=head_only), FlatAttention(16, 4)


def _computed(pos, fusion, attn):
    with torch.enable_grad():
        return attn.w_kr(fusion(pos)).detach()


@pytest.mark.parametrize("head_only", [False, True])
def test_kept_rows_are_the_computed_rows_whatever_came_before(head_only):
    fusion, attn = _modules(head_only)
    cache = PositionKeyCache()
    batches = [relative_positions(*random_lattice(4, seed=s)) for s in range(6)]
    with torch.inference_mode():
        for pos in batches + batches[::-1]:
            assert torch.allclose(cache.keys(pos, fusion, attn.w_kr), _computed(pos, fusion, attn), atol=1e-6)
    assert cache._kept is not None and len(cache._kept.blocks) > 1
    # A block's rows do not depend on the batch that asked for it first.
    other = PositionKeyCache()
    with torch.inference_mode():
        for pos in batches[::-1]:
            other.keys(pos, fusion, attn.w_kr)
    kept, again = cache._kept, other._kept
    assert again is not None and set(again.blocks) == set(kept.blocks)
    size = 2 * kept.reach + 1
    for pair, number in kept.blocks.items():
        first = kept.rows[number * size : (number + 1) * size]
        second = again.rows[again.blocks[pair] * size : (again.blocks[pair] + 1) * size]
        assert torch.equal(first, second)


def test_kept_rows_follow_the_weights_and_longer_texts():
    fusion, attn = _modules()
    cache = PositionKeyCache()
    pos = relative_positions(*random_lattice(3, seed=1))
    with torch.inference_mode():
        before = cache.keys(pos, fusion, attn.w_kr).clone()
    for change in (attn.w_kr.weight, fusion.w_r.weight, fusion.w_r.bias):
        with torch.no_grad():
            change.mul_(0.5)  # an optimizer step in place
        with torch.inference_mode():
            after = cache.keys(pos, fusion, attn.w_kr)
        assert not torch.allclose(after, before) and torch.allclose(after, _computed(pos, fusion, attn), atol=1e-6)
        before = after.clone()
    # Weights loaded from elsewhere (new storage), then heads past the kept reach.
    attn.load_state_dict(FlatAttention(16, 4).state_dict())
    heads, tails, mask = random_lattice(3, seed=1)
    far = relative_positions(heads * 40, tails * 40, mask)
    assert far.max_head > cache._kept.reach
    with torch.inference_mode():
        for batch in (pos, far, pos):
            assert torch.allclose(cache.keys(batch, fusion, attn.w_kr), _computed(batch, fusion, attn), atol=1e-6)
    assert cache._kept.reach >= far.max_head


@pytest.mark.parametrize("optimizer", [Adam(0.01), Adam(0.01, L2=1e-3), SGD(0.01)], ids=["adam", "adam-l2", "sgd"])
def test_kept_rows_follow_the_training_steps(optimizer):
    """The project's optimizer step (torch's fused Adam changes parameters without bumping
    their versions) and a training forward pass both retire the kept rows."""
    fusion, attn = _modules()
    pos = relative_positions(*random_lattice(3, seed=1))
    params = [("w_kr", attn.w_kr.weight), ("w_r", fusion.w_r.weight), ("bias", fusion.w_r.bias)]
    for _ in range(3):
        with torch.inference_mode():
            kept = attn.position_keys.keys(pos, fusion, attn.w_kr)
        assert torch.allclose(kept, _computed(pos, fusion, attn), atol=1e-6)
        steps = [((0, name), param, torch.randn_like(param)) for name, param in params]
        torch_step(optimizer, steps)
    x = torch.randn(3, pos.index.shape[1], 16)
    attend = torch.ones(pos.index.shape, dtype=torch.bool)
    attn(x, fusion(pos), pos, attend)  # a training forward pass: nothing kept
    assert attn.position_keys._kept is None


def test_threads_adding_blocks_keep_each_others_rows():
    fusion, attn = _modules()
    heads, tails, mask = random_lattice(4, seed=0)
    batches = [relative_positions(heads, tails + k * (tails - heads), mask) for k in range(6)]
    cache = PositionKeyCache()
    errors = []

    def predict(batch):
        with torch.inference_mode():
            for _ in range(3):
                if not torch.allclose(cache.keys(batch, fusion, attn.w_kr), _computed(batch, fusion, attn), atol=1e-6):
                    errors.append(batch)

    threads = [threading.Thread(target=predict, args=(b,)) for b in batches * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    with torch.inference_mode():
        for batch in batches:
            assert torch.allclose(cache.keys(batch, fusion, attn.w_kr), _computed(batch, fusion, attn), atol=1e-6)


def test_kept_rows_stay_under_the_budget():
    """Past the budget the rows start again from the batch at hand; a batch that alone
    needs more is computed and nothing is kept."""
    fusion, attn = _modules()
    heads, tails, mask = random_lattice(4, seed=0)
    short = relative_positions(heads, tails, mask)  # span lengths 0-3: 16 (l_i, l_j) blocks
    long = relative_positions(heads, heads + 2 * (tails - heads), mask)  # lengths 0, 2, 4, 6
    block = (2 * position_keys.MIN_REACH + 1) * 16 * 4
    cache = PositionKeyCache(budget=20 * block)
    with torch.inference_mode():
        for batch in (short, long):
            assert torch.allclose(cache.keys(batch, fusion, attn.w_kr), _computed(batch, fusion, attn), atol=1e-6)
        assert cache._kept is not None and len(cache._kept.blocks) == 16
        assert cache._kept.rows.numel() * 4 <= 20 * block  # the storage too
        assert set(cache._kept.blocks) == set(zip(long.len_i.tolist(), long.len_j.tolist()))
        cache.budget = 10 * block
        assert torch.allclose(cache.keys(short, fusion, attn.w_kr), _computed(short, fusion, attn), atol=1e-6)
        assert cache._kept is None


def test_kept_rows_are_not_weights_and_are_not_copied():
    fusion, attn = _modules()
    pos = relative_positions(*random_lattice(3, seed=2))
    with torch.inference_mode():
        attn.position_keys.keys(pos, fusion, attn.w_kr)
    assert attn.position_keys._kept is not None
    assert set(attn.state_dict()) == set(FlatAttention(16, 4).state_dict())
    assert pickle.loads(pickle.dumps(attn)).position_keys._kept is None
    assert copy.deepcopy(attn).position_keys._kept is None


def test_training_computes_the_rows_and_prediction_looks_them_up(monkeypatch):
    """With autograd on, the encoder hands the layers fused rows (no lookup); in
    prediction on a CPU the layers look them up, and the emissions agree."""
    tagger, inputs = _tagger_and_inputs()
    tagger.eval()
    calls = []
    keys = PositionKeyCache.keys
    monkeypatch.setattr(PositionKeyCache, "keys", lambda self, *a: calls.append(1) or keys(self, *a))
    computed = tagger(*inputs).detach()
    assert not calls
    with torch.no_grad():
        looked_up = tagger(*inputs)
    assert calls and torch.allclose(looked_up, computed, atol=1e-5)
