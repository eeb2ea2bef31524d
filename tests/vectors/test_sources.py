"""Reading raw corpora for pretraining (pretraining/sources.py, pretraining/sentences.py):
real slices of ../shared/corpora in every format, and every kind of bad input."""

import bz2
import gzip
import itertools
import json
import lzma
import zipfile
from pathlib import Path

import pytest

from spacy_flat.vectors.sentences import SentenceFilter, clean, held_back_texts, split_sentences
from spacy_flat.vectors.sources import SourceReport, TextFields, describe, read_texts

from ..util import SHARED, needs_shared

CORPORA = SHARED / "corpora"


def head(path: Path, n: int) -> bytes:
    """The first n lines of a (possibly xz-compressed) corpus file."""
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rb") as f:
        return b"".join(itertools.islice(f, n))


def read(paths, **fields):
    report = SourceReport()
    return list(read_texts(paths, TextFields(**fields), report)), report


@needs_shared
def test_news_json_lines_with_html_paragraphs(tmp_path):
    path = tmp_path / "xwlb.jsonl.xz"
    path.write_bytes(lzma.compress(head(CORPORA / "xwlb_2012-07-02_2016-12-31.jsonl.xz", 3)))
    texts, report = read([path], json_field="videoList.video_detail.content")
    assert len(texts) > 20 and all(origin.startswith(f"{path}:") for _, origin in texts)
    assert report.documents[str(path)] == len(texts)
    sentences = [s for text, _ in texts for s in split_sentences(clean(text))]
    assert sentences and not any("<" in s or "</P>" in s for s in sentences)
    assert any("胡锦涛" in s for s in sentences)


@needs_shared
def test_markdown_news_csv_reviews_zip_member_and_json_array(tmp_path):
    md = tmp_path / "news.md"
    md.write_bytes(head(CORPORA / "xwlb_2022-09-24_2026-08-22.md.xz", 40))
    csv_path = tmp_path / "waimai.csv.gz"
    csv_path.write_bytes(gzip.compress(head(CORPORA / "waimai_10k.csv.xz", 30)))
    with zipfile.ZipFile(CORPORA / "online_shopping_10_cats.zip") as source:
        member = source.open(source.namelist()[0]).readlines()[:25]
    archive = tmp_path / "shopping.zip"
    with zipfile.ZipFile(archive, "w") as target:
        target.writestr("online_shopping_10_cats.csv", b"".join(member))
    posts = tmp_path / "weibo.json.bz2"
    posts.write_bytes(
        bz2.compress(lzma.decompress((CORPORA / "smp2020-ewect_virus_eval_labeled.json.xz").read_bytes()))
    )
    texts, report = read([md], csv_column="review")
    assert texts and texts[0][0].startswith("# 《新闻联播》")
    texts, report = read([csv_path, archive], csv_column="review")
    assert report.documents[str(csv_path)] == 29 and report.documents[str(archive)] == 24
    assert not report.skipped
    texts, report = read([posts], json_field="content")
    assert report.documents[str(posts)] == 2000 and texts[0][1] == f"{posts}:[0]"


def test_bad_input_is_reported_with_its_place_and_skipped(tmp_path):
    good = '{"text": "张伟在北京工作。"}\n'
    (tmp_path / "mixed.jsonl").write_bytes(
        (good + "not json\n" + '{"other": 1}\n').encode() + b'{"text": "\xff\xfe"}\n' + good.encode()
    )
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "table.csv").write_text("a,b\n1,2\n", encoding="utf8")
    (tmp_path / "notes.docx").write_bytes(b"PK")
    lines = "".join(f"李娜在上海{i}。\n" for i in range(5000)).encode()
    (tmp_path / "truncated.txt.xz").write_bytes(lzma.compress(lines)[:-200])
    archive = tmp_path / "corpus.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("good.txt", "王芳加入了华为公司。\n")
        zf.writestr("bad.txt", "陈静就职于清华大学。\n" * 50)
    data = bytearray(archive.read_bytes())
    spot = bytes(data).index("陈静".encode())
    data[spot] ^= 0xFF  # the member's bytes no longer match its CRC
    archive.write_bytes(bytes(data))
    (tmp_path / "fake.zip").write_bytes(b"not a zip")
    texts, report = read([tmp_path])
    kept = [t for t, _ in texts]
    assert kept.count("张伟在北京工作。") == 2 and "王芳加入了华为公司。" in kept
    assert not any(t.startswith("陈静") for t in kept)
    assert 0 < sum(t.startswith("李娜在上海") for t in kept) < 5000
    expected = {
        "not JSON": 1,
        "record without the text field": 1,
        "not valid UTF-8": 1,
        "no documents in the file": 2,  # empty.txt, and the .csv whose only column check fails below
        "CSV without the text column": 1,
        "unknown format": 1,
        "damaged .xz stream, read up to the damage": 1,
        "damaged zip member": 1,
        "not a zip archive": 1,
    }
    assert dict(report.skipped) == expected
    problems = "\n".join(report.problems)
    assert f"{tmp_path / 'mixed.jsonl'}:2: not JSON" in problems
    assert f"{tmp_path / 'mixed.jsonl'}:4: not valid UTF-8" in problems
    assert f"{archive}!bad.txt: damaged zip member" in problems
    assert describe(report)


