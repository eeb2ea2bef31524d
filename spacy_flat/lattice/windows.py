"""Long documents: the segments the model encodes, cut at sentence punctuation,
and the merging of their predictions back into whole documents.

Every architecture encodes segments, never whole docs: a short doc is one
segment, a long one several overlapping windows. So a document of any length
costs bounded memory, with or without transformer features.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence, Tuple, TypeVar, cast

from spacy.tokens import Doc

from ..types import CharSpan, ScoredSpan
from .scripts import read_as_simplified
from .spaces import read_offsets

# Spans with or without their probability.
AnySpan = TypeVar("AnySpan", CharSpan, ScoredSpan)

# Characters after which a cut is preferred: sentence ends, then clause breaks.
SENTENCE_ENDS = frozenset("。！？!?；;\n…")


@dataclass(frozen=True)
class Window:
    """Characters [start, end) of a text are encoded together; spans that start
    in [own_start, own_end) are kept from this window."""

    start: int
    end: int
    own_start: int
    own_end: int


def plan_windows(text: str, size: int, overlap: int, protected: Sequence[Tuple[int, int]] = ()) -> List[Window]:
    """Cover `text` with windows of at most `size` characters.

    Cut points fall after sentence punctuation where possible, and never inside
    a `protected` span (gold entities at training time). Each window adds up to
    `overlap` characters of context on either side of the part it owns.

    text (str): The text.
    size (int): Most characters per window; <= 0 means one window.
    overlap (int): Context characters on each side.
    protected (Sequence[Tuple[int, int]]): (start, end) spans no cut may split.
    RETURNS (List[Window]): Windows whose own parts tile the text.
    """
    n = len(text)
    if size <= 0 or n <= size:
        return [Window(0, n, 0, n)]
    overlap = max(0, min(overlap, (size - 1) // 4))
    step = size - 2 * overlap
    inside = [False] * (n + 1)
    for start, end in protected:
        for k in range(start + 1, end):
            inside[k] = True
    cuts = [0]
    while n - cuts[-1] > step:
        lo, hi = cuts[-1] + max(1, step // 2), cuts[-1] + step
        cut = next((k for k in range(hi, lo - 1, -1) if text[k - 1] in SENTENCE_ENDS and not inside[k]), 0)
        if not cut:
            cut = next((k for k in range(hi, cuts[-1], -1) if not inside[k]), hi)
        cuts.append(cut)
    cuts.append(n)
    return [Window(max(0, a - overlap), min(n, b + overlap), a, b) for a, b in zip(cuts[:-1], cuts[1:])]


def merge_window_spans(windows: Sequence[Window], spans: Iterable[Sequence[AnySpan]]) -> List[AnySpan]:
    """Map each window's spans (window offsets) to text offsets, keeping those
    that start in the window's own part. Own parts tile the text, so each
    entity comes from exactly one window and none is counted twice. Whatever
    follows a span's end (its label, its probability) goes with it."""
    spans = list(spans)
    if len(windows) == 1 and windows[0].start == 0 and spans:
        # One window, its spans in order and apart (as decoded): nothing to move, sort or drop.
        (found,) = spans
        own = windows[0]
        inside = not found or (found[0][0] >= own.own_start and found[-1][0] < own.own_end)
        if inside and all(a[1] <= b[0] for a, b in zip(found, found[1:])):
            return list(found)
    merged: List[AnySpan] = []
    for window, found in zip(windows, spans):
        span: Tuple[Any, ...]
        for span in found:
            start, end = span[0] + window.start, span[1] + window.start
            if window.own_start <= start < window.own_end:
                merged.append(cast(AnySpan, (start, end, *span[2:])))
    merged.sort()
    kept: List[AnySpan] = []
    for candidate in merged:
        if not kept or candidate[0] >= kept[-1][1]:
            kept.append(candidate)
    return kept


@dataclass(frozen=True)
class Segment:
    """Characters [start, end) of a doc's text as read (`Reading`), encoded together.

    Those offsets are `doc.text`'s own unless spaces were skipped; then `doc_offsets`
    gives each character's offset in `doc.text`.

    features: per-character features of the segment (an xp array of
    (end - start, width)), set by the transformer architecture.
    """

    doc: Doc
    start: int
    end: int
    text: str
    features: Optional[Any] = None
    doc_offsets: Optional[Sequence[int]] = None

    def __len__(self) -> int:
        return self.end - self.start

    def char_offsets(self) -> Any:
        """RETURNS: The `doc.text` offsets of the segment's characters, as a slice or a sequence of offsets."""
        return slice(self.start, self.end) if self.doc_offsets is None else self.doc_offsets


