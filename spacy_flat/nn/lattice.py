"""A batch's lattice as the encoders read it, and what the tagger asks of an encoder (plain PyTorch)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import nn

from .flat.positions import RelativePositions


class Lattice(NamedTuple):
    """Where each character and word of a batch sits: every row holds its characters
    first, then its words, padded to n tokens; C is the longest row's characters.

    heads, tails (B, n) int64: each token's first and last character.
    char_index (N_c,), word_index (N_w,) int64: flat positions in (B * n) of every
        character and word, in the order of their embeddings.
    token_mask (B, n) bool: real tokens. char_mask (B, C) bool: real characters.
    """

    heads: torch.Tensor
    tails: torch.Tensor
    char_index: torch.Tensor
    word_index: torch.Tensor
    token_mask: torch.Tensor
    char_mask: torch.Tensor

    @property
    def n_chars(self) -> int:
        """RETURNS (int): C, the characters of the longest row."""
        return self.char_mask.shape[1]

    def laid_out(self, chars: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """Characters (N_c, d) and words (N_w, d) at their token positions → (B, n, d), zeros in padding."""
        batch, n = self.heads.shape
        x = chars.new_zeros(batch * n, chars.shape[1])
        return x.index_copy(0, self.char_index, chars).index_copy(0, self.word_index, words).view(batch, n, -1)


class LatticeEncoder(nn.Module):
    """What the tagger asks of an encoder (FLAT, TENER, DC-SAN, the Lattice LSTM): its
    width, the projection of its characters' input, and a forward from the embedded
    characters and words of a batch to each character's vector."""

    width: int
    char_proj: nn.Linear
    # Whether forward reads FLAT's relative positions (planned on the host in training on a device).
    reads_positions: bool = False
    # Whether forward reads each word's frequency weight (DC-SAN's z(w) + b).
    weighs_words: bool = False

    def resize_input(self, char_input_width: int) -> None:
        """Make the character projection read `char_input_width` (known once data is seen)."""
        if self.char_proj.in_features != char_input_width:
            device = self.char_proj.weight.device
            self.char_proj = nn.Linear(char_input_width, self.char_proj.out_features).to(device)

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
        """chars (N_c, char input width), words (N_w, word width) embedded → (B, C, width).

        positions (Optional[RelativePositions]): FLAT's relative positions planned on the host.
        recompute (bool): Recompute attention-sized activations in backward (`run_layers`).
        word_weights (Optional[torch.Tensor]): (N_w,) DC-SAN's z(w) + b per word.
        """
        raise NotImplementedError
