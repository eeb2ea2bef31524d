"""Entity probabilities from the CRF: each decoded entity's marginal (the
probability that its characters take exactly its tag run), the threshold that
keeps only confident entities, and the `SpanGroup` that carries the scores.

spaCy's `ner` gives entity scores only through its beam variant, and the other
Chinese NER tools none; a linear-chain CRF computes them exactly, so they are
on by default (`scores_key`), at the cost of one forward-backward pass.
"""

from typing import Any, Dict, List, Optional, Sequence

import numpy
from spacy.tokens import Doc, SpanGroup
from thinc.types import Floats3d

from .entities import set_char_entities
from .layers import TorchTagger
from .tags import TagSet
from .types import CharSpan, ScoredSpan


def scored_spans(
    tagger: TorchTagger,
    tag_set: TagSet,
    scores: Floats3d,
    lengths: Sequence[int],
    forbidden: Optional[numpy.ndarray],
    ids: Sequence[Sequence[int]],
    temperature: float = 1.0,
) -> List[List[ScoredSpan]]:
    """Each segment's decoded entities with their probabilities.

    ids (Sequence[Sequence[int]]): The decoded tag ids of each segment.
    RETURNS (List[List[ScoredSpan]]): (start, end, label, probability) per entity, segment offsets.
    """
    spans = [tag_set.decode(row) for row in ids]
    runs = [[(start, list(row[start:end])) for start, end, _ in found] for found, row in zip(spans, ids)]
    probs = tagger.run_probabilities(scores, lengths, forbidden, runs, temperature)
    return [[(s, e, label, p) for (s, e, label), p in zip(found, ps)] for found, ps in zip(spans, probs)]


def above(spans: Sequence[ScoredSpan], threshold: float) -> List[ScoredSpan]:
    """RETURNS (List[ScoredSpan]): The spans whose probability is at least `threshold`."""
    return [span for span in spans if span[3] >= threshold]


def set_entity_scores(doc: Doc, key: str, scores: Sequence[float]) -> None:
    """Put `doc.ents` and their probabilities in `doc.spans[key]`, as spancat does
    (`attrs["scores"]`, aligned with the spans)."""
    doc.spans[key] = SpanGroup(doc, name=key, spans=list(doc.ents), attrs={"scores": [float(s) for s in scores]})


def write_entities(
    doc: Doc, spans: Sequence[Any], alignment_mode: str, report: Dict[str, int], scores_key: Optional[str]
) -> None:
    """Write `doc.ents` from character spans (`set_char_entities`) and, with a
    `scores_key`, the probabilities of those that were kept to `doc.spans`.

    spans (Sequence[Any]): ScoredSpans, or CharSpans when scores are off.
    """
    scored = bool(spans) and len(spans[0]) == 4
    plain: List[CharSpan] = [(s[0], s[1], s[2]) for s in spans]
    kept = set_char_entities(doc, plain, alignment_mode, report)
    if scores_key is not None:
        set_entity_scores(doc, scores_key, [spans[i][3] for i in kept] if scored else [])


def check_threshold(threshold: float, scores_key: Optional[str]) -> None:
    """Raise a ValueError unless `threshold` is a probability that can be applied."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold is a probability in [0, 1], got {threshold}")
    if threshold > 0 and scores_key is None:
        raise ValueError('threshold needs entity probabilities: set scores_key (e.g. "flat_ner"), not null')
