"""The converter: the shared corpora's counts, repairs reported, malformed input named."""

import io
from pathlib import Path

import pytest
from spacy.tokens import DocBin
from spacy.vocab import Vocab

from spacy_flat.cli.convert import convert
from spacy_flat.cli.main import main
from spacy_flat.errors import ConversionError

from ..util import SHARED, TINY, needs_shared

EXPECTED = {
    "resume/train.char.bmes": (3821, 13440),
    "resume/dev.char.bmes": (463, 1497),
    "resume/test.char.bmes": (477, 1630),
    "weibo/weiboNER_2nd_conll.train": (1350, 1895),
    "weibo/weiboNER_2nd_conll.dev": (270, 389),
    "weibo/weiboNER_2nd_conll.test": (270, 418),
    "msra/test.char.bmes": (4365, 6181),
}


def run(path: Path, out: Path, **kwargs):
    log = io.StringIO()
    report, _n_train, _n_dev = convert(path, out, log=log, **kwargs)
    docs = list(DocBin().from_disk(out).get_docs(Vocab()))
    return report, docs, log.getvalue()


@needs_shared
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shared_counts(name, tmp_path):
    report, docs, log = run(SHARED / "data" / name, tmp_path / "out.spacy")
    sentences, entities = EXPECTED[name]
    assert len(docs) == report.sentences == sentences
    assert sum(len(d.ents) for d in docs) == report.entities_written == entities
    assert all(d.text == "".join(t.text for t in d) and not any(t.whitespace_ for t in d) for d in docs)
    assert f"{sentences} sentences" in log


@needs_shared
def test_shared_repairs_are_each_reported(tmp_path):
    report, _, log = run(SHARED / "data/weibo/weiboNER_2nd_conll.train", tmp_path / "o.spacy")
    assert (
        report.repair_kinds["inside tag with no begin tag"] + report.repair_kinds["entity type switched mid-span"] == 10
    )
    assert log.count("repair ") == len(report.repairs)
    report, _, _ = run(SHARED / "data/resume/train.char.bmes", tmp_path / "r.spacy")
    assert report.repair_kinds == {"entity cut by a sentence break": 4}


@needs_shared
@pytest.mark.slow
def test_msra_train_dev_split(tmp_path):
    _report, docs, _ = run(
        SHARED / "data/msra/train_dev.char.bmes",
        tmp_path / "train.spacy",
        dev_last=4636,
        dev_output=tmp_path / "dev.spacy",
    )
    dev = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(Vocab()))
    assert (len(docs), len(dev)) == (46364 - 4636, 4636)
    assert sum(len(d.ents) for d in docs + dev) == 74703


@pytest.mark.parametrize(
    "lines,scheme",
    [
        (["张 B-PER", "三 E-PER", "在 O", "京 S-LOC"], "BIOES"),
        (["张 B-PER", "三 I-PER", "在 O", "京 B-LOC"], "BIO"),
        (["张 B-PER", "伟 M-PER", "三 E-PER", "京 S-LOC"], "BMES"),
        (["张\tB-PER", "三\tI-PER", "在\tO", "京\tB-LOC"], "BIO"),
    ],
)
def test_schemes_detected(tmp_path, lines, scheme):
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf8")
    _, docs, _ = run(tmp_path / "in.txt", tmp_path / "o.spacy")
    assert [(e.text, e.label_) for e in docs[0].ents][-1] == ("京", "LOC")
    assert docs[0].ents[0].label_ == "PER"


def test_malformed_line_names_file_and_line(tmp_path):
    (tmp_path / "bad.txt").write_text("张 B-PER\n三 E-PER\n\n在\n", encoding="utf8")
    with pytest.raises(ConversionError, match=r"bad\.txt:4"):
        run(tmp_path / "bad.txt", tmp_path / "o.spacy")
    (tmp_path / "bad2.txt").write_text("张 X-PER\n", encoding="utf8")
    with pytest.raises(ConversionError, match=r"bad2\.txt:1: malformed tag"):
        run(tmp_path / "bad2.txt", tmp_path / "o.spacy")


def test_bio_repairs_are_reported_with_lines(tmp_path):
    (tmp_path / "in.txt").write_text("张 I-PER\n三 I-PER\n在 O\n京 I-LOC\n北 I-ORG\n", encoding="utf8")
    _report, docs, log = run(tmp_path / "in.txt", tmp_path / "o.spacy")
    assert [(e.text, e.label_) for e in docs[0].ents] == [("张三", "PER"), ("京", "LOC"), ("北", "ORG")]
    assert "in.txt:1: entity cut by a sentence break" in log
    assert "in.txt:4: inside tag with no begin tag" in log
    assert "in.txt:5: entity type switched mid-span" in log


def test_jsonl_and_command_line(tmp_path, capsys):
    assert main(["convert", str(TINY), str(tmp_path / "tiny.spacy")]) == 0
    docs = list(DocBin().from_disk(tmp_path / "tiny.spacy").get_docs(Vocab()))
    assert len(docs) == 10 and [e.text for e in docs[0].ents] == ["张伟", "北京大学"]
    assert "10 sentences, 19 entities read, 19 written" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"text": "北京", "label": {"LOC": {"上海": [[0, 1]]}}}\n', encoding="utf8")
    assert main(["convert", str(tmp_path / "bad.jsonl"), str(tmp_path / "x.spacy")]) == 1
    assert "bad.jsonl:1: span [0, 1] is '北京', not '上海'" in capsys.readouterr().err


def test_labels_renamed_and_counted(tmp_path, capsys):
    """MSRA's NR, NS, NT become PER, LOC, ORG; each rename is counted in the summary."""
    (tmp_path / "msra.bmes").write_text(
        "张 B-NR\n三 E-NR\n在 O\n上 B-NS\n海 E-NS\n\n新 B-NT\n华 M-NT\n社 E-NT\n", "utf8"
    )
    args = ["convert", str(tmp_path / "msra.bmes"), str(tmp_path / "out.spacy")]
    assert main([*args, "--rename-labels", "NR=PER,NS=LOC,NT=ORG"]) == 0
    docs = list(DocBin().from_disk(tmp_path / "out.spacy").get_docs(Vocab()))
    assert [[(e.text, e.label_) for e in d.ents] for d in docs] == [
        [("张三", "PER"), ("上海", "LOC")],
        [("新华社", "ORG")],
    ]
    assert "1 label NR renamed PER" in capsys.readouterr().err
    assert main([*args, "--rename-labels", "NR"]) == 1