def test_cleaning_and_sentences():
    raw = "<p>  中国网络电视台消息：ＡＢＣ公司&amp;华为在北京签约。</P>\r\n<p>他说：“很好！”明天见</p><br>1。"
    text = clean(raw)
    assert "<" not in text and "&amp;" not in text and "ABC公司&华为" in text
    assert list(split_sentences(text)) == ["中国网络电视台消息:ABC公司&华为在北京签约。", "他说:“很好!”", "明天见"]


def test_duplicates_and_held_back_sentences_are_dropped_and_counted():
    test_set = ["李娜在上海工作。王芳加入了华为公司。"]
    corpus = [
        "<p>今天天气很好。李娜在上海工作。</p>",  # a test sentence planted in the corpus, in markup
        "今天天气很好。张伟毕业于北京大学。",
        "王芳加入了华为公司！",  # not the test sentence: a different ending
    ]
    kept_filter = SentenceFilter(test_set)
    kept = list(kept_filter.sentences(corpus))
    assert kept == ["今天天气很好。", "张伟毕业于北京大学。", "王芳加入了华为公司!"]
    assert kept_filter.dropped == {"held back (in a dev or test set)": 1, "duplicate": 1}
    assert kept_filter.kept == 3


def test_held_back_texts_from_a_docbin(tmp_path):
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("zh")
    DocBin(docs=[nlp.make_doc("李娜在上海工作。")]).to_disk(tmp_path / "test.spacy")
    (tmp_path / "dev.txt").write_text("张伟毕业于北京大学。\n", encoding="utf8")
    assert held_back_texts([str(tmp_path / "test.spacy"), str(tmp_path / "dev.txt")]) == [
        "李娜在上海工作。",
        "张伟毕业于北京大学。",
    ]


@pytest.mark.parametrize("name", ["a.txt", "a.md", "a"])
def test_plain_text_one_document_per_line_with_bom(tmp_path, name):
    path = tmp_path / name
    path.write_bytes("\ufeff张伟在北京。\n\n李娜在上海。\n".encode())
    texts, _ = read([path])
    assert [t for t, _ in texts] == ["张伟在北京。", "李娜在上海。"]
    assert [o for _, o in texts] == [f"{path}:1", f"{path}:3"]


def test_a_json_document_that_is_an_object(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"items": [{"body": "张伟在北京。"}, {"body": "李娜在上海。"}]}), encoding="utf8")
    texts, _ = read([path], json_field="items.body")
    assert [t for t, _ in texts] == ["张伟在北京。", "李娜在上海。"]


@needs_shared
def test_one_run_reads_corpora_of_several_layouts_with_alternative_fields(tmp_path):
    news = tmp_path / "xwlb.jsonl"
    news.write_bytes(head(CORPORA / "xwlb_2017-01-01_2021-12-31.jsonl.xz", 2))
    posts = tmp_path / "weibo.json.xz"
    posts.write_bytes((CORPORA / "smp2020-ewect_virus_eval_labeled.json.xz").read_bytes())
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("label,review\n1,很好吃\n", encoding="utf8")
    other = tmp_path / "other.csv"
    other.write_text("id,text\n1,送得很快\n", encoding="utf8")
    fields = {"json_field": "videoList.video_detail.content, content", "csv_column": "review,text"}
    _, report = read([news, posts, reviews, other], **fields)
    assert report.documents[str(posts)] == 2000 and report.documents[str(news)] > 10
    assert report.documents[str(reviews)] == 1 and report.documents[str(other)] == 1
    assert not report.skipped
    _, report = read([other], csv_column="review,body")
    assert report.skipped["CSV without the text column"] == 1
