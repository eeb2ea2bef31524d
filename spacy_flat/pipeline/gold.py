"""Training examples as the segments the model encodes and their gold tag ids."""

from typing import List, Sequence, Set, Tuple

from spacy.training import Example

from ..decoding.tags import TagSet
from ..lattice.windows import Segment, Segmenter


def gold_segments(
    examples: Sequence[Example], segmenter: Segmenter, tag_set: TagSet
) -> Tuple[List[Segment], List[List[int]], Set[str]]:
    """Segments to encode with their gold tag ids; an empty doc has one empty
    segment, so the segments name every doc of the batch, in order.

    RETURNS: the segments, their tag ids, and the reference labels the tag set
        lacks (their entities are left out of the gold tags).
    """
    segments: List[Segment] = []
    gold: List[List[int]] = []
    unknown: Set[str] = set()
    for eg in examples:
        spans = [(e.start_char, e.end_char, e.label_) for e in eg.reference.ents]
        missing = {label for _, _, label in spans if label not in tag_set.labels}
        if missing:
            unknown |= missing
            spans = [span for span in spans if span[2] not in missing]
        for segment, inside in segmenter.training_segments(eg.predicted, spans):
            segments.append(segment)
            gold.append(tag_set.encode(inside, len(segment)))
    return segments, gold, unknown
