"""The BILUO tag set over characters, and conversions between tags and spans."""

from __future__ import annotations

from typing import Iterable, List, Sequence, Tuple

from spacy.training.iob_utils import tags_to_entities

from ..types import CharSpan


class TagSet:
    """`O` plus B-, I-, L-, U- for each label, in a fixed order."""

    def __init__(self, labels: Iterable[str]) -> None:
        self.labels: Tuple[str, ...] = tuple(sorted(set(labels)))
        self.tags: List[str] = ["O"] + [f"{p}-{lab}" for lab in self.labels for p in "BILU"]
        self.index = {tag: i for i, tag in enumerate(self.tags)}

    def __len__(self) -> int:
        return len(self.tags)

    def allowed_transitions(self) -> List[Tuple[int, int]]:
        """RETURNS (List[Tuple[int, int]]): (from, to) pairs a valid sequence may take."""
        allowed = []
        for i, prev in enumerate(self.tags):
            for j, nxt in enumerate(self.tags):
                # Inside an entity: continue or end it; outside: stay out or start one.
                inside = prev[0] in "BI"
                if (inside and nxt[0] in "IL" and nxt[2:] == prev[2:]) or (not inside and nxt[0] in "OBU"):
                    allowed.append((i, j))
        return allowed

    def allowed_starts(self) -> List[int]:
        return [i for i, t in enumerate(self.tags) if t[0] in "OBU"]

    def allowed_ends(self) -> List[int]:
        return [i for i, t in enumerate(self.tags) if t[0] in "OLU"]

    def encode(self, spans: Iterable[CharSpan], length: int) -> List[int]:
        """Tag ids for characters 0..length-1 from non-overlapping spans."""
        ids = [0] * length
        for start, end, label in spans:
            if end - start == 1:
                ids[start] = self.index[f"U-{label}"]
            else:
                ids[start] = self.index[f"B-{label}"]
                for k in range(start + 1, end - 1):
                    ids[k] = self.index[f"I-{label}"]
                ids[end - 1] = self.index[f"L-{label}"]
        return ids

    def decode(self, ids: Sequence[int]) -> List[CharSpan]:
        """Character spans from a valid tag-id sequence, by spaCy's `tags_to_entities`."""
        tags = [self.tags[i] for i in ids]
        return [(start, end + 1, label) for label, start, end in tags_to_entities(tags)]
