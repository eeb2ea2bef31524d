"""Character rows of the character-embedding table."""

from __future__ import annotations

import unicodedata
from typing import Dict, Iterable, List

import numpy
import srsly

from ..codepoints import CodePointTable, code_points
from ..errors import PipelineFileError

# Rows for characters the table lacks, by class, as in Baidu LAC's word.dic.
OOV_CLASSES = ("OOV_NUM", "OOV_ALPHA", "OOV_HANZ", "OOV")


def normalize_char(char: str) -> str:
    """Fold full-width and compatibility forms (Ａ → A, １ → 1) to the form the
    table knows; one code point in, one out, so offsets never shift."""
    folded = unicodedata.normalize("NFKC", char)
    return folded if len(folded) == 1 else char


def char_class(char: str) -> str:
    """RETURNS (str): The OOV class of a character unknown to the table."""
    if char.isdigit():
        return "OOV_NUM"
    if char.isascii() and char.isalpha():
        return "OOV_ALPHA"
    if "\u4e00" <= char <= "\u9fff" or "\u3400" <= char <= "\u4dbf":
        return "OOV_HANZ"
    return "OOV"


class CharVocab:
    """Maps characters to rows of the character-embedding table.

    Unknown characters fall back to a row for their class (digit, Latin letter,
    Han character, other), so every character gets a sensible vector.
    """

    def __init__(self, chars: Iterable[str]) -> None:
        """chars (Iterable[str]): Row i's entry: a character or an OOV class name."""
        self.entries: List[str] = list(chars)
        self._rows: Dict[str, int] = {}
        for row, entry in enumerate(self.entries):
            self._rows.setdefault(entry, row)
        for name in OOV_CLASSES:
            if name not in self._rows:
                self._rows[name] = len(self.entries)
                self.entries.append(name)
        self._cache: Dict[str, int] = {}
        self._table = CodePointTable(self.row)

    def __len__(self) -> int:
        return len(self.entries)

    def row(self, char: str) -> int:
        """RETURNS (int): The row of `char`."""
        row = self._cache.get(char)
        if row is None:
            row = self._rows.get(char)
            if row is None:
                norm = normalize_char(char)
                row = self._rows.get(norm, self._rows.get(norm.lower()))
            if row is None:
                row = self._rows[char_class(normalize_char(char))]
            self._cache[char] = row
        return row

    def rows(self, text: str) -> numpy.ndarray:
        """RETURNS (numpy.ndarray): int64 rows, one per character of `text` (of a
        whole batch's texts joined: one lookup over their code points)."""
        return self._table.lookup(code_points(text))

    def to_bytes(self) -> bytes:
        return srsly.msgpack_dumps({"entries": self.entries})

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>") -> CharVocab:
        try:
            return cls(srsly.msgpack_loads(data)["entries"])
        except Exception as err:
            raise PipelineFileError(f"Damaged character vocabulary in {source}: {err}") from err
