"""The tagger as a plain PyTorch module (no spaCy, no thinc): embeddings, a stack of
FLAT (or TENER) layers or a Lattice LSTM, emission scores and a CRF."""

from __future__ import annotations

from functools import partial
from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..settings import FlatSettings
from .crf import ConstrainedCRF
from .dcsan import DcsanInput
from .dropout import Dropout
from .embeddings import HashEmbedding, TypeEmbedding
from .flat_layer import FlatLayer
from .init import xavier_weights
from .lattice_lstm import LatticeLstm
from .position import PositionFusion, RelativePositions, relative_positions
from .tener import TenerLayer


class FlatTagger(nn.Module):
    """Character and word embeddings, FLAT layers, emission scores and a CRF.

    Shapes that are known only once data is seen (character rows, tag set, word
    vector width) are set by `configure`, before weights are loaded.
    """

    def __init__(self, settings: FlatSettings) -> None:
        super().__init__()
        s = self.settings = settings
        self.width = s.width
        self.char_width = s.char_width
        self.use_char_embeddings = s.use_char_embeddings
        self.bigram_width = s.bigram_width if s.bigram_rows > 0 else 0
        self.use_bigram_vectors = s.bigram_vectors
        # Width of the pretrained bigram vectors (the lexicon's), set by configure.
        self.bigram_vector_width = 0
        # Width of per-character features from outside (a transformer), set by configure.
        self.feature_width = 0
        self.word_width = s.word_width
        self.mask_self_matched = s.mask_self_matched
        self.max_distance = s.max_distance
        self.char_embed = nn.Embedding(1, s.char_width)
        self.bigram_embed = HashEmbedding(s.bigram_rows, s.bigram_width) if s.bigram_rows > 0 else None
        self.word_embed = HashEmbedding(s.word_rows, s.word_width)
        self.vector_proj: Optional[nn.Linear] = None
        # Word types (gazetteers), set by configure when the lexicon has types.
        self.type_embed: Optional[TypeEmbedding] = None
        # Stands in for bigrams a pretrained bigram table lacks; set by configure when there is a table.
        self.bigram_fallback: Optional[nn.Parameter] = None
        # The Lattice LSTM: the projections give the input terms of its gates, for
        # every character and word in one product outside its loop over characters.
        self.lattice = LatticeLstm(s.width // 2, coupled=s.coupled_forget) if s.encoder == "lattice_lstm" else None
        char_out, word_out = (s.width, s.width) if self.lattice is None else self.lattice.terms
        # A transformer-only model learns its input width at `configure`.
        self.char_proj = nn.Linear(max(1, self._char_input_width()), char_out)
        self.word_proj = nn.Linear(s.word_width, word_out)
        self.embed_dropout = Dropout(s.embed_dropout)
        # TENER: characters only, its own relative positions, no lattice position term.
        # DC-SAN: characters attended by their soft-lexicon word sets, then TENER's layers.
        self.tener = s.encoder in ("tener", "dcsan")
        self.position = None
        if not (self.tener or self.lattice):
            self.position = PositionFusion(s.width, head_only=s.head_only, distances=s.position_distances)
        self.dcsan: Optional[DcsanInput] = None
        if s.encoder == "dcsan":
            self.dcsan = DcsanInput(s.word_width, s.width, s.n_heads, attention_dropout=s.attention_dropout)
        layer = TenerLayer if self.tener else FlatLayer
        self.layers = nn.ModuleList(layer.from_settings(s) for _ in range(0 if self.lattice else s.n_layers))
        self.output_dropout = Dropout(s.output_dropout)
        self.output = nn.Linear(s.width, 1)
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
        bigram_width = bigram_table_width or vector_width
        if self.use_bigram_vectors and not bigram_width:
            raise ValueError(
                "bigram_vectors = true needs a bigram table (spacy-flat.word2vec_bigram_vectors.v1) "
                "or a lexicon with vectors (spacy-flat.word2vec_lexicon.v1)"
            )
        self.feature_width = feature_width
        self.bigram_vector_width = bigram_width if self.use_bigram_vectors else 0
        with_table = bool(self.use_bigram_vectors and bigram_table_width)
        self.bigram_fallback = nn.Parameter(torch.zeros(bigram_width, device=device)) if with_table else None
        if not self._char_input_width():
            raise ValueError("FLAT needs character embeddings, bigrams or transformer features")
        if self.char_proj.in_features != self._char_input_width():
            self.char_proj = nn.Linear(self._char_input_width(), self.char_proj.out_features).to(device)
        if self.char_embed.num_embeddings != n_chars:
            self.char_embed = nn.Embedding(n_chars, self.char_width).to(device)
        if vector_width and (self.vector_proj is None or self.vector_proj.in_features != vector_width):
            self.vector_proj = nn.Linear(vector_width, self.word_width).to(device)
        elif not vector_width:
            self.vector_proj = None
        self.type_embed = TypeEmbedding(n_word_types, self.word_width).to(device) if n_word_types else None
        self.output = nn.Linear(self.width, n_tags).to(device)
        self.crf = ConstrainedCRF(n_tags, transitions, starts, ends).to(device)
        if self.settings.xavier_init:  # before any weights are loaded, so only a new model's
            xavier_weights(self)

    def _char_input_width(self) -> int:
        chars = self.char_width if self.use_char_embeddings else 0
        return chars + self.bigram_width + self.bigram_vector_width + self.feature_width

    def set_char_vectors(self, table: torch.Tensor) -> None:
        """Initialize the character embeddings from a pretrained table."""
        with torch.no_grad():
            self.char_embed.weight.copy_(table)

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
        bigram_hashes (N_c, k), word_vectors (N_w, vector_width),
            char_features (N_c, feature_width), bigram_vectors (N_c, width) and
            bigram_missing (N_c,) bool (bigrams the table lacks), word_types
            (N_w,) int64 type bits and word_weights (N_w,) (DC-SAN's z(w) + b): optional.
        recompute (bool): Keep no attention-sized activations for backward and
            recompute them there (torch's activation checkpointing, same dropout
            masks), so a batch encoded in several groups holds one group's
            attention at a time.
        positions (Optional[RelativePositions]): FLAT's relative positions planned on
            the host (`position_plan.py`); None: indexed here from heads and tails.
        RETURNS (torch.Tensor): (B, n_chars_max, n_tags) emissions.
        """
        batch, n = heads.shape
        parts = [self.char_embed(char_rows)] if self.use_char_embeddings else []
        if self.bigram_embed is not None and bigram_hashes is not None:
            parts.append(self.bigram_embed(bigram_hashes))
        if self.bigram_vector_width:
            if bigram_vectors is None:
                raise ValueError("this FLAT model expects a bigram vector for every character")
            if self.bigram_fallback is not None and bigram_missing is not None:
                bigram_vectors = (
                    bigram_vectors + bigram_missing[:, None].to(bigram_vectors.dtype) * self.bigram_fallback
                )
            parts.append(bigram_vectors)
        if self.feature_width:
            if char_features is None:
                raise ValueError("this FLAT model expects transformer features for every character")
            parts.append(char_features.to(parts[0].dtype if parts else char_features.dtype))
        chars = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        words = self.word_embed(word_hashes)
        if self.vector_proj is not None and word_vectors is not None:
            words = words + self.vector_proj(word_vectors)
        if self.type_embed is not None and word_types is not None:
            words = words + self.type_embed(word_types)
        chars = self.char_proj(self.embed_dropout(chars))
        if self.lattice is not None:
            words = self.word_proj(self.embed_dropout(words))
            x = self._lattice_lstm(chars, words, heads, tails, word_index, char_mask)
            return self.output(self.output_dropout(x))
        if self.dcsan is not None:
            x = self.dcsan(
                chars,
                self.embed_dropout(words),
                heads,
                tails,
                char_index,
                word_index,
                token_mask,
                char_mask,
                word_weights,
            )
            token_mask = char_mask  # the self-lattice layers read characters only
        else:
            words = self.word_proj(self.embed_dropout(words))
            x = chars.new_zeros(batch * n, self.width)
            x = x.index_copy(0, char_index, chars).index_copy(0, word_index, words).view(batch, n, self.width)
        inputs = self._layer_inputs(heads, tails, token_mask, positions)
        n_chars = char_mask.shape[1]
        for k, layer in enumerate(self.layers):
            # Only characters reach the output, so the last layer computes no word rows
            # (FLAT's lattice rows are a third or more of its tokens); keys keep every token.
            last = k == len(self.layers) - 1 and self.position is not None and n_chars < x.shape[1]
            run = partial(layer, n_queries=n_chars) if last else layer
            if recompute and torch.is_grad_enabled():
                x = checkpoint(run, x, *inputs, use_reentrant=False)
            else:
                x = run(x, *inputs)
        # Only characters go to the output layer; they open every row.
        out = self.output(self.output_dropout(x[:, :n_chars]))
        return out

    def _lattice_lstm(
        self,
        chars: torch.Tensor,
        words: torch.Tensor,
        heads: torch.Tensor,
        tails: torch.Tensor,
        word_index: torch.Tensor,
        char_mask: torch.Tensor,
    ) -> torch.Tensor:
        """The Lattice LSTM over the lattice's characters and words → (B, C, width)."""
        assert self.lattice is not None
        return self.lattice(
            chars,
            words,
            word_index // heads.shape[1],
            heads.reshape(-1)[word_index],
            tails.reshape(-1)[word_index],
            char_mask.sum(1),
            char_mask.shape[1],
        )

    def _layer_inputs(
        self, heads: torch.Tensor, tails: torch.Tensor, token_mask: torch.Tensor, planned: Optional[RelativePositions]
    ) -> tuple:
        """What each layer reads besides x: FLAT's fused positions (in prediction on a
        CPU the module that fuses them), the distinct triples and the mask; TENER's mask
        alone (its positions are fixed)."""
        if self.position is None:
            return (self._attention_mask(heads, tails, token_mask, None),)
        pos = planned if planned is not None else relative_positions(heads, tails, token_mask)
        attend = self._attention_mask(heads, tails, token_mask, pos)
        if not torch.is_grad_enabled() and heads.device.type == "cpu":
            # Prediction on a CPU: each layer looks its projected rows up (`position_keys.py`).
            return self.position, pos, attend
        return self.position(pos), pos, attend

    def _attention_mask(
        self, heads: torch.Tensor, tails: torch.Tensor, token_mask: torch.Tensor, pos: Optional[RelativePositions]
    ) -> torch.Tensor:
        attend = token_mask[:, None, :] & token_mask[:, :, None]
        if pos is not None and self.mask_self_matched:
            # FLAT_msm: a character may not see the words that contain it.
            is_char = (pos.lengths == 0) & token_mask
            is_word = (pos.lengths > 0) & token_mask
            inside = (heads[:, None, :] <= heads[:, :, None]) & (heads[:, :, None] <= tails[:, None, :])
            attend = attend & ~(is_char[:, :, None] & is_word[:, None, :] & inside)
        if pos is not None and self.max_distance >= 0:
            # FLAT_mld: no attention between spans whose heads are further apart.
            far = (heads[:, :, None] - heads[:, None, :]).abs() > self.max_distance
            attend = attend & ~far
        # Padded query rows attend to themselves so softmax stays finite.
        eye = torch.eye(token_mask.shape[1], dtype=torch.bool, device=heads.device)[None]
        return attend | (eye & ~token_mask[:, :, None])

    def loss(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        assert self.crf is not None, "FlatTagger.configure was not called"
        return self.crf.nll(emissions, tags, mask)

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> List[List[int]]:
        assert self.crf is not None, "FlatTagger.configure was not called"
        return self.crf.viterbi(emissions, mask)
