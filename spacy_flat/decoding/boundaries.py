"""Where an entity may begin, end and reach: rules learned from the training data
and enforced as constraints of CRF decoding.

A reader never accepts an entity across a line break or a sentence-final full
stop, nor one made of punctuation, symbols or emoji, yet a model trained on
news sentences has never seen those characters decide anything. So, unless the
training data has such entities, decoding may not put any entity tag on a line
break, a space or a sentence end (`。！？` and their full-width and ASCII kin), and
an entity may begin or end on punctuation, a symbol or a sentence end only if
some training entity began or ended on that character ("Yahoo!" ends on "!"). A single punctuation or symbol
character is never an entity. The rules mask tags per character before Viterbi,
so the best path under the constraints is found, not a path cut up afterwards.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy

from ..codepoints import CodePointTable, code_points
from .tags import TagSet

LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
SENTENCE_FINAL = frozenset("。｡！!？?﹗﹖")
WORD, LINE_BREAK, SPACE, SENTENCE_END, SYMBOL = range(5)


def char_class(char: str) -> int:
    """RETURNS (int): WORD, LINE_BREAK, SPACE, SENTENCE_END or SYMBOL (punctuation and symbols)."""
    if char in LINE_BREAKS:
        return LINE_BREAK
    if char.isspace():
        return SPACE
    if char in SENTENCE_FINAL:
        return SENTENCE_END
    if unicodedata.category(char)[0] in "PS":
        return SYMBOL
    return WORD


@dataclass(frozen=True)
class BoundaryRules:
    """What the training entities allow.

    line_break_inside, space_inside, sentence_end_inside (bool): Some training
        entity contains such a character, so entities may.
    symbol_starts, symbol_ends (str): The punctuation and symbol characters
        (sentence ends included) that training entities begin or end with.
    counts (Dict[str, int]): What was counted, for the log and the saved pipeline.
    """

    line_break_inside: bool = False
    space_inside: bool = False
    sentence_end_inside: bool = False
    symbol_starts: str = ""
    symbol_ends: str = ""
    counts: Dict[str, int] = field(default_factory=dict, compare=False)

    @classmethod
    def learn(cls, entity_texts: Iterable[str]) -> BoundaryRules:
        """Count the training entities' characters.

        entity_texts (Iterable[str]): The text of every gold entity.
        """
        inside = {LINE_BREAK: 0, SPACE: 0, SENTENCE_END: 0}
        starts, ends = set(), set()
        total = 0
        for text in entity_texts:
            text = text.strip()
            if not text:
                continue
            total += 1
            # Only the interior counts: "Yahoo!" ends on a "!", it does not contain one.
            for kind in {char_class(c) for c in text[1:-1]} & inside.keys():
                inside[kind] += 1
            if char_class(text[0]) in (SYMBOL, SENTENCE_END):
                starts.add(text[0])
            if char_class(text[-1]) in (SYMBOL, SENTENCE_END):
                ends.add(text[-1])
        return cls(
            line_break_inside=inside[LINE_BREAK] > 0,
            space_inside=inside[SPACE] > 0,
            sentence_end_inside=inside[SENTENCE_END] > 0,
            symbol_starts="".join(sorted(starts)),
            symbol_ends="".join(sorted(ends)),
            counts={
                "entities": total,
                "with_line_break": inside[LINE_BREAK],
                "with_space": inside[SPACE],
                "with_sentence_end": inside[SENTENCE_END],
            },
        )

    def describe(self) -> List[str]:
        """RETURNS (List[str]): One line per rule, saying what was counted."""
        n = self.counts.get("entities", 0)
        lines = []
        for name, allowed, key in (
            ("a line break", self.line_break_inside, "with_line_break"),
            ("a space", self.space_inside, "with_space"),
            ("sentence-final punctuation (。！？ and kin)", self.sentence_end_inside, "with_sentence_end"),
        ):
            verdict = "may" if allowed else "may not"
            lines.append(f"{self.counts.get(key, 0)} of {n} training entities contain {name}: entities {verdict}")
        starts = repr(self.symbol_starts) if self.symbol_starts else "none"
        ends = repr(self.symbol_ends) if self.symbol_ends else "none"
        lines.append(f"punctuation or symbols that begin training entities: {starts}; that end them: {ends}")
        return lines

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> Optional[BoundaryRules]:
        return None if data is None else cls(**data)

    def forbidden(self, texts: Iterable[str], tag_set: TagSet, width: int) -> numpy.ndarray:
        """The tags each character may not take.

        texts (Iterable[str]): One text per row.
        tag_set (TagSet): The tags.
        width (int): Columns of the padded result (>= the longest text).
        RETURNS (numpy.ndarray): (rows, width, tags) bool, True where forbidden.
        """
        texts = list(texts)
        masks = _masks(self, tuple(tag_set.tags))
        out = numpy.zeros((len(texts), width, len(tag_set)), dtype=bool)
        lengths = numpy.asarray([len(text) for text in texts], dtype="int64")
        if lengths.sum():
            # One lookup over the batch's characters, written to each row's first columns.
            kinds = masks.table.lookup(code_points("".join(texts)))
            before = numpy.cumsum(lengths) - lengths
            where = numpy.repeat(numpy.arange(len(texts)) * width - before, lengths) + numpy.arange(len(kinds))
            out.reshape(-1, len(tag_set))[where] = masks.stacked()[kinds]
        return out


@functools.lru_cache(maxsize=16)
def _masks(rules: BoundaryRules, tags: Tuple[str, ...]) -> _Masks:
    """The masks of one set of rules and tags, kept across calls: the component
    rebuilds its rules from `cfg` on every call, equal and so hashed alike."""
    return _Masks(rules, tags)


class _Masks:
    """Each character's forbidden tags, computed once per distinct character."""

    def __init__(self, rules: BoundaryRules, tags: Sequence[str]) -> None:
        roles = numpy.asarray([tag[0] for tag in tags])
        self.entity = roles != "O"
        self.edge = numpy.isin(roles, list("BLU"))
        self.begin = numpy.isin(roles, list("BU"))
        self.end = numpy.isin(roles, list("LU"))
        self.unit = roles == "U"
        self.inside = roles == "I"
        self.rules = rules
        self.rows: List[numpy.ndarray] = []
        self.index: Dict[bytes, int] = {}
        self.table = CodePointTable(self.row)
        self._stacked = numpy.zeros((0, len(roles)), dtype=bool)

    def stacked(self) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): (distinct masks, tags) bool, `rows` as one array."""
        if len(self._stacked) != len(self.rows):
            self._stacked = numpy.stack(self.rows)
        return self._stacked

    def row(self, char: str) -> int:
        """RETURNS (int): The row of `self.rows` that holds `char`'s forbidden tags,
        shared by every character with the same ones."""
        forbid = self._forbid(char)
        row = self.index.get(forbid.tobytes())
        if row is None:
            row = self.index[forbid.tobytes()] = len(self.rows)
            self.rows.append(forbid)
        return row

    def _forbid(self, char: str) -> numpy.ndarray:
        rules, kind = self.rules, char_class(char)
        if kind == WORD:
            return numpy.zeros_like(self.entity)
        if kind in (LINE_BREAK, SPACE):
            inside = rules.line_break_inside if kind == LINE_BREAK else rules.space_inside
            # Whitespace never begins or ends an entity.
            return self.edge.copy() if inside else self.entity.copy()
        forbid = self.unit.copy()
        if kind == SENTENCE_END and not rules.sentence_end_inside:
            forbid |= self.inside
        if char not in rules.symbol_starts:
            forbid |= self.begin
        if char not in rules.symbol_ends:
            forbid |= self.end
        return forbid
