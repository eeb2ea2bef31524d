"""`calibrate`: fit the temperature of a pipeline's entity probabilities on dev,
save it with the pipeline, and say what it does (on test too, if given)."""

import json
from pathlib import Path
from typing import Annotated, Any, Dict, List, Optional, Sequence, Set, Tuple

import spacy
from spacy.cli._util import Arg, Opt
from spacy.language import Language
from spacy.tokens import Doc, DocBin

from ..decoding.calibration import (
    Outcome,
    expected_calibration_error,
    fit_temperature,
    precision_recall_at,
    reliability,
)
from ..errors import FlatError
from ..pipeline.confidence import Decoded, decode_docs
from ..pipeline.flat_ner import FlatNER
from ..types import CharSpan
from .app import flat_cli

THRESHOLDS = (0.5, 0.7, 0.9)


class Scored:
    """A corpus decoded once by a pipeline's `flat_ner`, to score its entity
    probabilities at any temperature without running the model again."""

    def __init__(self, nlp: Language, ner: FlatNER, data: Sequence[Path], batch_size: int = 128) -> None:
        gold = [doc for path in data for doc in DocBin().from_disk(path).get_docs(nlp.vocab)]
        self.gold: List[Set[CharSpan]] = [{(e.start_char, e.end_char, e.label_) for e in d.ents} for d in gold]
        self.n_gold = sum(len(g) for g in self.gold)
        # One character a token, as `evaluate` reads the data; the components before flat_ner run first.
        docs = (Doc(nlp.vocab, words=[t.text for t in d], spaces=[False] * len(d)) for d in gold)
        others = [name for name, _ in nlp.pipeline if name != ner.name]
        ready = list(nlp.pipe(docs, disable=[ner.name], batch_size=batch_size)) if others else list(docs)
        parts = (ner.segmenter, ner.tagger, ner.boundary_rules, ner.tag_set)
        # Scored at each temperature `outcomes` asks for, so none at decoding.
        starts = range(0, len(ready), batch_size)
        self.batches: List[Decoded] = [
            decode_docs(ready[i : i + batch_size], *parts, probabilities=False) for i in starts
        ]

    def outcomes(self, temperature: float) -> List[Outcome]:
        """RETURNS (List[Outcome]): (probability, correct) of every predicted entity."""
        found = [doc for batch in self.batches for doc in batch.scored(temperature)]
        return [(p, (s, e, label) in gold) for spans, gold in zip(found, self.gold) for s, e, label, p in spans]


def describe(outcomes: Sequence[Outcome], n_gold: int) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): ECE, the reliability bins and P/R at `THRESHOLDS`."""
    at = {str(t): dict(zip(("p", "r", "kept"), precision_recall_at(outcomes, n_gold, t))) for t in THRESHOLDS}
    return {"ece": expected_calibration_error(outcomes), "reliability": reliability(outcomes), "thresholds": at}


def calibrate(
    model: str, dev: Sequence[Path], output: Optional[Path] = None, test: Optional[Path] = None
) -> Tuple[float, Dict[str, Any]]:
    """Fit the temperature on `dev` (one DocBin, or several pooled), write the pipeline with it to `output`.

    RETURNS (Tuple[float, Dict[str, Any]]): The temperature and a report: ECE
        and reliability before and after, on dev and (if given) test.
    """
    nlp = spacy.load(model)
    ner = next((c for _, c in nlp.pipeline if isinstance(c, FlatNER)), None)
    if ner is None:
        raise FlatError(f"{model}: the pipeline has no flat_ner component")
    if ner.cfg.get("scores_key") is None:
        raise FlatError(f"{model}: entity probabilities are off (scores_key = null); set a key to calibrate them")
    if isinstance(dev, (str, Path)):
        dev = [Path(dev)]
    scored = Scored(nlp, ner, dev)
    named = ", ".join(str(path) for path in dev)
    if not scored.outcomes(1.0):
        raise FlatError(f"{named}: the pipeline predicts no entities there, so there is nothing to calibrate")
    temperature = fit_temperature(scored.outcomes)
    report: Dict[str, Any] = {"temperature": temperature, "dev_sets": named}
    for name, data in (("dev", scored), ("test", Scored(nlp, ner, [test]) if test is not None else None)):
        if data is not None:
            report[name] = {
                "before": describe(data.outcomes(1.0), data.n_gold),
                "after": describe(data.outcomes(temperature), data.n_gold),
            }
    ner.cfg["temperature"] = temperature
    if output is not None:
        nlp.to_disk(output)
        (output / "calibration.json").write_text(json.dumps(report, indent=2), encoding="utf8")
    return temperature, report


@flat_cli.command("calibrate")
def calibrate_cli(
    model: Annotated[str, Arg()],
    dev: Annotated[List[Path], Arg(help="the dev DocBin, or several to pool")],
    output: Annotated[Optional[Path], Opt("--output", help="write the calibrated pipeline here")] = None,
    test: Annotated[Optional[Path], Opt("--test", help="also report calibration on this DocBin")] = None,
) -> None:
    """fit the temperature of the entity probabilities on dev (one DocBin or several pooled) and save it with
    the pipeline"""
    temperature, report = calibrate(model, dev, output, test)
    print(f"temperature {temperature:.3f}")
    for split in ("dev", "test"):
        if split in report:
            ece = report[split]["before"]["ece"], report[split]["after"]["ece"]
            print(f"{split}: expected calibration error {ece[0]:.4f} before, {ece[1]:.4f} after")
