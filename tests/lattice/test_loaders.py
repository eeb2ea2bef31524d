"""Loaders: real formats, and faults reported with file and line."""

import struct
import unicodedata

import numpy
import pytest

from spacy_flat.errors import LexiconError
from spacy_flat.lattice.lexicon import Lexicon
from spacy_flat.lattice.loaders import create_lac_char_vectors, create_word2vec_char_vectors, create_word2vec_lexicon
from spacy_flat.lattice.readers import (
    jieba_dir,
    read_lac_char_table,
    read_word2vec,
    read_word2vec_chars,
    read_word_list,
)
from spacy_flat.lattice.vectors import unit_rows

from ..util import SHARED, needs_shared


def write_binary(path, rows, header=None):
    width = len(rows[0][1])
    data = (header or f"{len(rows)} {width}\n").encode()
    for word, vec in rows:
        data += word.encode() + b" " + struct.pack(f"<{width}f", *vec)
    path.write_bytes(data)


def test_word2vec_text_and_binary_agree(tmp_path):
    rows = [("北京", [1.0, 2.0]), ("上海", [3.0, 4.0]), ("北", [5.0, 6.0])]
    write_binary(tmp_path / "v.bin", rows)
    (tmp_path / "v.txt").write_text("3 2\n" + "".join(f"{w} {a} {b}\n" for w, (a, b) in rows), encoding="utf8")
    (tmp_path / "nohead.txt").write_text("".join(f"{w} {a} {b}\n" for w, (a, b) in rows), encoding="utf8")
    results = [read_word2vec(tmp_path / name) for name in ("v.bin", "v.txt", "nohead.txt")]
    for words, vectors, report in results:
        assert words == ["北京", "上海"]
        assert numpy.allclose(vectors, [[1, 2], [3, 4]])
        assert report.repairs == {"words shorter than 2 characters": 1}


@pytest.mark.parametrize(
    "content,message",
    [
        ("2 2\n北京 1 2\n上海 1 2 3\n", r"v\.txt:3: expected a word and 2 numbers, got 3"),
        ("2 2\n北京 1 2\n", r"header announces 2 vectors, the file holds 1"),
        ("北京 1 x\n", r"v\.txt:1: a vector value is not a number"),
    ],
)
def test_word2vec_text_faults_name_file_and_line(tmp_path, content, message):
    (tmp_path / "v.txt").write_text(content, encoding="utf8")
    with pytest.raises(LexiconError, match=message):
        read_word2vec(tmp_path / "v.txt")


def test_word2vec_bad_utf8_names_line(tmp_path):
    (tmp_path / "v.txt").write_bytes("北京 1 2\n".encode() + b"\xff\xfe 1 2\n")
    with pytest.raises(LexiconError, match=r"v\.txt:2: not valid UTF-8"):
        read_word2vec(tmp_path / "v.txt")


def test_word2vec_truncated_binary(tmp_path):
    write_binary(tmp_path / "v.bin", [("北京", [1.0, 2.0]), ("上海", [3.0, 4.0])])
    data = (tmp_path / "v.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:-3])
    with pytest.raises(LexiconError, match=r"cut\.bin: truncated at vector 2 of 2"):
        read_word2vec(tmp_path / "cut.bin", binary=True)


def test_word2vec_duplicates_and_blank_lines_are_counted(tmp_path):
    (tmp_path / "v.txt").write_text("北京 1 2\n\n北京 3 4\n上海 5 6\n", encoding="utf8")
    words, vectors, report = read_word2vec(tmp_path / "v.txt")
    assert words == ["北京", "上海"] and vectors[0].tolist() == [1, 2]
    assert report.repairs == {"blank lines": 1, "duplicates (first kept)": 1}


def test_word_list_reports_repairs(tmp_path):
    (tmp_path / "w.txt").write_text("北京 10 ns\n\n北 3 n\n北京 1 ns\n大学\n", encoding="utf8")
    words, report = read_word_list(tmp_path / "w.txt")
    assert words == ["北京", "大学"]
    assert report.repairs == {"blank lines": 1, "single characters": 1, "duplicates": 1}


def test_lac_table_maps_every_character_class():
    vocab, table = read_lac_char_table()
    assert table.shape == (len(vocab), 128)
    unknown = [vocab.row(c) for c in ("😀", "\x00", "\ufffd")]
    assert len(set(unknown)) == 1  # one OOV row for symbols
    known = set(vocab.entries)
    # Compatibility forms the table lacks (circled digits, CJK compatibility ideographs)
    # share the row of their NFKC form.
    candidates = [chr(c) for r in ((0x2460, 0x2474), (0xF900, 0xFA6E), (0xFF01, 0xFF5F)) for c in range(*r)]
    folded = [c for c in candidates if c not in known and unicodedata.normalize("NFKC", c) in known]
    assert folded
    assert all(vocab.row(c) == vocab.row(unicodedata.normalize("NFKC", c)) for c in folded)
    assert vocab.row("张") != vocab.row("京")


def test_word2vec_chars_keep_single_characters_and_add_class_rows(tmp_path):
    rows = [("北", [1.0, 2.0]), ("北京", [3.0, 4.0]), ("京", [5.0, 6.0]), ("1", [7.0, 8.0])]
    write_binary(tmp_path / "v.bin", rows)
    vocab, table = read_word2vec_chars(tmp_path / "v.bin")
    assert vocab.entries[:3] == ["北", "京", "1"]
    assert numpy.allclose(table[:3], [[1, 2], [5, 6], [7, 8]])
    # One row per OOV class the file lacks, starting at the mean of the others.
    assert table.shape == (len(vocab), 2) and len(vocab) == 3 + 4
    assert numpy.allclose(table[vocab.row("张")], [13 / 3, 16 / 3])
    assert vocab.row("北") == 0 and vocab.row("１") == 2  # full-width digit folds to "1"


def test_word2vec_chars_without_characters_names_the_file(tmp_path):
    (tmp_path / "words.txt").write_text("北京 1 2\n上海 3 4\n", encoding="utf8")
    with pytest.raises(LexiconError, match=r"words\.txt: no single-character entries"):
        read_word2vec_chars(tmp_path / "words.txt")


@needs_shared
def test_shared_word2vec_file_loads():
    words, vectors, report = read_word2vec(SHARED / "vectors/synonyms-wiki-w2v-100d/words.vector")
    assert vectors.shape == (len(words), 100)
    assert report.read == 125_796
    assert report.kept + sum(report.repairs.values()) == report.read


def test_unit_rows_keeps_direction_and_zero_rows():
    table = numpy.array([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]], dtype="float32")
    unit = unit_rows(table)
    assert numpy.allclose(unit, [[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]])
    assert unit.dtype == numpy.float32


