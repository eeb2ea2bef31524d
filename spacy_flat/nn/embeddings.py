"""Embedding tables of lattice tokens that are not plain rows: bloom-hashed
strings and word types (plain PyTorch)."""

from __future__ import annotations

import torch
from torch import nn


class HashEmbedding(nn.Module):
    """Bloom embedding: each item sums the rows its hashes select, so any string
    (a word added to the lexicon after training, too) has a learned vector in a
    fixed-size table."""

    def __init__(self, n_rows: int, width: int) -> None:
        super().__init__()
        self.table = nn.Embedding(n_rows, width)
        nn.init.normal_(self.table.weight, std=0.1)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        """rows (N, n_hashes) int64 → (N, width)."""
        return self.table(rows).sum(1)


class TypeEmbedding(nn.Module):
    """A learned vector per word type (gazetteer); a word sums the vectors of its
    types, so a place name that is also a person's name says both.

    Types are bits of an int64 per word; bits beyond the `n_types` the model was
    built with (types added to the lexicon after training) are ignored.
    """

    def __init__(self, n_types: int, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_types, width))
        nn.init.normal_(self.weight, std=0.1)
        self.bits: torch.Tensor
        self.register_buffer("bits", 2 ** torch.arange(n_types, dtype=torch.int64), persistent=False)

    def forward(self, type_bits: torch.Tensor) -> torch.Tensor:
        """type_bits (N,) int64 → (N, width)."""
        has = (type_bits[:, None] & self.bits[None, :]) != 0
        return has.to(self.weight.dtype) @ self.weight
