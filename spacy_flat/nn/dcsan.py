"""DC-SAN's parts (Zhao et al., "Dynamic Modeling Cross- and Self-Lattice
Attention Network for Chinese NER") as plain PyTorch: the soft-lexicon word sets
of each character (eq. 3-6), the cross-lattice attention from word sets to
characters (eq. 7-10) and the gated fusion (eq. 11-14). The self-lattice layers
after them are TENER's (`tener.py`), as the paper's eq. 15-22 are.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .attention_layers import layer_stack, padding_mask, run_layers
from .dropout import Dropout
from .flat.positions import RelativePositions
from .lattice import Lattice, LatticeEncoder
from .tener import TenerLayer

# The four word sets of a character: the words it Begins, is in the Middle of, Ends, or is (Single).
SETS = ("B", "M", "E", "S")


def soft_lexicon(
    words: torch.Tensor,
    heads: torch.Tensor,
    tails: torch.Tensor,
    is_word: torch.Tensor,
    n_chars: int,
    weights: Optional[torch.Tensor],
    floor: float,
) -> torch.Tensor:
    """Each character's four word-set vectors, side by side (eq. 3-5):

    v(p) = 1/Z Σ_{w in p} (z(w) + b) e_w,   Z = Σ_{w in B∪M∪E∪S} (z(w) + b)

    words (B, n, d_w): the lattice's word embeddings e_w at their token positions.
    heads, tails (B, n): token spans; is_word (B, n) bool: the tokens that are words.
    n_chars (int): characters per row (the first tokens of each row).
    weights (B, n) or None: each word's weight z(w) + b; None weighs every word `floor`.
    floor (float): b, every word's weight when there are no frequencies (the plain mean).
    RETURNS (torch.Tensor): (B, n_chars, 4 d_w), zeros where a set is empty.
    """
    chars = torch.arange(n_chars, device=heads.device)[None, :, None]  # 1 C 1
    h, t = heads[:, None, :], tails[:, None, :]
    word = is_word[:, None, :]
    member = torch.stack(
        [
            word & (h == chars) & (h < t),
            word & (h < chars) & (chars < t),
            word & (t == chars) & (h < t),
            word & (h == chars) & (h == t),
        ],
        dim=1,
    )  # B 4 C n
    weight = weights if weights is not None else torch.full_like(heads, floor, dtype=words.dtype)
    weighted = member.to(words.dtype) * weight.to(words.dtype)[:, None, None, :]
    total = weighted.sum(dim=(1, 3), keepdim=True).clamp_min(1e-12)  # Z per character
    sets = torch.matmul(weighted / total, words[:, None])  # B 4 C d_w
    return sets.permute(0, 2, 1, 3).reshape(sets.shape[0], n_chars, -1)


class CrossLatticeAttention(nn.Module):
    """Word sets attend to characters (eq. 7-10): each character's word-set
    vector Y_i is the query, the characters X the keys and values; heads joined
    by W^t, and X̃ = Linear[X; Inter]."""

    def __init__(self, width: int, n_heads: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        if width % n_heads:
            raise ValueError(f"d_model {width} is not divisible by {n_heads} heads")
        self.n_heads, self.head_width = n_heads, width // n_heads
        self.w_y = nn.Linear(width, width)
        self.w_x = nn.Linear(width, width)
        self.w_xv = nn.Linear(width, width)
        self.w_t = nn.Linear(width, width)
        self.merge = nn.Linear(2 * width, width)
        self.dropout = Dropout(dropout)

    def forward(self, y: torch.Tensor, x: torch.Tensor, char_mask: torch.Tensor) -> torch.Tensor:
        """y, x (B, C, d); char_mask (B, C) bool → X̃ (B, C, d)."""
        batch, n, width = x.shape
        heads, hw = self.n_heads, self.head_width
        q = self.w_y(y).view(batch, n, heads, hw).transpose(1, 2)
        k = self.w_x(x).view(batch, n, heads, hw).transpose(1, 2)
        v = self.w_xv(x).view(batch, n, heads, hw).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hw)
        scores = scores.masked_fill(~char_mask[:, None, None, :], torch.finfo(scores.dtype).min)
        probs = self.dropout(torch.softmax(scores, dim=-1))
        inter = self.w_t(torch.matmul(probs, v).transpose(1, 2).reshape(batch, n, width))
        return self.merge(torch.cat([x, inter], dim=-1))


class GatedFusion(nn.Module):
    """F = g X̃ + (1 - g) Y with g = σ(W_g [tanh(X̃ W_c + b_c); tanh(Y W_w + b_w)]) (eq. 11-14)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.w_c = nn.Linear(width, width)
        self.w_w = nn.Linear(width, width)
        self.w_g = nn.Linear(2 * width, width)

    def forward(self, x_tilde: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.w_g(torch.cat([torch.tanh(self.w_c(x_tilde)), torch.tanh(self.w_w(y))], dim=-1)))
        return gate * x_tilde + (1 - gate) * y


