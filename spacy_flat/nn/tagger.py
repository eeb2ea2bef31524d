"""The tagger as a plain PyTorch module (no spaCy, no thinc): the lattice's
embeddings, an encoder (FLAT, TENER, DC-SAN or the Lattice LSTM), emission scores
and a CRF."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn

from ..crf.model import ConstrainedCRF
from .dropout import Dropout
from .embeddings import LatticeEmbeddings
from .flat.positions import RelativePositions
from .lattice import Lattice, LatticeEncoder


class LatticeTagger(nn.Module):
    """Embeddings, an encoder, emission scores and a CRF.

    Shapes that are known only once data is seen (character rows, tag set, word
    vector width) are set by `configure`, before weights are loaded.

    embeddings (LatticeEmbeddings): The characters' and words' vectors.
    encoder (LatticeEncoder): Built to read `embeddings.char_input_width` and its word width.
    output_dropout (float): Dropout before the emission scores.
    """

    def __init__(self, embeddings: LatticeEmbeddings, encoder: LatticeEncoder, *, output_dropout: float) -> None:
        super().__init__()
        self.embeddings = embeddings
        self.encoder = encoder
        self.output_dropout = Dropout(output_dropout)
        self.output = nn.Linear(encoder.width, 1)
        self.crf: Optional[ConstrainedCRF] = None

    def configure(
        self,
        *,
        n_chars: int,
        vector_width: int,
        n_tags: int,
        transitions: Sequence[Tuple[int, int]],
        starts: Sequence[int],
        ends: Sequence[int],
        feature_width: int = 0,
        bigram_table_width: int = 0,
        n_word_types: int = 0,
    ) -> None:
        """Set the data-dependent shapes. Reinitializes the affected layers.

        bigram_table_width (int): Width of a pretrained bigram table; 0 reads
            bigram vectors from the lexicon (when `bigram_vectors` is on).
        n_word_types (int): Word types (gazetteers) of the lexicon; 0 for none.
        """
        device = self.output.weight.device
        char_input_width = self.embeddings.set_input_widths(
            vector_width=vector_width, feature_width=feature_width, bigram_table_width=bigram_table_width
        )
        # In this order (the projection, the tables, the output, the CRF): a seed draws a new
        # model's initial weights as earlier releases drew them.
        self.encoder.resize_input(char_input_width)
        self.embeddings.resize_tables(n_chars=n_chars, vector_width=vector_width, n_word_types=n_word_types)
        self.output = nn.Linear(self.encoder.width, n_tags).to(device)
        self.crf = ConstrainedCRF(n_tags, transitions, starts, ends).to(device)

    def forward(
        self,
        char_rows: torch.Tensor,
        word_hashes: torch.Tensor,
        heads: torch.Tensor,
        tails: torch.Tensor,
        char_index: torch.Tensor,
        word_index: torch.Tensor,
        token_mask: torch.Tensor,
        char_mask: torch.Tensor,
        bigram_hashes: Optional[torch.Tensor] = None,
        word_vectors: Optional[torch.Tensor] = None,
        char_features: Optional[torch.Tensor] = None,
        bigram_vectors: Optional[torch.Tensor] = None,
        bigram_missing: Optional[torch.Tensor] = None,
        word_types: Optional[torch.Tensor] = None,
        word_weights: Optional[torch.Tensor] = None,
        recompute: bool = False,
        positions: Optional[RelativePositions] = None,
    ) -> torch.Tensor:
        """Emission scores for every character.

        char_rows (N_c,): character-table rows of all characters in the batch.
        word_hashes (N_w, k): hash rows of all lattice words in the batch.
        heads, tails (B, n): token spans; characters first in each row, then words.
        char_index (N_c,), word_index (N_w,): flat positions in (B * n) of each.
        token_mask (B, n): real tokens. char_mask (B, n_chars_max): real characters.
        bigram_hashes, word_vectors, char_features, bigram_vectors, bigram_missing,
            word_types: optional inputs of the embeddings (`LatticeEmbeddings.forward`);
            word_weights (N_w,): DC-SAN's z(w) + b, optional.
        recompute (bool): Keep no attention-sized activations for backward and
            recompute them there, so a batch encoded in several groups holds one
            group's attention at a time.
        positions (Optional[RelativePositions]): FLAT's relative positions planned on
            the host (`position_plan.py`); None: indexed from heads and tails.
        RETURNS (torch.Tensor): (B, n_chars_max, n_tags) emissions.
        """
        chars, words = self.embeddings(
            char_rows,
            word_hashes,
            bigram_hashes=bigram_hashes,
            word_vectors=word_vectors,
            char_features=char_features,
            bigram_vectors=bigram_vectors,
            bigram_missing=bigram_missing,
            word_types=word_types,
        )
        lattice = Lattice(heads, tails, char_index, word_index, token_mask, char_mask)
        x = self.encoder(chars, words, lattice, positions=positions, recompute=recompute, word_weights=word_weights)
        return self.output(self.output_dropout(x))

    def loss(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        assert self.crf is not None, "LatticeTagger.configure was not called"
        return self.crf.nll(emissions, tags, mask)

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> List[List[int]]:
        assert self.crf is not None, "LatticeTagger.configure was not called"
        return self.crf.viterbi(emissions, mask)
