"""Type aliases shared across the package."""

from typing import Tuple

# A character span: (start, end_exclusive, label).
CharSpan = Tuple[int, int, str]
# A character span with the CRF's probability of it: (start, end_exclusive, label, probability).
ScoredSpan = Tuple[int, int, str, float]
