"""TENER's encoder layer (Yan et al. 2019) as plain PyTorch: self-attention over
characters with direction- and distance-aware relative positions, un-scaled.

    Q, K, V = H W_q, H_{d_k}, H W_v                                  (eq. 16)
    R_{t-j} = [... sin((t-j) / 10000^{2i/d_k}), cos((t-j) / 10000^{2i/d_k}) ...]   (eq. 17)
    A_tj = Q_t K_j + Q_t R_{t-j} + u K_j + v R_{t-j}                 (eq. 18)
    Attn = softmax(A) V                                               (eq. 19)

Keys are the input's own head partitions (no W_k), R is fixed (no W_R) and the
heads are joined without W_o, as in the paper: fewer parameters for small NER
data. sin(-x) = -sin(x), so R tells a left neighbour from a right one.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .attention_layers import ResidualLayer, layer_stack, padding_mask, run_layers, split_heads
from .dropout import Dropout
from .flat.positions import RelativePositions
from .lattice import Lattice, LatticeEncoder


def relative_sinusoids(n: int, head_width: int, device: torch.device) -> torch.Tensor:
    """R_k for k = -(n-1) … n-1, interleaved sin and cos (eq. 17).

    RETURNS (torch.Tensor): (2n - 1, head_width); row k + n - 1 is R_k.
    """
    if head_width % 2:
        raise ValueError(f"TENER's positions need an even head width, got {head_width}")
    distances = torch.arange(-(n - 1), n, device=device, dtype=torch.float32)
    rates = torch.exp(
        torch.arange(0, head_width, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / head_width)
    )
    angles = distances[:, None] * rates[None, :]
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(2 * n - 1, head_width)


class TenerAttention(nn.Module):
    """Multi-head self-attention of eq. 16–19. `scaled` divides the scores by
    sqrt(d_k) (the paper's ablation; TENER itself is un-scaled)."""

    def __init__(self, width: int, n_heads: int, *, dropout: float = 0.0, scaled: bool = False) -> None:
        super().__init__()
        self.n_heads, self.head_width, self.scale = split_heads(width, n_heads, scaled)
        self.w_q = nn.Linear(width, width)
        self.w_v = nn.Linear(width, width)
        self.u = nn.Parameter(torch.zeros(n_heads, self.head_width))
        self.v = nn.Parameter(torch.zeros(n_heads, self.head_width))
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, attend: torch.Tensor) -> torch.Tensor:
        """x (B, n, d); attend (B, n, n) bool → (B, n, d)."""
        batch, n, width = x.shape
        heads, hw = self.n_heads, self.head_width
        q = self.w_q(x).view(batch, n, heads, hw).transpose(1, 2)  # B H n hw
        k = x.view(batch, n, heads, hw).transpose(1, 2)
        val = self.w_v(x).view(batch, n, heads, hw).transpose(1, 2)
        rel = relative_sinusoids(n, hw, x.device).to(x.dtype)  # (2n-1) hw
        content = torch.matmul(q + self.u[None, :, None, :], k.transpose(-1, -2))
        # Score each query against every distance once, then pick R_{t-j} per pair.
        by_distance = torch.matmul(q + self.v[None, :, None, :], rel.t())  # B H n (2n-1)
        positions = torch.arange(n, device=x.device)
        index = (positions[:, None] - positions[None, :] + n - 1).expand(batch, heads, n, n)
        scores = (content + torch.gather(by_distance, -1, index)) * self.scale
        scores = scores.masked_fill(~attend[:, None], torch.finfo(scores.dtype).min)
        probs = self.dropout(torch.softmax(scores, dim=-1))
        return torch.matmul(probs, val).transpose(1, 2).reshape(batch, n, width)


class TenerLayer(ResidualLayer):
    """TENER's layer: its attention over characters (reads attend) in the same residual layer as FLAT's."""

    attention_type = TenerAttention


class TenerEncoder(LatticeEncoder):
    """TENER's encoder: the characters projected to d_model, then `n_layers` of TENER's
    layers over them (no lattice words)."""

    def __init__(
        self,
        char_input_width: int,
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
        """chars (N_c, char_input_width) embedded → (B, C, width); `words` are not read
        (TENER's featurizer gives none)."""
        x = lattice.laid_out(self.char_proj(chars), chars.new_zeros(0, self.width))
        x = run_layers(self.layers, x, (padding_mask(lattice.token_mask),), recompute=recompute)
        return x[:, : lattice.n_chars]