class DcsanInput(nn.Module):
    """DC-SAN before its self-lattice layers: the soft-lexicon word sets of each
    character (eq. 3-6), the cross-lattice attention (eq. 7-10) and the gated
    fusion (eq. 11-14), from FLAT's character and lattice-word embeddings.

    floor (float): Each word's weight when the lexicon has no frequencies (each
        set is then the plain mean of its words). With frequencies, the featurizer
        gives each word z(w) + b (`word_counts.py`).
    """

    def __init__(self, word_width: int, width: int, n_heads: int, *, attention_dropout: float, floor: float = 1.0):
        super().__init__()
        self.floor = floor
        self.sets = nn.Linear(len(SETS) * word_width, width)
        self.cross = CrossLatticeAttention(width, n_heads, dropout=attention_dropout)
        self.fusion = GatedFusion(width)

    def forward(
        self, chars: torch.Tensor, words: torch.Tensor, lattice: Lattice, word_weights: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """chars (N_c, d) projected; words (N_w, d_w) embedded; word_weights (N_w,) z(w) + b
        or None → F (B, C, d) over characters only."""
        heads, tails, char_index, word_index, token_mask, char_mask = lattice
        batch, n = heads.shape
        n_chars = char_mask.shape[1]
        laid = words.new_zeros(batch * n, words.shape[1]).index_copy(0, word_index, words).view(batch, n, -1)
        position = torch.arange(n, device=heads.device)[None, :]
        is_word = token_mask & (position >= char_mask.sum(1, keepdim=True))
        weights = None
        if word_weights is not None:
            weights = words.new_zeros(batch * n).index_copy(0, word_index, word_weights.to(words.dtype)).view(batch, n)
        y = self.sets(soft_lexicon(laid, heads, tails, is_word, n_chars, weights, self.floor))
        # Characters open every row: position b * n + c of the lattice is b * C + c here. An index
        # copy, not a boolean-mask write, whose size is data (a GPU would wait for it to be read).
        rows = char_index // n * n_chars + char_index % n
        x = chars.new_zeros(batch * n_chars, chars.shape[1]).index_copy(0, rows, chars).view(batch, n_chars, -1)
        return self.fusion(self.cross(y, x, char_mask), y)


class DcsanEncoder(LatticeEncoder):
    """DC-SAN's encoder: the characters projected to d_model, their word sets attended and
    fused (`DcsanInput`), then `n_layers` of TENER's layers over the characters."""

    def __init__(
        self,
        char_input_width: int,
        word_width: int,
        *,
        width: int,
        n_heads: int,
        ffn_width: int,
        n_layers: int,
        dropout: float,
        attention_dropout: float,
        scaled: bool,
    ) -> None:
        super().__init__()
        self.width = width
        self.char_proj = nn.Linear(char_input_width, width)
        self.dcsan = DcsanInput(word_width, width, n_heads, attention_dropout=attention_dropout)
        self.layers = layer_stack(
            TenerLayer,
            n_layers,
            width,
            n_heads,
            ffn_width,
            dropout=dropout,
            attention_dropout=attention_dropout,
            scaled=scaled,
        )

    weighs_words = True

    def forward(
        self,
        chars: torch.Tensor,
        words: torch.Tensor,
        lattice: Lattice,
        *,
        positions: Optional[RelativePositions] = None,
        recompute: bool = False,
        word_weights: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """chars (N_c, char_input_width), words (N_w, word_width) embedded; word_weights
        (N_w,) each word's z(w) + b, or None → (B, C, width)."""
        x = self.dcsan(self.char_proj(chars), words, lattice, word_weights)
        # The self-lattice layers read characters only.
        return run_layers(self.layers, x, (padding_mask(lattice.char_mask),), recompute=recompute)
