"""Every occurrence of every lexicon word in a text, by Aho-Corasick."""

from typing import List, Sequence, Tuple

import ahocorasick


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
            self._automaton.add_word(word, (row, len(word)))
        self._automaton.make_automaton()

    def find(self, text: str) -> List[Tuple[int, int, int]]:
        """(head, tail, row) of each occurrence, head and tail the positions of
        its first and last character, sorted by head, then tail."""
        found = [(end - length + 1, end, row) for end, (row, length) in self._automaton.iter(text)]
        found.sort()
        return found
