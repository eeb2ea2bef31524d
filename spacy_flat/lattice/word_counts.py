"""Word frequencies for DC-SAN's soft-lexicon word sets (Zhao et al., eq. 4-5):
each set's vector is the mean of its words' vectors weighted by z(w) + b, with
z(w) the word's frequency in "the statistic data set" and b the count below which
10% of the training words fall.

The frequencies come from text (the training data by default) or from a counts
file (`word<TAB>count`, as `pretrain-vectors` writes for its word table).
"""

from pathlib import Path
from typing import Callable, Dict, Iterable, Optional, Tuple

import numpy

from ..errors import LexiconError
from .gazetteers import read_lines
from .lexicon import Lexicon

# The share of training words whose frequency lies below b (the paper's 10%).
FLOOR_QUANTILE = 0.1


def count_matches(lexicon: Lexicon, texts: Iterable[str]) -> numpy.ndarray:
    """Count each lexicon word's occurrences in `texts`, as the soft-lexicon papers
    do: an occurrence inside a longer matched word does not count, so that a short
    word is not always more frequent than the words that contain it.

    lexicon (Lexicon): The words.
    texts (Iterable[str]): The text to count on.
    RETURNS (numpy.ndarray): (len(lexicon),) float32 counts in row order.
    """
    counts = numpy.zeros(len(lexicon), dtype="float32")
    for text in texts:
        found = lexicon.matches(text)
        if found:
            spans = numpy.asarray(found, dtype="int64")  # m × (head, tail, row)
            numpy.add.at(counts, spans[~covered_spans(spans[:, 0], spans[:, 1]), 2], 1.0)
    return counts


def covered_spans(heads: numpy.ndarray, tails: numpy.ndarray) -> numpy.ndarray:
    """Which spans lie inside a longer one, by one sweep in O(m log m): ordered by
    head, then tail from the last, a span is covered when an earlier one reaches at
    least as far (a pairwise test would take m × m memory: GBs on a long document).
    Spans are distinct, as a lexicon's matches are.

    RETURNS (numpy.ndarray): (m,) bool, in the spans' order.
    """
    order = numpy.lexsort((-tails, heads))
    reach = numpy.maximum.accumulate(tails[order])
    covered = numpy.zeros(len(heads), dtype=bool)
    covered[order[1:]] = reach[:-1] >= tails[order[1:]]
    return covered


def count_floor(counts: numpy.ndarray) -> float:
    """b: the frequency below which 10% of the counted words fall (at least 1).

    counts (numpy.ndarray): Frequencies; words never seen (0) are not training words.
    RETURNS (float): The floor.
    """
    seen = counts[counts > 0]
    return max(1.0, float(numpy.quantile(seen, FLOOR_QUANTILE))) if seen.size else 1.0


def counts_from_texts(lexicon: Lexicon, texts: Iterable[str]) -> Tuple[int, float]:
    """Count the lexicon's words on `texts` and store the counts and floor in it.

    RETURNS (Tuple[int, float]): The number of words seen, and b.
    """
    counts = count_matches(lexicon, texts)
    floor = count_floor(counts)
    lexicon.set_counts(counts, floor)
    return int((counts > 0).sum()), floor


def read_word_counts(path: Path) -> Dict[str, float]:
    """Read `word<TAB>count` lines (a header-free TSV; xz/gz/bz2 or not).

    RETURNS (Dict[str, float]): Word to count; a repeated word's counts add up.
    Raises LexiconError naming the file and line of a malformed row.
    """
    counts: Dict[str, float] = {}
    for line_no, line in enumerate(read_lines(Path(path)), start=1):
        if not line.strip():
            continue
        word, _, value = line.rpartition("\t")
        try:
            count = float(value)
        except ValueError:
            count = -1.0
        if not word or not count >= 0:
            raise LexiconError(f"{path}:{line_no}: expected 'word<TAB>count', got {line[:60]!r}")
        counts[word] = counts.get(word, 0.0) + count
    return counts


def counts_from_table(lexicon: Lexicon, table: Dict[str, float]) -> Tuple[int, float]:
    """Store the counts of a table (`read_word_counts`) in the lexicon; its words
    that are absent count 0. b comes from the counts of the lexicon's words.

    RETURNS (Tuple[int, float]): The number of lexicon words with a count, and b.
    """
    rows = lexicon.rows_of(list(table))
    values = numpy.fromiter(table.values(), dtype="float32", count=len(table))
    counts = numpy.zeros(len(lexicon), dtype="float32")
    counts[rows[rows >= 0]] = values[rows >= 0]
    floor = count_floor(counts)
    lexicon.set_counts(counts, floor)
    return int((counts > 0).sum()), floor


def store_word_counts(lexicon: Lexicon, texts: Iterable[str], table: Optional[Callable[[], Dict[str, float]]]) -> str:
    """Store word counts in the lexicon: from `table` where one is given, else
    counted on `texts` (the training texts, read only in that case).

    RETURNS (str): A line saying how many words were counted, from what, and b.
    """
    if table is not None:
        (seen, floor), source = counts_from_table(lexicon, table()), "the counts file"
    else:
        (seen, floor), source = counts_from_texts(lexicon, texts), "the training texts"
    return f"word frequencies of {seen} lexicon words from {source}, floor b = {floor:g}"
