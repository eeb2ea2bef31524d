"""The lexicon and lattice on strings alone."""

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_flat.errors import LexiconError
from spacy_flat.lattice.flat_lattice import build_lattice
from spacy_flat.lattice.lexicon import Lexicon

WORDS = ["重庆", "重庆人", "人和", "人和药店", "药店", "老板", "张三", "上海", "在上"]


def brute_force(text, words):
    return sorted((i, i + len(w) - 1, w) for w in words for i in range(len(text)) if text.startswith(w, i))


def test_matches_every_occurrence_overlapping():
    lexicon = Lexicon(WORDS)
    text = "重庆人和药店的老板张三在上海。重庆"
    found = [(h, t, lexicon.words[r]) for h, t, r in lexicon.matches(text)]
    assert found == brute_force(text, WORDS)


def test_lattice_layout():
    lexicon = Lexicon(WORDS)
    lattice = build_lattice("重庆人和药店", lexicon)
    assert lattice.n_chars == 6
    assert list(lattice.heads[:6]) == list(range(6)) == list(lattice.tails[:6])
    words = {(int(h), int(t)) for h, t in zip(lattice.heads[6:], lattice.tails[6:])}
    assert words == {(0, 1), (0, 2), (2, 3), (2, 5), (4, 5)}


def test_single_characters_and_duplicates_are_skipped():
    lexicon = Lexicon(["北京", "北", "北京", "大学"])
    assert len(lexicon) == 2 and "北" not in lexicon


def test_add_takes_effect_on_next_match():
    lexicon = Lexicon(WORDS)
    assert lexicon.matches("蓝天白云") == []
    lexicon.add("白云")
    assert [(h, t) for h, t, _ in lexicon.matches("蓝天白云")] == [(2, 3)]
    with pytest.raises(LexiconError):
        lexicon.add("云")


def test_vectors_round_trip_and_width_checks():
    vectors = numpy.arange(6, dtype="float32").reshape(3, 2)
    lexicon = Lexicon(["北京", "上海", "广州"], vectors)
    lexicon.add("深圳", numpy.array([9.0, 9.0]))
    lexicon.add("杭州")
    with pytest.raises(LexiconError, match="width"):
        lexicon.add("南京", numpy.zeros(3))
    loaded = Lexicon.from_bytes(lexicon.to_bytes())
    assert loaded.words == lexicon.words
    assert numpy.array_equal(loaded.vectors, lexicon.vectors)
    assert loaded.has_vector("深圳") and not loaded.has_vector("杭州")


def test_damaged_lexicon_bytes_raise_clear_error():
    with pytest.raises(LexiconError, match="Damaged lexicon in saved/lexicon"):
        Lexicon.from_bytes(b"\x00garbage", source="saved/lexicon")


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from([*list("重庆人和药店老板张三在上海 \n😀́\x00"), "�"]), max_size=60))
def test_lattice_spans_lie_inside_text(text):
    lexicon = Lexicon(WORDS)
    lattice = build_lattice(text, lexicon)
    assert lattice.n_chars == len(text)
    assert (lattice.heads <= lattice.tails).all()
    assert (lattice.tails < max(1, len(text))).all() or len(text) == 0
    for h, t, r in zip(lattice.heads[lattice.n_chars :], lattice.tails[lattice.n_chars :], lattice.word_rows):
        assert text[h : t + 1] == lexicon.words[r]
