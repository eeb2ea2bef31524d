"""FLAT's encoder layer as plain PyTorch: self-attention over the flat lattice
with relative span positions (Li et al. 2020, eq. 11), and its feed-forward sublayer."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Tuple, Union

import torch
from torch import nn

from ..settings import FlatSettings
from .dropout import Dropout
from .position import PositionFusion, RelativePositions
from .position_keys import PositionKeyCache
from .position_scores import position_scores


def split_heads(width: int, n_heads: int, scaled: bool) -> Tuple[int, int, float]:
    """RETURNS (Tuple[int, int, float]): Heads, head width and the score scale
    (1/sqrt(head width), or 1 for un-scaled attention)."""
    if width % n_heads:
        raise ValueError(f"d_model {width} is not divisible by {n_heads} heads")
    head_width = width // n_heads
    return n_heads, head_width, 1.0 / math.sqrt(head_width) if scaled else 1.0


class FlatAttention(nn.Module):
    """Multi-head self-attention with FLAT's relative span positions (eq. 11):

    A_ij = (q_i + u) . k_j + (q_i + v) . (R_ij W_kR)

    The position term is scored against the distinct triples only and then
    gathered per pair, in row chunks (`position_scores`), so no (n x n x d)
    tensor is ever built.

    key_projection (bool), output_projection (bool): k_j = W_k x_j, and W_o on the
        heads' concatenated output; without them (the released code's attention) the
        keys are the inputs and the output is the heads' concatenation.
    """

    def __init__(
        self,
        width: int,
        n_heads: int,
        *,
        dropout: float = 0.0,
        scaled: bool = True,
        key_projection: bool = True,
        output_projection: bool = True,
    ) -> None:
        super().__init__()
        self.n_heads, self.head_width, self.scale = split_heads(width, n_heads, scaled)
        self.w_q = nn.Linear(width, width)
        self.w_k: nn.Module = nn.Linear(width, width) if key_projection else nn.Identity()
        self.w_v = nn.Linear(width, width)
        self.w_kr = nn.Linear(width, width, bias=False)
        self.u = nn.Parameter(torch.zeros(n_heads, self.head_width))
        self.v = nn.Parameter(torch.zeros(n_heads, self.head_width))
        self.w_o: nn.Module = nn.Linear(width, width) if output_projection else nn.Identity()
        self.dropout = Dropout(dropout)
        # W_kR R rows kept between prediction batches (not weights: never saved).
        self.position_keys = PositionKeyCache()

    def forward(
        self,
        x: torch.Tensor,
        rel: Union[torch.Tensor, PositionFusion],
        pos: RelativePositions,
        attend: torch.Tensor,
        n_queries: Optional[int] = None,
    ) -> torch.Tensor:
        """x (B, n, d); rel (n_triples, d) fused positions, or in prediction on a CPU the
        module that fuses them (this layer keeps its projected rows: `position_keys.py`);
        attend (B, n, n) bool; n_queries: attend from the first n_queries tokens only
        → (B, n_queries or n, d)."""
        batch, n, width = x.shape
        heads, hw = self.n_heads, self.head_width
        n_q = n if n_queries is None else n_queries
        if n_q < n:
            pos, attend = pos.queries(n_q), attend[:, :n_q]
        q = self.w_q(x[:, :n_q]).view(batch, n_q, heads, hw).transpose(1, 2)  # B H n_q hw
        k = self.w_k(x).view(batch, n, heads, hw).transpose(1, 2)
        val = self.w_v(x).view(batch, n, heads, hw).transpose(1, 2)
        # In prediction on a CPU the projected rows are looked up, else computed; training
        # changes the weights, and a GPU never reads the kept rows, so they are dropped.
        if isinstance(rel, PositionFusion):
            keys = self.position_keys.keys(pos, rel, self.w_kr)
        else:
            self.position_keys.clear()
            keys = self.w_kr(rel)
        rk = keys.view(-1, heads, hw).permute(1, 2, 0)  # H hw U
        # The scale is folded into the queries, and the sum and mask are done in
        # place on fresh tensors: each saves an attention-sized copy.
        scores = torch.matmul((q + self.u[None, :, None, :]) * self.scale, k.transpose(-1, -2))
        scores += position_scores((q + self.v[None, :, None, :]) * self.scale, rk, pos)
        scores.masked_fill_(~attend[:, None], torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        if self.dropout.p > 0:
            probs = self.dropout(probs)
        out = torch.matmul(probs, val).transpose(1, 2).reshape(batch, n_q, width)
        return self.w_o(out)


class ResidualLayer(nn.Module):
    """An attention sublayer and a feed-forward sublayer, each with residual,
    dropout and layer norm (the Transformer's post-norm layer). FLAT and TENER
    differ only in the attention they put in it.

    residual (bool): False gives the released FLAT code's layer, LN(Attn(x)) then
        LN(FFN(.)): its add & norm adds a sublayer's output to itself (LN(2y) = LN(y)),
        and it drops out nothing between the sublayers (the FFN keeps its inner dropout
        and, as there, drops out its output too).
    attention (Any): Further settings of the attention sublayer.
    """

    # The attention sublayer's class: (width, n_heads, dropout=, scaled=, **attention) -> module.
    attention_type: Callable[..., nn.Module]

    def __init__(
        self,
        width: int,
        n_heads: int,
        ffn_width: int,
        *,
        dropout: float,
        attention_dropout: float,
        scaled: bool,
        residual: bool = True,
        **attention: Any,
    ) -> None:
        super().__init__()
        self.attention = self.attention_type(width, n_heads, dropout=attention_dropout, scaled=scaled, **attention)
        self.norm1 = nn.LayerNorm(width)
        self.ffn = nn.Sequential(nn.Linear(width, ffn_width), nn.ReLU(), Dropout(dropout), nn.Linear(ffn_width, width))
        self.norm2 = nn.LayerNorm(width)
        self.dropout = Dropout(dropout)
        self.residual = residual

    @classmethod
    def from_settings(cls, s: FlatSettings, **attention: Any) -> ResidualLayer:
        """A layer of the model `s` describes."""
        return cls(
            s.width,
            s.n_heads,
            s.ffn_width,
            dropout=s.dropout,
            attention_dropout=s.attention_dropout,
            scaled=s.scaled,
            residual=s.residual,
            **attention,
        )

    def forward(self, x: torch.Tensor, *inputs: Any, n_queries: Optional[int] = None) -> torch.Tensor:
        """x (B, n, d) and what the attention reads besides it → (B, n, d).

        n_queries (Optional[int]): Compute only the first n_queries outputs of
            each row (B, n_queries, d): keys and values still come from every token.
        """
        if n_queries is None:
            attended = self.attention(x, *inputs)
        else:
            attended = self.attention(x, *inputs, n_queries=n_queries)
            x = x[:, :n_queries]
        if not self.residual:
            return self.norm2(self.dropout(self.ffn(self.norm1(attended))))
        x = self.norm1(x + self.dropout(attended))
        return self.norm2(x + self.dropout(self.ffn(x)))


class FlatLayer(ResidualLayer):
    """FLAT's layer: its attention over the lattice (reads rel, pos and attend)."""

    attention_type = FlatAttention

    @classmethod
    def from_settings(cls, s: FlatSettings, **attention: Any) -> ResidualLayer:
        """A layer of the model `s` describes, with the projections it chooses."""
        projections = {"key_projection": s.key_projection, "output_projection": s.output_projection}
        return super().from_settings(s, **projections, **attention)
