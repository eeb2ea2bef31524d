"""Character spans to `doc.ents`, on whatever tokens the pipeline's tokenizer made."""

import logging
from typing import Dict, Iterable, List, Optional, Tuple

from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from ..types import CharSpan

logger = logging.getLogger("spacy.flat")

ALIGNMENT_MODES = ("strict", "contract", "expand")


def set_char_entities(doc: Doc, spans: Iterable[CharSpan], mode: str, report: Dict[str, int]) -> List[int]:
    """Write `doc.ents` from character spans, snapping each to tokens by `mode`
    (spaCy's `Doc.char_span` alignment modes).

    report (Dict[str, int]): Counts of spans placed "exact", "snapped" to token
        boundaries, or "dropped" (no token alignment, or overlapping a kept one).
    RETURNS (List[int]): For each of `doc.ents`, the index of the span it came from.
    """
    return place_char_entities(doc, spans, mode, report)[1]


def place_char_entities(
    doc: Doc, spans: Iterable[CharSpan], mode: str, report: Dict[str, int], text: Optional[str] = None
) -> Tuple[List[Span], List[int]]:
    """`set_char_entities`, returning also the entities as placed: the spans
    `doc.ents` now gives, without reading them back (`doc.ents` builds a Span
    per entity from every token).

    `Doc.char_span` snaps each span (a binary search over the tokens in C): snapping all of
    a doc's spans at once with NumPy (`searchsorted` over the tokens' offsets) was slower at
    the few entities a doc has (12.6 against 10.0 ms for Resume's first 400 test docs).

    text (Optional[str]): `doc.text`, when the caller has it: `doc.text` joins every
        token's text on each access (a quarter of the writing's time).
    RETURNS (Tuple[List[Span], List[int]]): The entities, and the index of the span each came from.
    """
    ents: List[Span] = []
    origin: List[int] = []  # the index of the span each of `ents` came from
    text = doc.text if text is None else text
    for index, (start, end, label) in enumerate(spans):
        # Entities never begin or end with whitespace; trim it off.
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start == end:
            report["dropped"] += 1
            continue
        span = doc.char_span(start, end, label=label, alignment_mode=mode)
        if span is None or len(span) == 0:
            report["dropped"] += 1
            logger.debug("span %d-%d %s has no token alignment", start, end, label)
            continue
        exact = span.start_char == start and span.end_char == end
        report["exact" if exact else "snapped"] += 1
        ents.append(span)
        origin.append(index)
    # In order and apart (as decoded spans nearly always are), filter_spans would keep them all.
    if all(a.end <= b.start for a, b in zip(ents, ents[1:])):
        doc.set_ents(ents, default="outside")
        return ents, origin
    source: Dict[Tuple[int, int], int] = {}
    for span, index in zip(ents, origin):
        source.setdefault((span.start, span.end), index)
    kept = filter_spans(ents)
    report["dropped"] += len(ents) - len(kept)
    doc.set_ents(kept, default="outside")
    return kept, [source[(ent.start, ent.end)] for ent in kept]
