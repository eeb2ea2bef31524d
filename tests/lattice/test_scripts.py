"""Traditional characters read as simplified ones (`normalize_script`), one for one."""

import pytest
import spacy
from spacy.language import Language

from spacy_flat.lattice.scripts import read_as_simplified, simplified_table
from spacy_flat.lattice.windows import Segmenter

from ..util import tiny_records

opencc = pytest.importorskip("opencc")
TRADITIONAL = "習近平在北京人民大會堂會見了美國國務卿布林肯。"
SIMPLIFIED = "习近平在北京人民大会堂会见了美国国务卿布林肯。"


def test_the_table_maps_traditional_characters_one_for_one() -> None:
    table = simplified_table()
    assert 4000 < len(table) < 4500
    assert all(len(value) == 1 for value in table.values())
    assert read_as_simplified(TRADITIONAL) == SIMPLIFIED
    # Simplified text, punctuation, Latin letters, digits and full-width forms are left as they are.
    kept = "张三在北京大学工作，ＡＢＣ abc 123。\n"
    assert read_as_simplified(kept) == kept


def test_the_segmenter_reads_simplified_and_keeps_the_offsets() -> None:
    nlp = spacy.blank("zh")
    doc = nlp.make_doc(TRADITIONAL)
    (segment,), _ = Segmenter(512, 32, normalize_script=True).segments([doc])
    assert segment.text == SIMPLIFIED and (segment.start, segment.end) == (0, len(TRADITIONAL))
    (plain,), _ = Segmenter(512, 32).segments([doc])
    assert plain.text == TRADITIONAL
    ((train_segment, _),) = Segmenter(512, 32, normalize_script=True).training_segments(doc, [(0, 3, "PER")])
    assert train_segment.text == SIMPLIFIED


def test_a_pipeline_reads_traditional_text_as_its_simplified_form(trained_nlp: Language) -> None:
    converter = opencc.OpenCC("s2t")
    texts = [record["text"] for record in tiny_records()]
    traditional = [converter.convert(text) for text in texts]
    # The tiny corpus's texts change script, not length.
    assert [len(t) for t in traditional] == [len(t) for t in texts] and traditional != texts
    ner = trained_nlp.get_pipe("flat_ner")

    def entities(batch):
        docs = list(trained_nlp.pipe(batch))
        found = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs]
        return found, [float(p) for doc in docs for p in doc.spans["flat_ner"].attrs["scores"]]

    simplified_found, simplified_scores = entities(texts)
    ner.cfg["normalize_script"] = True
    try:
        found, scores = entities(traditional)
    finally:
        ner.cfg["normalize_script"] = False
    assert any(simplified_found)
    assert found == simplified_found
    assert scores == pytest.approx(simplified_scores, abs=1e-5)
    docs = list(trained_nlp.pipe(traditional))
    assert [doc.text for doc in docs] == traditional
