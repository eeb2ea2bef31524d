"""Entity scores on character offsets, independent of tokenization."""

from collections import defaultdict
from typing import Any, Callable, Dict, Iterable

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
