"""Shared handling of pretrained vector tables."""

import numpy


def unit_rows(table: numpy.ndarray) -> numpy.ndarray:
    """Scale every row to unit L2 norm, as the original FLAT code does with its
    pretrained tables (`norm_embed`, `norm_lattice_embed`).

    Pretrained norms vary widely (LAC characters: 0.6 to 18; the shared word2vec
    words: about 27) while the learned embeddings start near 1. Unit rows keep
    the pretrained part from swamping the rest and let Adam's fixed-size steps
    move it. Zero rows stay zero.

    table (numpy.ndarray): (rows, width) vectors.
    RETURNS (numpy.ndarray): A float32 copy with unit-norm rows.
    """
    norms = numpy.linalg.norm(table, axis=1, keepdims=True)
    return (table / numpy.maximum(norms, 1e-12)).astype("float32")
