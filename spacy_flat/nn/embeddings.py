"""The embeddings of a lattice's characters and words (plain PyTorch): bloom-hashed
strings, word types, and the module every encoder reads its input from."""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

from .dropout import Dropout


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


class LatticeEmbeddings(nn.Module):
    """The input of every encoder: each character's vector (its embedding, bigrams and
    features from outside side by side) and each lattice word's (its bloom embedding,
    plus its projected pretrained vector and its types), both dropped out.

    Shapes known only once data is seen (character rows, vector and feature widths,
    word types) are set by `set_input_widths` and `resize_tables`, before weights are loaded.

    char_width (int): The character embeddings' width (0 rows until `resize_tables`).
    word_width (int), word_rows (int): The word bloom embeddings; 0 rows for a model
        without lattice words (TENER), whose words are (N_w, 0).
    bigram_width (int), bigram_rows (int): Character-bigram bloom embeddings; 0 rows for none.
    bigram_vectors (bool): Also give each character its bigram's pretrained vector.
    embed_dropout (float): Dropout of both.
    use_char_embeddings (bool): False leaves the character embeddings out (a model
        with transformer features may go without).
    """

    def __init__(
        self,
        *,
        char_width: int,
        word_width: int,
        word_rows: int,
        bigram_width: int,
        bigram_rows: int,
        bigram_vectors: bool,
        embed_dropout: float,
        use_char_embeddings: bool = True,
    ) -> None:
        super().__init__()
        self.char_width = char_width
        self.use_char_embeddings = use_char_embeddings
        self.bigram_width = bigram_width if bigram_rows > 0 else 0
        self.use_bigram_vectors = bigram_vectors
        # Width of the pretrained bigram vectors (the lexicon's or a table's), set by `set_input_widths`.
        self.bigram_vector_width = 0
        # Width of per-character features from outside (a transformer), set by `set_input_widths`.
        self.feature_width = 0
        self.word_width = word_width
        self.char_embed = nn.Embedding(1, char_width)
        self.bigram_embed = HashEmbedding(bigram_rows, bigram_width) if bigram_rows > 0 else None
        self.word_embed = HashEmbedding(word_rows, word_width) if word_rows > 0 else None
        self.vector_proj: Optional[nn.Linear] = None
        # Word types (gazetteers), set when the lexicon has types.
        self.type_embed: Optional[TypeEmbedding] = None
        # Stands in for bigrams a pretrained bigram table lacks; set when there is a table.
        self.bigram_fallback: Optional[nn.Parameter] = None
        self.embed_dropout = Dropout(embed_dropout)

    @property
    def char_input_width(self) -> int:
        """RETURNS (int): The width of a character's vector (at least 1, for a projection's shape)."""
        return max(1, self._char_input_width())

    def _char_input_width(self) -> int:
        chars = self.char_width if self.use_char_embeddings else 0
        return chars + self.bigram_width + self.bigram_vector_width + self.feature_width

    def set_input_widths(self, *, vector_width: int, feature_width: int, bigram_table_width: int) -> int:
        """Set the widths that come from data: the lexicon's vectors, features from outside
        and a pretrained bigram table (0: the lexicon's vectors give the bigrams').

        RETURNS (int): The width of a character's vector.
        """
        bigram_width = bigram_table_width or vector_width
        if self.use_bigram_vectors and not bigram_width:
            raise ValueError(
                "bigram_vectors = true needs a bigram table (spacy-flat.word2vec_bigram_vectors.v1) "
                "or a lexicon with vectors (spacy-flat.word2vec_lexicon.v1)"
            )
        self.feature_width = feature_width
        self.bigram_vector_width = bigram_width if self.use_bigram_vectors else 0
        with_table = bool(self.use_bigram_vectors and bigram_table_width)
        device = self.char_embed.weight.device
        self.bigram_fallback = nn.Parameter(torch.zeros(bigram_width, device=device)) if with_table else None
        if not self._char_input_width():
            raise ValueError("FLAT needs character embeddings, bigrams or transformer features")
        return self._char_input_width()

    def resize_tables(self, *, n_chars: int, vector_width: int, n_word_types: int) -> None:
        """Shape the character table, the word vectors' projection and the type embeddings."""
        device = self.char_embed.weight.device
        if self.char_embed.num_embeddings != n_chars:
            self.char_embed = nn.Embedding(n_chars, self.char_width).to(device)
        if self.word_embed is None:  # no lattice words: no word vectors or types to read
            return
        if vector_width and (self.vector_proj is None or self.vector_proj.in_features != vector_width):
            self.vector_proj = nn.Linear(vector_width, self.word_width).to(device)
        elif not vector_width:
            self.vector_proj = None
        self.type_embed = TypeEmbedding(n_word_types, self.word_width).to(device) if n_word_types else None

    def set_char_vectors(self, table: torch.Tensor) -> None:
        """Initialize the character embeddings from a pretrained table."""
        with torch.no_grad():
            self.char_embed.weight.copy_(table)

    def forward(
        self,
        char_rows: torch.Tensor,
        word_hashes: torch.Tensor,
        *,
        bigram_hashes: Optional[torch.Tensor] = None,
        word_vectors: Optional[torch.Tensor] = None,
        char_features: Optional[torch.Tensor] = None,
        bigram_vectors: Optional[torch.Tensor] = None,
        bigram_missing: Optional[torch.Tensor] = None,
        word_types: Optional[torch.Tensor] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The characters' and words' vectors, dropped out (characters first, then words:
        the order the dropout masks are drawn in).

        char_rows (N_c,): character-table rows; word_hashes (N_w, k): hash rows of the words.
        bigram_hashes (N_c, k), word_vectors (N_w, vector_width), char_features
            (N_c, feature_width), bigram_vectors (N_c, width), bigram_missing (N_c,) bool
            (bigrams the table lacks) and word_types (N_w,) int64 type bits: optional.
        RETURNS (Tuple[torch.Tensor, torch.Tensor]): (N_c, char_input_width), (N_w, word_width).
        """
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
        if self.word_embed is None:
            return self.embed_dropout(chars), chars.new_zeros(word_hashes.shape[0], 0)
        words = self.word_embed(word_hashes)
        if self.vector_proj is not None and word_vectors is not None:
            words = words + self.vector_proj(word_vectors)
        if self.type_embed is not None and word_types is not None:
            words = words + self.type_embed(word_types)
        return self.embed_dropout(chars), self.embed_dropout(words)
