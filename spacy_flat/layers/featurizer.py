"""Segments to the padded id arrays of their lattices (the model's first layer)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import numpy
from thinc.api import Model
from thinc.types import Floats2d

from ..lattice.feature_cache import MEMORY_BYTES, FeatureCache, cache_key
from ..lattice.features import FlatBatch, featurize
from ..lattice.resources import FlatResources
from ..lattice.windows import Segment

# The gradient of each segment's transformer features; None without features.
SegmentGradients = List[Optional[Floats2d]]


def flat_featurizer(
    *, word_rows: int, bigram_rows: int, bigram_vectors: bool, max_words: int
) -> Model[List[Segment], FlatBatch]:
    """Build the lattice of each segment's text and its id arrays. Reads the
    component's resources (`set_resources`), which are saved by the component,
    not in the model's bytes.

    word_rows (int), bigram_rows (int): The rows of the word and bigram bloom tables.
    bigram_vectors (bool): Look each character's bigram vector up.
    max_words (int): Cap on lattice words per text; -1 for none, 0 for characters only.
    """
    return Model(
        "flat_features",
        _forward,
        attrs={
            "word_rows": word_rows,
            "bigram_rows": bigram_rows,
            "bigram_vectors": bigram_vectors,
            "max_words": max_words,
            "resources": None,
        },
    )


def set_resources(model: Model, resources: FlatResources) -> None:
    """Point the featurizer of a FLAT model at the component's resources."""
    model.get_ref("features").attrs["resources"] = resources


@dataclass
class _TrainingCache:
    """Where a featurizer keeps training texts' ids, and the cache it holds (made on first use)."""

    folder: Optional[Path] = None
    memory_bytes: int = MEMORY_BYTES
    # The resources the cache was made for, their sizes then (a lexicon grows in place), and the cache.
    held: Optional[Tuple[FlatResources, Tuple[int, int], FeatureCache]] = None


def set_feature_cache(model: Model, folder: Optional[Path], memory_bytes: int = MEMORY_BYTES) -> None:
    """Where a FLAT model's training keeps its texts' ids beyond `memory_bytes` (`FeatureCache`):
    `folder` (a training run's output), or a temporary folder if None; `memory_bytes = 0` keeps none."""
    # In the featurizer's attrs as one object, which thinc leaves out of the model's bytes (msgpack
    # cannot write it, as the resources beside it): where a run keeps its cache is no part of the
    # model, and a resumed run's model must equal one never stopped.
    model.get_ref("features").attrs["feature_cache"] = _TrainingCache(folder, memory_bytes)


def training_cache(model: Model) -> Optional[FeatureCache]:
    """RETURNS (Optional[FeatureCache]): The cache a FLAT model's training fills, if made yet."""
    where = model.get_ref("features").attrs.get("feature_cache")
    return None if where is None or where.held is None else where.held[2]


def _training_cache(features: Model, resources: FlatResources) -> Optional[FeatureCache]:
    """The featurizer's cache of training texts' ids, made on its first training batch and made
    anew if the resources changed (a lexicon grown by added words included)."""
    where = features.attrs.setdefault("feature_cache", _TrainingCache())
    if not where.memory_bytes:
        return None
    sizes = (len(resources.lexicon), len(resources.char_vocab))
    if where.held is not None and where.held[0] is resources and where.held[1] == sizes:
        return where.held[2]
    settings = {name: features.attrs.get(name, False) for name in ("bigram_rows", "max_words", "bigram_vectors")}
    key = cache_key(resources.lexicon, resources.char_vocab, resources.bigrams, settings)
    cache = FeatureCache(key, memory_bytes=where.memory_bytes, spill_dir=where.folder)
    where.held = (resources, sizes, cache)
    return cache


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
        cache=_training_cache(model, resources) if is_train else None,
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
