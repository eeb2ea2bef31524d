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


UNER = SHARED / "data" / "uner-gsdsimp"


def test_words_a_line_become_characters_in_their_entities(tmp_path):
    """Universal NER's .iob2: a word a line with IOB2 tags over words, `# text =` checked against the words."""
    (tmp_path / "t.iob2").write_text(
        "# sent_id = a\n# text = 自从兴建人文大楼\n1\t自从\tO\t-\t-\n2\t兴建\tO\t-\t-\n"
        "3\t人文\tB-LOC\t-\tx\n4\t大楼\tI-LOC\t-\tx\n\n# text = 李四在北京\n1\t李四\tB-PER\t-\t-\n"
        "2\t在\tO\t-\t-\n3\t北京\tI-LOC\t-\t-\n",
        encoding="utf8",
    )
    report, docs, _ = run(tmp_path / "t.iob2", tmp_path / "out.spacy", file_format="words")
    assert [d.text for d in docs] == ["自从兴建人文大楼", "李四在北京"]
    assert [[(e.text, e.label_) for e in d.ents] for d in docs] == [
        [("人文大楼", "LOC")],
        [("李四", "PER"), ("北京", "LOC")],
    ]
    assert report.repairs == [f"{tmp_path / 't.iob2'}:11: inside tag with no begin tag: I-LOC starts an entity"]


@pytest.mark.parametrize(
    "text,error",
    [
        ("# text = 李四\n1\t李四\tB-PER\n2 王五\n", r"t\.iob2:3: expected '<id><TAB><word><TAB><tag>'"),
        ("1\t李四\tPER\n", r"t\.iob2:1: malformed IOB2 tag 'PER'"),
        ("# text = 李四来\n1\t李四\tB-PER\n", r"t\.iob2:1: the words of this sentence do not spell its text"),
    ],
)
def test_a_malformed_word_file_names_its_line(tmp_path, text, error):
    (tmp_path / "t.iob2").write_text(text, encoding="utf8")
    with pytest.raises(ConversionError, match=error):
        run(tmp_path / "t.iob2", tmp_path / "out.spacy", file_format="words")


def test_labels_kept_after_renaming_and_the_rest_counted(tmp_path, capsys):
    """Weibo's named mentions as PER, LOC and ORG (GPE a place), its nominal mentions left out."""
    (tmp_path / "w.txt").write_text(
        "张 B-PER.NAM\n三 I-PER.NAM\n在 O\n北 B-GPE.NAM\n京 I-GPE.NAM\n老 B-PER.NOM\n师 I-PER.NOM\n", "utf8"
    )
    args = ["convert", str(tmp_path / "w.txt"), str(tmp_path / "out.spacy")]
    rename = "PER.NAM=PER,GPE.NAM=LOC,LOC.NAM=LOC,ORG.NAM=ORG"
    assert main([*args, "--rename-labels", rename, "--keep-labels", "PER,LOC,ORG"]) == 0
    docs = list(DocBin().from_disk(tmp_path / "out.spacy").get_docs(Vocab()))
    assert [(e.text, e.label_) for e in docs[0].ents] == [("张三", "PER"), ("北京", "LOC")]
    assert "1 label PER.NOM left out" in capsys.readouterr().err


@pytest.mark.skipif(not UNER.exists(), reason="../shared/data/uner-gsdsimp is not here")
@pytest.mark.parametrize("split,counts", [("train", (3997, 6118)), ("dev", (500, 753)), ("test", (500, 763))])
def test_shared_uner_counts(tmp_path, split, counts):
    """DATASETS.md's counts of UNER GSDSimp: sentences and entities, none repaired."""
    report, docs, _ = run(UNER / f"zh_gsdsimp-ud-{split}.iob2", tmp_path / "out.spacy", file_format="words")
    assert (len(docs), sum(len(d.ents) for d in docs)) == counts and report.repairs == []
