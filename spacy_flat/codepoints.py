"""Per-character values over whole texts as NumPy lookups on their code points."""

from typing import Callable, Dict, Optional

import numpy

# Code points below this are looked up in a dense table; the rest (emoji, rare Han) in a dict.
DENSE = 0x10000


def code_points(text: str) -> numpy.ndarray:
    """RETURNS (numpy.ndarray): (len(text),) uint32, one code point per character.
    A lone surrogate (text from broken UTF-16) passes through as its own code point."""
    return numpy.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


class CodePointTable:
    """A non-negative int per character, computed by `compute` once per distinct
    character and then read for whole texts at once.

    Hand-written because the values come from Python (unicodedata, dict lookups,
    rules) one character at a time: with them cached in a dense table over the
    Basic Multilingual Plane, a batch's characters take one NumPy indexing
    instead of a Python call each.

    compute (Callable[[str], int]): The value of one character, >= 0.
    """

    def __init__(self, compute: Callable[[str], int]) -> None:
        self._compute = compute
        self._dense: Optional[numpy.ndarray] = None  # allocated on first use
        self._sparse: Dict[int, int] = {}

    def __getstate__(self) -> Dict:
        # The table is a cache: pickles (nlp.pipe's worker processes) need not carry it.
        return {"_compute": self._compute, "_dense": None, "_sparse": {}}

    def lookup(self, codes: numpy.ndarray) -> numpy.ndarray:
        """codes (numpy.ndarray): Code points (`code_points`).
        RETURNS (numpy.ndarray): (len(codes),) int64 values."""
        if self._dense is None:
            self._dense = numpy.full(DENSE, -1, dtype="int64")
        dense = codes < DENSE
        if dense.all():
            out = self._dense[codes]
            if (out < 0).any():
                self._fill(numpy.unique(codes[out < 0]))
                out = self._dense[codes]
            return out
        out = numpy.empty(len(codes), dtype="int64")
        out[dense] = self.lookup(codes[dense])
        sparse, compute = self._sparse, self._compute
        for k in numpy.flatnonzero(~dense).tolist():
            code = int(codes[k])
            value = sparse.get(code)
            if value is None:
                value = sparse[code] = compute(chr(code))
            out[k] = value
        return out

    def _fill(self, codes: numpy.ndarray) -> None:
        assert self._dense is not None
        for code in codes.tolist():
            self._dense[code] = self._compute(chr(code))
