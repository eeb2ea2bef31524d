"""Tagger weights saved by earlier releases, renamed for this one's modules.

Up to 0.2 the tagger was one module whose parameters sat at its top level
(`char_embed.weight`, `layers.0.attention.w_q.weight`, ...); since 0.3 it is
composed of its embeddings and its encoder (`embeddings.char_embed.weight`,
`encoder.layers.0.attention.w_q.weight`, ...).
"""

from __future__ import annotations

from typing import Dict, Iterable, TypeVar

T = TypeVar("T")

# The top-level names of earlier releases' tagger, by the part that holds them now.
MOVED = {
    "embeddings": ("char_embed", "bigram_embed", "word_embed", "vector_proj", "type_embed", "bigram_fallback"),
    "encoder": ("char_proj", "word_proj", "position", "dcsan", "layers", "lattice"),
}
# Tables earlier releases built but never read: TENER's word embeddings and projection (it
# has no lattice words) and DC-SAN's word projection (its word sets read the embeddings).
# Dropped when the module has no such weights.
UNREAD = ("embeddings.word_embed.", "encoder.word_proj.")


def upgrade_state_dict(state: Dict[str, T], names: Iterable[str]) -> Dict[str, T]:
    """Rename an earlier release's weights for the module whose weights are `names`;
    weights saved by this release are returned as they are.

    state (Dict[str, T]): A saved state dict.
    names (Iterable[str]): The names of the module's own state dict.
    RETURNS (Dict[str, T]): The state dict to load.
    """
    if any(key.startswith(tuple(f"{part}." for part in MOVED)) for key in state):
        return state
    owner = {name: part for part, names_there in MOVED.items() for name in names_there}
    renamed = {}
    for key, value in state.items():
        top = key.split(".", 1)[0]
        renamed[f"{owner[top]}.{key}" if top in owner else key] = value
    wanted = set(names)
    return {key: value for key, value in renamed.items() if key in wanted or not key.startswith(UNREAD)}
