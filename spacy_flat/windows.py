"""Cutting long texts into overlapping windows and merging their predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Sequence, Tuple

from .tags import CharSpan

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


def merge_window_spans(windows: Sequence[Window], spans: Iterable[Sequence[CharSpan]]) -> List[CharSpan]:
    """Map each window's spans (window offsets) to text offsets, keeping those
    that start in the window's own part. Own parts tile the text, so each
    entity comes from exactly one window and none is counted twice."""
    merged: List[CharSpan] = []
    for window, found in zip(windows, spans):
        for start, end, label in found:
            start, end = start + window.start, end + window.start
            if window.own_start <= start < window.own_end:
                merged.append((start, end, label))
    merged.sort()
    kept: List[CharSpan] = []
    for span in merged:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept
