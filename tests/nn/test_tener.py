"""TENER (spacy-flat.TenerTagger.v2): its attention against a literal pair-by-pair
reading of the paper's eq. 16-19, and the architecture in the component."""

import math

import pytest
import spacy
import torch
from spacy.util import fix_random_seed

from spacy_flat.nn.tener import TenerAttention, TenerEncoder, relative_sinusoids

from ..util import saved_and_loaded, tiny_examples


def literal_r(distance: int, head_width: int) -> torch.Tensor:
    """Eq. 17 for one distance, element by element."""
    out = torch.zeros(head_width, dtype=torch.float64)
    for i in range(head_width // 2):
        out[2 * i] = math.sin(distance / 10000 ** (2 * i / head_width))
        out[2 * i + 1] = math.cos(distance / 10000 ** (2 * i / head_width))
    return out


def literal_attention(layer: TenerAttention, x: torch.Tensor, attend: torch.Tensor) -> torch.Tensor:
    """Eq. 16-19 pair by pair: Q = H W_q, K = the head's slice of H, V = H W_v."""
    batch, n, _ = x.shape
    heads, hw = layer.n_heads, layer.head_width
    q_all, v_all = layer.w_q(x), layer.w_v(x)
    out = torch.zeros_like(x)
    for b in range(batch):
        for h in range(heads):
            part = slice(h * hw, (h + 1) * hw)
            for t in range(n):
                scores = []
                for j in range(n):
                    q, k, r = q_all[b, t, part], x[b, j, part], literal_r(t - j, hw).to(x.dtype)
                    a = q @ k + q @ r + layer.u[h] @ k + layer.v[h] @ r
                    scores.append(a * layer.scale if attend[b, t, j] else torch.tensor(-1e30, dtype=x.dtype))
                probs = torch.softmax(torch.stack(scores), dim=0)
                out[b, t, part] = probs @ v_all[b, :, part]
    return out


def test_relative_positions_tell_direction_and_distance():
    table = relative_sinusoids(5, 6, torch.device("cpu")).double()
    for k in range(-4, 5):
        assert torch.allclose(table[k + 4], literal_r(k, 6), atol=1e-6)
    # sin(-x) = -sin(x), cos(-x) = cos(x): left and right neighbours differ.
    assert torch.allclose(table[4 + 2][0::2], -table[4 - 2][0::2]) and torch.allclose(table[6][1::2], table[2][1::2])
    with pytest.raises(ValueError, match="even head width"):
        relative_sinusoids(3, 5, torch.device("cpu"))


@pytest.mark.parametrize("scaled", [False, True])
def test_attention_equals_the_literal_equations(scaled):
    torch.manual_seed(0)
    layer = TenerAttention(8, 2, scaled=scaled).double()
    with torch.no_grad():
        layer.u.normal_()
        layer.v.normal_()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    attend = torch.ones(2, 5, 5, dtype=torch.bool)
    attend[1, :, 3:] = False  # a padded row: its last two tokens are not attended
    assert torch.allclose(layer(x, attend), literal_attention(layer, x, attend), atol=1e-10)
    # No key projection and no output projection (eq. 16; W_o is folded into the FFN).
    assert {name for name, _ in layer.named_parameters()} == {
        "w_q.weight",
        "w_q.bias",
        "w_v.weight",
        "w_v.bias",
        "u",
        "v",
    }


def test_attention_gradients_pass_gradcheck():
    torch.manual_seed(0)
    layer = TenerAttention(4, 2).double()
    x = torch.randn(1, 4, 4, dtype=torch.float64, requires_grad=True)
    attend = torch.ones(1, 4, 4, dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda inp: layer(inp, attend), (x,))


def tener_config(**model):
    return {
        "model": {
            "@architectures": "spacy-flat.TenerTagger.v2",
            "width": 32,
            "n_heads": 4,
            "ffn_width": 64,
            "embed_dropout": 0.0,
            "dropout": 0.0,
            "output_dropout": 0.0,
            **model,
        }
    }


@pytest.fixture(scope="module")
def tener_nlp():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=tener_config())
    examples = tiny_examples(nlp)
    no_lexicon = spacy.registry.misc.get("spacy-flat.no_lexicon.v1")()
    ner.initialize(lambda: examples, nlp=nlp, lexicon=no_lexicon)
    optimizer = nlp.create_optimizer()
    losses = [nlp.update(examples, sgd=optimizer, losses={})["flat_ner"] for _ in range(80)]
    return nlp, losses


def test_tener_trains_in_the_component_on_characters_alone(tener_nlp):
    nlp, losses = tener_nlp
    assert losses[-1] < losses[0] / 5
    module = nlp.get_pipe("flat_ner").tagger.module
    assert isinstance(module.encoder, TenerEncoder) and module.embeddings.word_embed is None
    assert len(nlp.get_pipe("flat_ner").resources.lexicon) == 0
    doc = nlp("张三在北京大学工作。")
    assert doc.ents and all(ent.label_ in nlp.get_pipe("flat_ner").labels for ent in doc.ents)


def test_tener_reads_no_lattice_words_even_with_a_lexicon():
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=tener_config())
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp)  # jieba's lexicon: matched by nothing
    segments, _ = ner.segmenter.segments([nlp.make_doc("他在北京大学工作")])
    batch = ner.model.get_ref("features").predict(segments)
    assert batch.word_index.shape == (0,) and batch.heads.shape == (1, 8)


def test_tener_saves_loads_and_batches_like_one_doc_at_a_time(tener_nlp, tmp_path):
    nlp, _ = tener_nlp
    saved_and_loaded(nlp, tmp_path / "tener")


def test_tener_cuts_long_docs_into_windows(tmp_path):
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={**tener_config(), "window_size": 16, "window_overlap": 4})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=spacy.registry.misc.get("spacy-flat.no_lexicon.v1")())
    text = "张三在北京大学工作。李四住在上海。" * 6
    segments, _ = ner.segmenter.segments([nlp.make_doc(text)])
    assert len(segments) > 1 and max(len(s.text) for s in segments) <= 16
    doc = nlp(text)
    assert all(0 <= e.start_char < e.end_char <= len(text) for e in doc.ents)
