"""Every occurrence of every lexicon word in a text, by Aho-Corasick."""

import itertools
from typing import List, Sequence, Tuple

import ahocorasick
import numpy


class WordMatcher:
    """An Aho-Corasick automaton over a fixed word list (pyahocorasick, a C
    extension): one pass over a text finds every occurrence of every word,
    overlapping and of all lengths.
    """

    def __init__(self, words: Sequence[str]) -> None:
        """Build the automaton.

        words (Sequence[str]): The words; a match reports its word's index here.
        """
        self._automaton = ahocorasick.Automaton()
        for row, word in enumerate(words):
            self._automaton.add_word(word, row)
        self._automaton.make_automaton()
        self._lengths = numpy.asarray([len(word) for word in words], dtype="int64")
        # Joins the texts of a batch: a character no word has, so no match crosses it.
        used = set("".join(words))
        self.separator = next(c for c in ("\uffff", "\x00", *map(chr, range(0xE000, 0xF900))) if c not in used)

    def find(self, text: str) -> List[Tuple[int, int, int]]:
        """(head, tail, row) of each occurrence, head and tail the positions of
        its first and last character, sorted by head, then tail."""
        heads, tails, rows = self.find_arrays(text)
        return list(zip(heads.tolist(), tails.tolist(), rows.tolist()))

    def find_batch(self, texts: Sequence[str]) -> Tuple[numpy.ndarray, ...]:
        """The words of every text in one pass over the texts joined by
        `separator`: heads, tails and rows (each text's own offsets), concatenated
        text after text, and each text's number of words."""
        starts = numpy.cumsum([0] + [len(text) + 1 for text in texts[:-1]])
        heads, tails, rows = self.find_arrays(self.separator.join(texts))
        owner = numpy.searchsorted(starts, heads, side="right") - 1
        counts = numpy.bincount(owner, minlength=len(texts))
        return heads - starts[owner], tails - starts[owner], rows, counts

    def find_arrays(self, text: str) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """`find` as three int64 arrays (heads, tails, rows). The automaton's
        (end, row) pairs go straight into one array (`numpy.fromiter` over the
        flattened pairs), with no Python tuple built per match."""
        found = numpy.fromiter(itertools.chain.from_iterable(self._automaton.iter(text)), dtype="int64")
        tails, rows = found[0::2], found[1::2]
        heads = tails - self._lengths[rows] + 1
        # (head, tail) is unique per match (one row per word), so this is the tuples' order.
        order = numpy.lexsort((tails, heads))
        return heads[order], tails[order], rows[order]