@dataclass(frozen=True)
class Reading:
    """A doc's text as the model reads it.

    text (str): `doc.text`.
    read (str): The characters the model reads: traditional ones as simplified (`scripts.py`), spaces
        beside Chinese characters left out (`spaces.py`).
    offsets (Optional[List[int]]): The `text` offset of each character of `read`, then `len(text)`;
        None where `read` keeps every offset.
    """

    text: str
    read: str
    offsets: Optional[List[int]] = None

    def spans_read(self, spans: Sequence[CharSpan]) -> Sequence[CharSpan]:
        """RETURNS (Sequence[CharSpan]): `spans` (doc offsets) in offsets of `read`; spans of skipped spaces go."""
        if self.offsets is None:
            return spans
        moved = [(bisect_left(self.offsets, s), bisect_left(self.offsets, e), label) for s, e, label in spans]
        return [span for span in moved if span[0] < span[1]]

    def spans_in_doc(self, spans: List[AnySpan]) -> List[AnySpan]:
        """RETURNS (List[AnySpan]): `spans` (offsets of `read`) in doc offsets, each with what follows its end."""
        offsets = self.offsets
        if offsets is None:
            return spans
        moved: List[AnySpan] = []
        span: Tuple[Any, ...]
        for span in spans:
            moved.append(cast(AnySpan, (offsets[span[0]], offsets[span[1] - 1] + 1, *span[2:])))
        return moved

    def doc_offsets(self, start: int, end: int) -> Optional[List[int]]:
        """RETURNS (Optional[List[int]]): The doc offsets of `read[start:end]`; None where they are its own."""
        return None if self.offsets is None else self.offsets[start:end]


class Plan(List[Window]):
    """One doc's windows over its text as read, and that `Reading`."""

    def __init__(self, windows: Iterable[Window], reading: Reading) -> None:
        super().__init__(windows)
        self.reading = reading


@dataclass(frozen=True)
class Segmenter:
    """Cuts docs into segments and merges the segments' spans back.

    window_size (int): Longest text encoded at once; <= 0 never cuts.
    window_overlap (int): Context characters shared by neighbouring windows.
    normalize_script (bool): Segments read traditional characters as simplified ones (`scripts.py`),
        one for one, so every offset is the doc's own.
    skip_spaces (bool): Segments leave out the runs of spaces beside a Chinese character (`spaces.py`);
        the spans map back to the doc's offsets.
    """

    window_size: int
    window_overlap: int
    normalize_script: bool = False
    skip_spaces: bool = False

    def read(self, doc: Doc) -> Reading:
        """RETURNS (Reading): `doc.text` as the model reads it, and where each character read stands."""
        text = doc.text  # rebuilt from every token on each access: read it once
        read = read_as_simplified(text) if self.normalize_script else text
        offsets = read_offsets(read) if self.skip_spaces else None
        if offsets is not None:
            read = "".join(read[i] for i in offsets[:-1])
        return Reading(text, read, offsets)

    def plan(self, text: str, protected: Sequence[Tuple[int, int]] = ()) -> List[Window]:
        """RETURNS (List[Window]): The windows of `text`; one empty window for an
        empty text, so every doc keeps a segment (a transformer listener counts
        on seeing every doc of a batch, in order)."""
        return plan_windows(text, self.window_size, self.window_overlap, protected)

    def segments(self, docs: Sequence[Doc]) -> Tuple[List[Segment], List[Plan]]:
        """The segments to encode for prediction, and each doc's plan for `merge`."""
        segments: List[Segment] = []
        plans: List[Plan] = []
        for doc in docs:
            reading = self.read(doc)
            plan = Plan(self.plan(reading.read), reading)
            plans.append(plan)
            segments.extend(self._segment(doc, reading, w.start, w.end) for w in plan)
        return segments, plans

    def merge(self, plans: Sequence[Plan], spans: Sequence[Sequence[AnySpan]]) -> List[List[AnySpan]]:
        """Each doc's spans, in doc offsets, from its segments' spans (segment offsets)."""
        out: List[List[AnySpan]] = []
        pos = 0
        for plan in plans:
            out.append(plan.reading.spans_in_doc(merge_window_spans(plan, spans[pos : pos + len(plan)])))
            pos += len(plan)
        return out

    def training_segments(self, doc: Doc, entities: Sequence[CharSpan]) -> List[Tuple[Segment, List[CharSpan]]]:
        """The segments of a training doc with their gold spans (segment offsets).
        Training windows are their own parts only, cut where no gold entity
        crosses, so every entity is learned exactly once and none is clipped."""
        reading = self.read(doc)
        entities = reading.spans_read(entities)
        out: List[Tuple[Segment, List[CharSpan]]] = []
        for window in self.plan(reading.read, [(s, e) for s, e, _ in entities]):
            a, b = window.own_start, window.own_end
            inside = [(s - a, e - a, label) for s, e, label in entities if a <= s and e <= b]
            out.append((self._segment(doc, reading, a, b), inside))
        return out

    @staticmethod
    def _segment(doc: Doc, reading: Reading, start: int, end: int) -> Segment:
        return Segment(doc, start, end, reading.read[start:end], doc_offsets=reading.doc_offsets(start, end))
