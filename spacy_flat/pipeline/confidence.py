"""Entity probabilities from the CRF: each decoded entity's marginal (the
probability that its characters take exactly its tag run), the threshold that
keeps only confident entities, and the `SpanGroup` that carries the scores.

spaCy's `ner` gives entity scores only through its beam variant, and the other
Chinese NER tools none; a linear-chain CRF computes them exactly, so they are
on by default (`scores_key`), at the cost of one forward-backward pass.
"""

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy
from spacy.tokens import Doc, Span, SpanGroup

from ..crf.host_runs import Runs
from ..decoding.boundaries import BoundaryRules
from ..decoding.entities import place_char_entities
from ..decoding.tags import TagSet
from ..lattice.windows import Plan, Segmenter
from ..layers import TorchTagger
from ..layers.tagger_handle import Tagged
from ..types import CharSpan, ScoredSpan


class DocSpans(list):
    """One doc's spans, and the doc's text as decoding read it.

    text (str): `doc.text` (which joins every token's text on each access).
    """

    def __init__(self, spans: Iterable[Any], text: str) -> None:
        super().__init__(spans)
        self.text = text


@dataclass
class Decoded:
    """A batch of docs as the model tagged it (`TorchTagger.predict`), and how its segments
    map back to the docs: each doc's entity spans, with their probabilities at any temperature
    (host decoding) or threshold.
    """

    segmenter: Segmenter
    plans: List[Plan]
    tagger: TorchTagger
    tag_set: TagSet
    tagged: Tagged

    def spans(self) -> List[List[CharSpan]]:
        """RETURNS (List[List[CharSpan]]): Each doc's entities, doc offsets."""
        return self._with_texts(self.segmenter.merge(self.plans, self._by_segment(self.tagged.runs)))

    def scored(self, temperature: float = 1.0, threshold: float = 0.0) -> List[List[ScoredSpan]]:
        """Each doc's entities with their probabilities, those below `threshold` left out.

        temperature (float): Divides every CRF potential (calibration; 1.0: as trained).
        """
        probs = self.tagger.rescored(self.tagged, temperature)
        row, first, end, label = self.tagged.runs
        kept = probs >= threshold
        kept_runs = (row[kept], first[kept], end[kept], label[kept])
        return self._with_texts(self.segmenter.merge(self.plans, self._by_segment(kept_runs, probs[kept])))

    def _with_texts(self, spans: List[List[Any]]) -> List[Any]:
        """Each doc's spans as a `DocSpans` that carries its text, as segmenting read it from `doc.text`:
        writing the entities need not read `doc.text` again."""
        return [DocSpans(doc_spans, plan.reading.text) for doc_spans, plan in zip(spans, self.plans)]

    def _by_segment(self, runs: Runs, probs: Optional[numpy.ndarray] = None) -> List[List[Any]]:
        """Each segment's spans (start, end, label[, probability]) from runs as arrays."""
        labels = self.tag_set.labels
        out: List[List[Any]] = [[] for _ in self.tagged.lengths]
        row, first, end, label = (part.tolist() for part in runs)
        if probs is None:
            for r, s, e, k in zip(row, first, end, label):
                out[r].append((s, e, labels[k]))
        else:
            for r, s, e, k, p in zip(row, first, end, label, probs.tolist()):
                out[r].append((s, e, labels[k], p))
        return out


def decode_docs(
    docs: Sequence[Doc],
    segmenter: Segmenter,
    tagger: TorchTagger,
    rules: Optional[BoundaryRules],
    tag_set: TagSet,
    *,
    on_device: bool = False,
    temperature: float = 1.0,
    probabilities: bool = True,
) -> Decoded:
    """Cut `docs` into segments and have the model tag them under `rules` (`TorchTagger.predict`).

    on_device (bool): Decode on the model's device, the entities' probabilities at `temperature`
        only (with `probabilities`); False: on the host, where `Decoded.scored` can score them
        at any temperature.
    """
    segments, plans = segmenter.segments(list(docs))
    tagged = tagger.predict(
        segments, rules, tag_set, on_device=on_device, temperature=temperature, probabilities=probabilities
    )
    return Decoded(segmenter, plans, tagger, tag_set, tagged)


def above(spans: Sequence[ScoredSpan], threshold: float) -> List[ScoredSpan]:
    """RETURNS (List[ScoredSpan]): The spans whose probability is at least `threshold`."""
    return [span for span in spans if span[3] >= threshold]


def set_entity_scores(doc: Doc, key: str, scores: Sequence[float], ents: Optional[Sequence[Span]] = None) -> None:
    """Put `doc.ents` and their probabilities in `doc.spans[key]`, as spancat does
    (`attrs["scores"]`, aligned with the spans).

    ents (Optional[Sequence[Span]]): `doc.ents` as just placed, to spare reading them back.
    """
    spans = list(doc.ents) if ents is None else list(ents)
    doc.spans[key] = SpanGroup(doc, name=key, spans=spans, attrs={"scores": [float(s) for s in scores]})


def write_entities(
    doc: Doc, spans: Sequence[Any], alignment_mode: str, report: Dict[str, int], scores_key: Optional[str]
) -> None:
    """Write `doc.ents` from character spans (`set_char_entities`) and, with a
    `scores_key`, the probabilities of those that were kept to `doc.spans`.

    spans (Sequence[Any]): ScoredSpans, or CharSpans when scores are off (a `DocSpans`
        from decoding also gives the doc's text).
    """
    scored = bool(spans) and len(spans[0]) == 4
    plain: List[CharSpan] = [(s[0], s[1], s[2]) for s in spans]
    # `DocSpans` from `Decoded` carry the doc's text, which `place_char_entities` would read again.
    ents, kept = place_char_entities(doc, plain, alignment_mode, report, getattr(spans, "text", None))
    if scores_key is not None:
        set_entity_scores(doc, scores_key, [spans[i][3] for i in kept] if scored else [], ents)


def check_threshold(threshold: float, scores_key: Optional[str]) -> None:
    """Raise a ValueError unless `threshold` is a probability that can be applied."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold is a probability in [0, 1], got {threshold}")
    if threshold > 0 and scores_key is None:
        raise ValueError('threshold needs entity probabilities: set scores_key (e.g. "flat_ner"), not null')
