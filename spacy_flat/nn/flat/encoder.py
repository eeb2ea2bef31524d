"""FLAT's encoder as plain PyTorch (Li et al. 2020): the characters and words of the
flat lattice side by side, encoded by layers of self-attention with relative span
positions (eq. 8 and 11)."""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import nn

from ..attention_layers import ResidualLayer, layer_stack, run_layers, split_heads, with_padding_rows
from ..dropout import Dropout
from ..lattice import Lattice, LatticeEncoder
from .position_keys import PositionKeyCache
from .position_scores import position_scores
from .positions import PositionFusion, RelativePositions, relative_positions


class FlatAttention(nn.Module):
    """Multi-head self-attention with FLAT's relative span positions (eq. 11):

    A_ij = (q_i + u) . k_j + (q_i + v) . (R_ij W_kR)

    The position term is scored against the distinct triples only and then
    gathered per pair, in row chunks (`position_scores`), so no (n x n x d)
    tensor is ever built.
    """

    def __init__(self, width: int, n_heads: int, *, dropout: float = 0.0, scaled: bool = True) -> None:
        super().__init__()
        self.n_heads, self.head_width, self.scale = split_heads(width, n_heads, scaled)
        self.w_q = nn.Linear(width, width)
        self.w_k = nn.Linear(width, width)
        self.w_v = nn.Linear(width, width)
        self.w_kr = nn.Linear(width, width, bias=False)
        self.u = nn.Parameter(torch.zeros(n_heads, self.head_width))
        self.v = nn.Parameter(torch.zeros(n_heads, self.head_width))
        self.w_o = nn.Linear(width, width)
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


class FlatLayer(ResidualLayer):
    """FLAT's layer: its attention over the lattice (reads rel, pos and attend)."""

    attention_type = FlatAttention


class FlatEncoder(LatticeEncoder):
    """FLAT's encoder: characters and words projected to d_model and laid out as one
    sequence, then `n_layers` layers of lattice attention; the characters' rows come out.

    The paper's ablations: mask_self_matched (FLAT_msm: a character may not attend to
    the words that contain it), max_distance (FLAT_mld: no attention between spans
    whose heads are further apart; -1 for none) and head_only (FLAT_head: R from p_hh alone).
    """

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
        mask_self_matched: bool = False,
        max_distance: int = -1,
        head_only: bool = False,
    ) -> None:
        super().__init__()
        self.width = width
        self.char_proj = nn.Linear(char_input_width, width)
        self.word_proj = nn.Linear(word_width, width)
        self.position = PositionFusion(width, head_only=head_only)
        self.layers = layer_stack(
            FlatLayer,
            n_layers,
            width,
            n_heads,
            ffn_width,
            dropout=dropout,
            attention_dropout=attention_dropout,
            scaled=scaled,
        )
        self.mask_self_matched = mask_self_matched
        self.max_distance = max_distance

    # Training on a device plans the relative positions on the host (`position_plan.py`).
    reads_positions = True

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
        """chars (N_c, char_input_width), words (N_w, word_width) embedded → (B, C, width).

        positions (Optional[RelativePositions]): The relative positions planned on the
            host (`position_plan.py`); None: indexed here from heads and tails.
        recompute (bool): Recompute the attention in backward (`run_layers`).
        word_weights: Not read (DC-SAN's).
        """
        x = lattice.laid_out(self.char_proj(chars), self.word_proj(words))
        heads, tails, token_mask = lattice.heads, lattice.tails, lattice.token_mask
        pos = positions if positions is not None else relative_positions(heads, tails, token_mask)
        attend = self._attention_mask(heads, tails, token_mask, pos)
        # Prediction on a CPU: each layer looks its projected rows up (`position_keys.py`).
        rel = self.position if not torch.is_grad_enabled() and heads.device.type == "cpu" else self.position(pos)
        # Only characters reach the output, so the last layer computes no word rows
        # (FLAT's lattice rows are a third or more of its tokens); keys keep every token.
        x = run_layers(self.layers, x, (rel, pos, attend), recompute=recompute, last_queries=lattice.n_chars)
        return x[:, : lattice.n_chars]

    def _attention_mask(
        self, heads: torch.Tensor, tails: torch.Tensor, token_mask: torch.Tensor, pos: RelativePositions
    ) -> torch.Tensor:
        attend = token_mask[:, None, :] & token_mask[:, :, None]
        if self.mask_self_matched:
            is_char = (pos.lengths == 0) & token_mask
            is_word = (pos.lengths > 0) & token_mask
            inside = (heads[:, None, :] <= heads[:, :, None]) & (heads[:, :, None] <= tails[:, None, :])
            attend = attend & ~(is_char[:, :, None] & is_word[:, None, :] & inside)
        if self.max_distance >= 0:
            far = (heads[:, :, None] - heads[:, None, :]).abs() > self.max_distance
            attend = attend & ~far
        return with_padding_rows(attend, token_mask)
