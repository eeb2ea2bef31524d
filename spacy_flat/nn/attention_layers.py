"""What the attention encoders (FLAT, TENER, DC-SAN) share, as plain PyTorch: the
post-norm Transformer layer an attention sublayer sits in, the split into heads,
the padding mask, and the stack of layers with activation checkpointing."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Optional, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .dropout import Dropout


def split_heads(width: int, n_heads: int, scaled: bool) -> Tuple[int, int, float]:
    """RETURNS (Tuple[int, int, float]): Heads, head width and the score scale
    (1/sqrt(head width), or 1 for un-scaled attention)."""
    if width % n_heads:
        raise ValueError(f"d_model {width} is not divisible by {n_heads} heads")
    head_width = width // n_heads
    return n_heads, head_width, 1.0 / math.sqrt(head_width) if scaled else 1.0


class ResidualLayer(nn.Module):
    """An attention sublayer and a feed-forward sublayer, each with residual,
    dropout and layer norm (the Transformer's post-norm layer). FLAT and TENER
    differ only in the attention they put in it.

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
        **attention: Any,
    ) -> None:
        super().__init__()
        self.attention = self.attention_type(width, n_heads, dropout=attention_dropout, scaled=scaled, **attention)
        self.norm1 = nn.LayerNorm(width)
        self.ffn = nn.Sequential(nn.Linear(width, ffn_width), nn.ReLU(), Dropout(dropout), nn.Linear(ffn_width, width))
        self.norm2 = nn.LayerNorm(width)
        self.dropout = Dropout(dropout)

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
        x = self.norm1(x + self.dropout(attended))
        return self.norm2(x + self.dropout(self.ffn(x)))


def layer_stack(
    layer: Callable[..., ResidualLayer],
    n_layers: int,
    width: int,
    n_heads: int,
    ffn_width: int,
    *,
    dropout: float,
    attention_dropout: float,
    scaled: bool,
) -> nn.ModuleList:
    """`n_layers` layers of one kind (FLAT's or TENER's), each with its own weights."""
    return nn.ModuleList(
        layer(width, n_heads, ffn_width, dropout=dropout, attention_dropout=attention_dropout, scaled=scaled)
        for _ in range(n_layers)
    )


def padding_mask(token_mask: torch.Tensor) -> torch.Tensor:
    """(B, n) real tokens → (B, n, n) bool: real tokens attend to real tokens, and padded
    query rows to themselves, so that softmax stays finite."""
    attend = token_mask[:, None, :] & token_mask[:, :, None]
    return with_padding_rows(attend, token_mask)


def with_padding_rows(attend: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """`attend` with each padded query row attending to itself (softmax stays finite)."""
    eye = torch.eye(token_mask.shape[1], dtype=torch.bool, device=token_mask.device)[None]
    return attend | (eye & ~token_mask[:, :, None])


def run_layers(
    layers: nn.ModuleList,
    x: torch.Tensor,
    inputs: tuple,
    *,
    recompute: bool,
    last_queries: Optional[int] = None,
) -> torch.Tensor:
    """Run a stack of layers over x, each reading `inputs` besides it.

    recompute (bool): Keep no attention-sized activations for backward and
        recompute them there (torch's activation checkpointing, same dropout
        masks), so a batch encoded in several groups holds one group's
        attention at a time.
    last_queries (Optional[int]): The last layer computes only the first
        `last_queries` rows (the characters, which alone reach the output).
    """
    for k, layer in enumerate(layers):
        last = k == len(layers) - 1 and last_queries is not None and last_queries < x.shape[1]
        run = partial(layer, n_queries=last_queries) if last else layer
        if recompute and torch.is_grad_enabled():
            x = checkpoint(run, x, *inputs, use_reentrant=False)
        else:
            x = run(x, *inputs)
    return x
