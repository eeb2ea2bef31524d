"""The pooled corpus reader and the scorer that scores each of its corpora."""

from collections import Counter
from pathlib import Path
from typing import Dict, List

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import registry

from spacy_flat.pipeline.scorer import score_char_entities, score_pooled_entities
from spacy_flat.training.corpora import create_pooled_corpus, pooled_counts

SIZES = {"msra": 41728, "weibo": 1350, "resume": 3821, "uner": 3997}


def test_pooled_counts_alpha_one_reads_each_corpus_once() -> None:
    assert pooled_counts(SIZES, 1.0) == SIZES


def test_pooled_counts_alpha_zero_gives_every_corpus_the_largest_size() -> None:
    assert pooled_counts(SIZES, 0.0) == {name: 41728 for name in SIZES}


def test_pooled_counts_square_root_shares() -> None:
    counts = pooled_counts(SIZES, 0.5)
    assert counts["msra"] == 41728
    total = sum(counts.values())
    # Each share is proportional to the square root of the corpus's size (to rounding).
    roots = {name: size**0.5 for name, size in SIZES.items()}
    for name in SIZES:
        assert counts[name] / total == pytest.approx(roots[name] / sum(roots.values()), abs=1e-4)
    assert 0.55 < counts["msra"] / total < 0.57


def test_pooled_counts_never_drop_examples() -> None:
    # A corpus whose share is below its size keeps all of it.
    assert pooled_counts({"a": 10, "b": 9}, 0.0) == {"a": 10, "b": 10}
    assert pooled_counts({"a": 10, "b": 9}, 1.0) == {"a": 10, "b": 9}


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_pooled_counts_refuse_alpha_outside_0_1(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha"):
        pooled_counts(SIZES, alpha)


def test_pooled_counts_name_an_empty_corpus() -> None:
    with pytest.raises(ValueError, match="weibo"):
        pooled_counts({"msra": 3, "weibo": 0}, 0.5)


def write_corpus(path: Path, texts: List[str]) -> Path:
    nlp = spacy.blank("zh")
    docs = DocBin()
    for text in texts:
        docs.add(nlp.make_doc(text))
    docs.to_disk(path)
    return path


@pytest.fixture
def two_corpora(tmp_path: Path) -> Dict[str, Path]:
    return {
        "big": write_corpus(tmp_path / "big.spacy", [f"北京{i}号" for i in range(7)]),
        "small": write_corpus(tmp_path / "small.spacy", ["上海一", "上海二", "上海三"]),
    }


def read(paths: Dict[str, Path], alpha: float, seed: int = 0) -> List[Example]:
    nlp = spacy.blank("zh")
    reader = registry.readers.get("spacy-flat.PooledCorpus.v1")(paths=paths, alpha=alpha, seed=seed)
    return list(reader(nlp))


def test_pooled_corpus_repeats_the_smaller_corpus_and_tags_each_doc(two_corpora: Dict[str, Path]) -> None:
    examples = read(two_corpora, alpha=0.0)
    corpora = Counter(eg.reference.user_data["corpus"] for eg in examples)
    assert corpora == {"big": 7, "small": 7}
    texts = Counter(eg.reference.text for eg in examples if eg.reference.user_data["corpus"] == "small")
    # 7 = 2 × 3 + 1: every sentence twice, one of them a third time.
    assert sorted(texts.values()) == [2, 2, 3]
    assert all(eg.reference.text.startswith("北京") for eg in examples if eg.reference.user_data["corpus"] == "big")


def test_pooled_corpus_is_the_same_list_at_every_call(two_corpora: Dict[str, Path]) -> None:
    nlp = spacy.blank("zh")
    reader = create_pooled_corpus(paths=two_corpora, alpha=0.0, seed=3)
    assert [eg.reference.text for eg in reader(nlp)] == [eg.reference.text for eg in reader(nlp)]


def test_pooled_corpus_remainder_follows_the_seed(two_corpora: Dict[str, Path]) -> None:
    drawn = set()
    for seed in range(8):
        examples = read(two_corpora, 0.0, seed)
        small = [eg.reference.text for eg in examples if eg.reference.user_data["corpus"] == "small"]
        drawn.add(Counter(small).most_common(1)[0][0])
    assert len(drawn) > 1


def test_pooled_corpus_alpha_one_reads_every_doc_once(two_corpora: Dict[str, Path]) -> None:
    assert len(read(two_corpora, alpha=1.0)) == 10


def test_pooled_corpus_needs_a_corpus() -> None:
    with pytest.raises(ValueError, match="at least one corpus"):
        create_pooled_corpus(paths={})


def example(text: str, gold: List[tuple], pred: List[tuple], corpus: str = "") -> Example:
    nlp = spacy.blank("zh")
    reference = nlp.make_doc(text)
    reference.ents = [reference.char_span(s, e, label=lab) for s, e, lab in gold]
    if corpus:
        reference.user_data["corpus"] = corpus
    predicted = nlp.make_doc(text)
    predicted.ents = [predicted.char_span(s, e, label=lab) for s, e, lab in pred]
    return Example(predicted, reference)


def test_pooled_scorer_means_the_corpora_f_scores() -> None:
    examples = [
        # Corpus a: one of one found (F 1.0).
        example("我在北京", [(2, 4, "LOC")], [(2, 4, "LOC")], "a"),
        # Corpus b: three gold, one found, none wrong (P 1, R 1/3, F 0.5).
        example("张三李四王五", [(0, 2, "PER"), (2, 4, "PER"), (4, 6, "PER")], [(0, 2, "PER")], "b"),
    ]
    scores = score_pooled_entities(examples)
    assert scores["ents_per_corpus"]["a"]["f"] == pytest.approx(1.0)
    assert scores["ents_per_corpus"]["b"]["f"] == pytest.approx(0.5)
    assert scores["ents_f_macro"] == pytest.approx(0.75)
    # The pooled F over all four gold entities: P 1, R 1/2.
    assert scores["ents_f"] == pytest.approx(2 / 3)
    assert scores["ents_per_type"] == score_char_entities(examples)["ents_per_type"]


def test_pooled_scorer_on_one_unnamed_corpus_is_the_plain_scorer() -> None:
    examples = [example("张三李四", [(0, 2, "PER"), (2, 4, "PER")], [(0, 2, "PER"), (2, 3, "PER")])]
    scores = score_pooled_entities(examples)
    assert scores["ents_f_macro"] == pytest.approx(scores["ents_f"]) == pytest.approx(0.5)
    assert list(scores["ents_per_corpus"]) == [""]


def test_pooled_scorer_leaves_out_a_corpus_with_no_entities() -> None:
    examples = [
        example("我在北京", [(2, 4, "LOC")], [(2, 4, "LOC")], "a"),
        example("今天很好", [], [], "b"),
    ]
    scores = score_pooled_entities(examples)
    assert scores["ents_per_corpus"]["b"]["f"] is None
    assert scores["ents_f_macro"] == pytest.approx(1.0)
