"""Entity scores on character offsets, independent of tokenization."""

from collections import defaultdict
from typing import Any, Callable, Dict, Iterable, List, Optional

from spacy.scorer import PRFScore
from spacy.training import Example
from spacy.util import registry


def score_char_entities(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
    """Precision, recall and F-score of entities matched by exact character span
    and label, overall (`ents_p/r/f`) and per type (`ents_per_type`).

    examples (Iterable[Example]): Predicted and reference docs.
    RETURNS (Dict[str, Any]): The scores.
    """
    total = PRFScore()
    per_type: Dict[str, PRFScore] = defaultdict(PRFScore)
    for eg in examples:
        gold = {(e.start_char, e.end_char, e.label_) for e in eg.reference.ents}
        pred = {(e.start_char, e.end_char, e.label_) for e in eg.predicted.ents}
        for span in pred | gold:
            hit_pred, hit_gold = span in pred, span in gold
            for score in (total, per_type[span[2]]):
                score.tp += hit_pred and hit_gold
                score.fp += hit_pred and not hit_gold
                score.fn += hit_gold and not hit_pred
    if total.tp + total.fp + total.fn == 0:
        return {"ents_p": None, "ents_r": None, "ents_f": None, "ents_per_type": None}
    return {
        "ents_p": total.precision,
        "ents_r": total.recall,
        "ents_f": total.fscore,
        "ents_per_type": {label: s.to_dict() for label, s in sorted(per_type.items())},
    }


@registry.scorers("spacy-flat.char_ner_scorer.v1")
def make_char_ner_scorer() -> Callable[..., Dict[str, Any]]:
    """The component's scorer: entities matched by exact character span and label,
    whatever the tokenization, overall (`ents_p`, `ents_r`, `ents_f`) and per type
    (`ents_per_type`).

    RETURNS (Callable[..., Dict[str, Any]]): `score_char_entities`.
    """
    return score_char_entities


# The key under which a pooled corpus names each reference doc's corpus (training/corpora.py).
CORPUS_KEY = "corpus"


def score_pooled_entities(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
    """The scores of `score_char_entities` over all examples, the same for each corpus on its own
    (`ents_per_corpus`, from the reference doc's `user_data["corpus"]`), and their mean F-score
    (`ents_f_macro`), which gives every corpus the same weight whatever its size. Docs without a corpus
    count as one corpus, so on a single test set `ents_f_macro` is `ents_f`.

    examples (Iterable[Example]): Predicted and reference docs.
    RETURNS (Dict[str, Any]): The scores.
    """
    examples = list(examples)
    by_corpus: Dict[str, List[Example]] = defaultdict(list)
    for eg in examples:
        by_corpus[str(eg.reference.user_data.get(CORPUS_KEY, ""))].append(eg)
    scores = score_char_entities(examples)
    per_corpus = {name: score_char_entities(egs) for name, egs in sorted(by_corpus.items())}
    f_scores: List[Optional[float]] = [s["ents_f"] for s in per_corpus.values()]
    kept = [f for f in f_scores if f is not None]
    scores["ents_f_macro"] = sum(kept) / len(kept) if kept else None
    scores["ents_per_corpus"] = {
        name: {"p": s["ents_p"], "r": s["ents_r"], "f": s["ents_f"]} for name, s in per_corpus.items()
    }
    return scores


@registry.scorers("spacy-flat.pooled_ner_scorer.v1")
def make_pooled_ner_scorer() -> Callable[..., Dict[str, Any]]:
    """A scorer for a dev set pooled from several corpora (`spacy-flat.PooledCorpus.v1`): the scores of
    `spacy-flat.char_ner_scorer.v1`, each corpus's own (`ents_per_corpus`), and their mean F-score
    (`ents_f_macro`), to select on with every corpus weighing the same.

    RETURNS (Callable[..., Dict[str, Any]]): `score_pooled_entities`.
    """
    return score_pooled_entities
