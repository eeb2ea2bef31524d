"""Type aliases shared across the package."""

from typing import Tuple

# A character span: (start, end_exclusive, label).
CharSpan = Tuple[int, int, str]
