"""Segments to the padded id arrays of their lattices (the model's first layer)."""

from typing import Callable, List, Optional, Tuple

import numpy
from thinc.api import Model
from thinc.types import Floats2d

from ..lattice.features import FlatBatch, featurize
from ..lattice.resources import FlatResources
from ..lattice.windows import Segment
from ..settings import FlatSettings

# The gradient of each segment's transformer features; None without features.
SegmentGradients = List[Optional[Floats2d]]


def flat_featurizer(settings: FlatSettings) -> Model[List[Segment], FlatBatch]:
    """Build the lattice of each segment's text and its id arrays. Reads the
    component's resources (`set_resources`), which are saved by the component,
    not in the model's bytes.
    """
    return Model(
        "flat_features",
        _forward,
        attrs={
            "word_rows": settings.word_rows,
            "bigram_rows": settings.bigram_rows,
            "bigram_vectors": settings.bigram_vectors,
            "max_words": settings.max_words,
            "resources": None,
        },
    )


def set_resources(model: Model, resources: FlatResources) -> None:
    """Point the featurizer of a FLAT model at the component's resources."""
    model.get_ref("features").attrs["resources"] = resources


def _forward(
    model: Model[List[Segment], FlatBatch], segments: List[Segment], is_train: bool
) -> Tuple[FlatBatch, Callable]:
    if segments and not isinstance(segments[0], Segment):
        raise TypeError(
            "A FLAT model reads Segments, not Docs: `segments, _ = ner.segmenter.segments(docs)`, "
            "then `ner.model.predict(segments)`; or call the component itself"
        )
    resources: Optional[FlatResources] = model.attrs["resources"]
    if resources is None:
        raise ValueError("The FLAT model has no lexicon: initialize the flat_ner component first")
    batch = featurize(
        [segment.text for segment in segments],
        resources.lexicon,
        resources.char_vocab,
        word_rows=model.attrs["word_rows"],
        bigram_rows=model.attrs["bigram_rows"],
        max_words=model.attrs["max_words"],
        # Absent from models built before the option existed.
        bigram_vectors=model.attrs.get("bigram_vectors", False),
        bigram_table=resources.bigrams,
    )
    with_features = [segment.features is not None for segment in segments]
    if any(with_features):
        if not all(with_features):
            raise ValueError("either every segment has transformer features or none has")
        batch.char_features = model.ops.xp.concatenate([segment.features for segment in segments])

    def backprop(d_features: Optional[Floats2d]) -> SegmentGradients:
        """Split the gradient of the batch's features back into segments."""
        if d_features is None:
            return [None] * len(segments)
        cuts = numpy.cumsum([len(segment) for segment in segments])[:-1].tolist()
        return list(model.ops.xp.split(d_features, cuts))

    return batch, backprop
