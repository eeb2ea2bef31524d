"""FLAT+BERT: per-character features from a transformer listener, then FLAT on
segments, so windows and the attention budget apply exactly as without one."""

from dataclasses import replace
from typing import Callable, Dict, List, Optional, Tuple, cast

import numpy
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats3d, Ints1d

from ..lattice.windows import Segment
from .flat_model import encode_in_groups


def flat_transformer_model(
    features: Model, tok2vec: Model[List[Doc], List[Floats2d]], tagger: Model
) -> Model[List[Segment], Floats3d]:
    """The listener reads whole docs, as the transformer saw them; each segment
    then takes its characters' rows of its doc's features.

    The dim "nF" (the features' width) is inferred from the listener at `initialize`.
    """
    return Model(
        "flat_transformer",
        _forward,
        init=_init,
        layers=[features, tok2vec, tagger],
        refs={"features": features, "tok2vec": tok2vec, "tagger": tagger},
        dims={"nF": None},
    )


def _init(model: Model, X: Optional[List[Segment]] = None, Y: Optional[Floats3d] = None) -> None:
    tok2vec = model.get_ref("tok2vec")
    # A spacy-transformers listener learns its width from its upstream component
    # once that is initialized; pooling layers after it keep the width.
    width = tok2vec.maybe_get_dim("nO") or next(
        (node.get_dim("nO") for node in tok2vec.walk() if node.has_dim("nO") and node.get_dim("nO")), None
    )
    if not width:
        raise ValueError(
            "flat_ner cannot tell the width of its transformer features: initialize the "
            "transformer component first or set the listener's width"
        )
    model.set_dim("nF", int(width))


def _forward(
    model: Model[List[Segment], Floats3d], segments: List[Segment], is_train: bool
) -> Tuple[Floats3d, Callable]:
    tok2vec = model.get_ref("tok2vec")
    ops = model.ops
    # The docs in order of first appearance; a long doc's windows share its features.
    docs: Dict[int, Doc] = {}
    for segment in segments:
        docs.setdefault(id(segment.doc), segment.doc)
    doc_list = list(docs.values())
    tokvecs, backprop_tok2vec = tok2vec(doc_list, is_train)
    # Row of each character's token among the stacked token vectors, shifted by
    # one: row 0 is a zero vector for whitespace outside every token.
    width = max(vectors.shape[1] for vectors in tokvecs)
    # An empty doc's array may be (0, 0): leave it out, it has no rows to read.
    stacked = ops.xp.concatenate([ops.alloc2f(1, width), *(vectors for vectors in tokvecs if len(vectors))])
    char_rows: Dict[int, numpy.ndarray] = {}
    offset = 0
    for doc, vectors in zip(doc_list, tokvecs):
        token_rows = _char_token_rows(doc)
        if len(vectors) != len(doc):
            # No vector per token (e.g. a transformer that saw nothing): zeros, row 0.
            token_rows = numpy.full_like(token_rows, -1)
        char_rows[id(doc)] = numpy.where(token_rows >= 0, token_rows + offset + 1, 0).astype("int32")
        offset += len(vectors)
    rows = [ops.asarray1i(cast(Ints1d, char_rows[id(s.doc)][s.char_offsets()])) for s in segments]
    featured = [replace(s, features=stacked[index]) for s, index in zip(segments, rows)]
    scores, backprop_groups = encode_in_groups(model, featured, is_train)

    def backprop(d_scores: Floats3d) -> List[Segment]:
        d_stacked = ops.alloc2f(*stacked.shape)
        has_gradient = False
        for index, d_features in zip(rows, backprop_groups(d_scores)):
            if d_features is not None:
                ops.scatter_add(d_stacked, index, d_features)
                has_gradient = True
        if has_gradient:
            sizes = [len(vectors) for vectors in tokvecs if len(vectors)]
            kept = iter(ops.xp.split(d_stacked[1:], numpy.cumsum(sizes)[:-1].tolist()))
            d_docs = [next(kept) if len(vectors) else None for vectors in tokvecs]
            backprop_tok2vec([d if d is not None else ops.alloc2f(*v.shape) for d, v in zip(d_docs, tokvecs)])
        return []

    return scores, backprop


def _char_token_rows(doc: Doc) -> numpy.ndarray:
    """Token index of each character of `doc.text`; -1 for trailing whitespace."""
    rows = numpy.full(len(doc.text), -1, dtype="int64")
    for token in doc:
        rows[token.idx : token.idx + len(token.text)] = token.i
    return rows