def test_normalize_option_of_each_pretrained_loader(tmp_path):
    rows = [("北", [3.0, 4.0]), ("北京", [30.0, 40.0]), ("上海", [0.0, 5.0])]
    write_binary(tmp_path / "v.bin", rows)
    lexicon = create_word2vec_lexicon(str(tmp_path / "v.bin"), normalize=True)()
    assert numpy.allclose(numpy.linalg.norm(lexicon.vectors, axis=1), 1.0)
    # A word added later is scaled like the rest, also after a save and load.
    lexicon.add("广州", [0.0, 7.0])
    assert numpy.allclose(lexicon.vectors[lexicon.index("广州")], [0.0, 1.0])
    reloaded = Lexicon.from_bytes(lexicon.to_bytes())
    reloaded.add("深圳", [6.0, 8.0])
    assert numpy.allclose(reloaded.vectors[reloaded.index("深圳")], [0.6, 0.8])
    assert numpy.allclose(reloaded.vectors[reloaded.index("北京")], [0.6, 0.8])
    raw = create_word2vec_lexicon(str(tmp_path / "v.bin"))()
    assert numpy.allclose(numpy.linalg.norm(raw.vectors, axis=1), [50.0, 5.0])
    raw.add("广州", [0.0, 7.0])
    assert numpy.allclose(raw.vectors[raw.index("广州")], [0.0, 7.0])
    _, chars = create_word2vec_char_vectors(str(tmp_path / "v.bin"), normalize=True)()
    assert numpy.allclose(numpy.linalg.norm(chars, axis=1), 1.0)
    vocab, lac = create_lac_char_vectors(normalize=True)()
    _, lac_raw = read_lac_char_table()
    assert numpy.allclose(numpy.linalg.norm(lac, axis=1), 1.0, atol=1e-5)
    row = vocab.row("京")
    assert numpy.allclose(lac[row], lac_raw[row] / numpy.linalg.norm(lac_raw[row]), atol=1e-6)


def test_word2vec_lexicon_joins_word_lists_without_vectors(tmp_path):
    write_binary(tmp_path / "v.bin", [("北京", [3.0, 4.0]), ("上海", [0.0, 5.0])])
    (tmp_path / "extra.txt").write_text("北京 9 ns\n长江大桥 3 ns\n长江\n", encoding="utf8")
    lexicon = create_word2vec_lexicon(str(tmp_path / "v.bin"), extra_words=str(tmp_path / "extra.txt"))()
    assert lexicon.words == ["北京", "上海", "长江大桥", "长江"]
    # A word in both keeps the file's vector; list-only words have none.
    assert numpy.allclose(lexicon.vectors[lexicon.index("北京")], [3.0, 4.0])
    assert lexicon.has_vector("北京") and not lexicon.has_vector("长江大桥")
    assert numpy.allclose(lexicon.vectors[lexicon.index("长江")], 0.0)
    found = {lexicon.words[row] for _, _, row in lexicon.matches("南京长江大桥")}
    assert found == {"长江", "长江大桥"}
    reloaded = Lexicon.from_bytes(lexicon.to_bytes())
    assert reloaded.words == lexicon.words and not reloaded.has_vector("长江")
    with_jieba = create_word2vec_lexicon(str(tmp_path / "v.bin"), jieba_words=True)()
    jieba_words, _ = read_word_list(jieba_dir() / "dict.txt")
    assert len(with_jieba) == len(set(jieba_words) | {"北京", "上海"})
    assert with_jieba.has_vector("上海") and not with_jieba.has_vector("长江大桥")


def test_word2vec_lexicon_puts_a_second_table_beside_the_first(tmp_path):
    write_binary(tmp_path / "wiki.bin", [("北京", [3.0, 4.0]), ("上海", [0.0, 5.0])])
    write_binary(tmp_path / "own.bin", [("上海", [1.0, 0.0, 0.0]), ("浦东", [0.0, 2.0, 0.0])])
    lexicon = create_word2vec_lexicon(
        str(tmp_path / "wiki.bin"), extra_vectors=str(tmp_path / "own.bin"), normalize=True
    )()
    assert lexicon.words == ["北京", "上海", "浦东"] and lexicon.vector_width == 5
    # Each half scaled on its own; zeros where a table lacks the word.
    numpy.testing.assert_allclose(lexicon.vectors[0], [0.6, 0.8, 0.0, 0.0, 0.0])
    numpy.testing.assert_allclose(lexicon.vectors[1], [0.0, 1.0, 1.0, 0.0, 0.0])
    numpy.testing.assert_allclose(lexicon.vectors[2], [0.0, 0.0, 0.0, 1.0, 0.0])
    assert all(lexicon.has_vector(w) for w in lexicon.words)
