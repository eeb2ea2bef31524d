"""The Lattice LSTM (Zhang & Yang, "Chinese NER Using Lattice LSTM", ACL 2018,
section 3.3) as plain PyTorch, batched over rows and over the words that end at
each character.

A character LSTM whose cell, at a character where lexicon words end, merges the
cells of those words with its own candidate instead of keeping its previous cell:

    [i^c_j; o^c_j; f^c_j; c̃^c_j] = [σ; σ; σ; tanh](W^c [x^c_j; h^c_{j-1}] + b^c)      (eq. 11)
    [i^w_be; f^w_be; c̃^w_be] = [σ; σ; tanh](W^w [x^w_be; h^c_b] + b^w)               (eq. 13)
    c^w_be = f^w_be ⊙ c^c_b + i^w_be ⊙ c̃^w_be
    i^c_be = σ(W^l [x^c_e; c^w_be] + b^l)                                            (eq. 14)
    c^c_j = Σ_b α^c_bj ⊙ c^w_bj + α^c_j ⊙ c̃^c_j                                       (eq. 15)
    α^c_bj, α^c_j = exp(i^c_bj), exp(i^c_j) over exp(i^c_j) + Σ_b' exp(i^c_b'j)     (eq. 16)
    h^c_j = o^c_j ⊙ tanh(c^c_j)

and the plain LSTM cell c^c_j = f^c_j ⊙ c^c_{j-1} + i^c_j ⊙ c̃^c_j where no word
ends. (The released code's character cell couples its forget gate, f^c_j = 1 - i^c_j;
measured level on Resume, and no faster, so the paper's cell is the one here.) A word cell starts from
the state of the word's first character (the paper's eq. 13 prints c^c_{b,e}; the
released code, as here, reads c^c_b).
Single-character words are left out (the paper's footnote 2): a word cell needs
the state of its first character before its last one.

The released code runs one sentence at a time and builds each word cell at its
first character. Here a word cell is built at the word's last character from the
kept states of its first one (the same value): at each step the words ending
there, in every row, are packed for a few batched matrix products (laid out once
per batch, lattice_lstm_schedule.py) and each row's merge is a sum over its
words, whatever the number of rows and words. The loop over characters is the
recurrence itself, run with a backward pass written by hand
(lattice_lstm_recurrence.py).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

from ..flat.positions import RelativePositions
from ..lattice import Lattice, LatticeEncoder
from .recurrence import lattice_recurrence
from .schedule import word_slots

# Input terms per direction: the character's i, o, f, c̃ (eq. 11) and its part of the
# word gate i^c (eq. 14); the word's i, f, c̃ (eq. 13).
CHAR_GATES = 4
WORD_TERMS = 3


class LatticeLstm(nn.Module):
    """The lattice LSTM's recurrence in one or two directions (the backward one
    reads the characters and the words reversed, as the released code's).

    It holds the recurrent halves of W^c, W^w and W^l. The input halves and the
    biases act on each character and word alone, so the caller applies them to
    all of them in one product before the loop (`char_terms`, `word_terms` wide).
    Initialized as the released code: identity recurrent matrices, one per gate.

    hidden (int): Hidden size of one direction.
    directions (int): 1 (left to right) or 2 (both, outputs side by side).
    """

    def __init__(self, hidden: int, *, directions: int = 2) -> None:
        super().__init__()
        if directions not in (1, 2):
            raise ValueError(f"a lattice LSTM has one or two directions, not {directions}")
        self.hidden = hidden
        self.directions = directions
        self.char_terms = directions * (CHAR_GATES + 1) * hidden
        self.word_terms = directions * WORD_TERMS * hidden
        eye = torch.eye(hidden)
        # W^c's h^c_{j-1} half (eq. 11), W^w's h^c_b half (eq. 13), W^l's c^w half (eq. 14).
        self.char_hidden = nn.Parameter(eye.repeat(directions, 1, CHAR_GATES))
        self.word_hidden = nn.Parameter(eye.repeat(directions, 1, 3))
        self.word_gate = nn.Parameter(eye.repeat(directions, 1, 1))

    @property
    def terms(self) -> Tuple[int, int]:
        """RETURNS (Tuple[int, int]): The widths of the input terms of a character and of a word."""
        return self.char_terms, self.word_terms

    def forward(
        self,
        chars: torch.Tensor,
        words: torch.Tensor,
        word_rows: torch.Tensor,
        word_heads: torch.Tensor,
        word_tails: torch.Tensor,
        lengths: torch.Tensor,
        steps: Optional[int] = None,
    ) -> torch.Tensor:
        """Hidden states h^c of every character.

        chars (N_c, char_terms): W x^c_j + b of eq. 11 and 14, per direction
            [i, o, f, c̃, i^c]; each row's characters in
            turn, row b's from sum(lengths[:b]) on.
        words (N_w, word_terms): W x^w_be + b of eq. 13, per direction [i, f, c̃].
        word_rows, word_heads, word_tails (N_w,) int64: each word's row and
            first and last character.
        lengths (B,) int64: characters per row.
        steps (Optional[int]): C, at least the longest row's length (default: that).
        RETURNS (torch.Tensor): (B, C, directions * hidden); padding holds no meaning.
        """
        batch = lengths.shape[0]
        if steps is None:
            steps = int(lengths.max()) if batch else 0
        if chars.shape[0] == 0:
            return chars.new_zeros(batch, steps, self.directions * self.hidden)
        plan = word_slots(word_rows, word_heads, word_tails, lengths, steps, batch, self.directions, chars.dtype)
        return lattice_recurrence(chars, words, self.char_hidden, self.word_hidden, self.word_gate, plan)


class LatticeLstmEncoder(LatticeEncoder):
    """The Lattice LSTM as an encoder: the input terms of every character's and word's
    gates in one product each, then the bidirectional recurrence (`width` / 2 each way)."""

    def __init__(self, char_input_width: int, word_width: int, *, width: int) -> None:
        super().__init__()
        if width % 2:
            raise ValueError(f"the Lattice LSTM's width {width} is not even (two directions)")
        self.width = width
        self.lattice = LatticeLstm(width // 2)
        char_terms, word_terms = self.lattice.terms
        self.char_proj = nn.Linear(char_input_width, char_terms)
        self.word_proj = nn.Linear(word_width, word_terms)

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
        The recurrence keeps what its backward needs whatever `recompute` says."""
        heads, word_index, char_mask = lattice.heads, lattice.word_index, lattice.char_mask
        return self.lattice(
            self.char_proj(chars),
            self.word_proj(words),
            word_index // heads.shape[1],
            heads.reshape(-1)[word_index],
            lattice.tails.reshape(-1)[word_index],
            char_mask.sum(1),
            char_mask.shape[1],
        )
