"""Evaluate a pipeline on a DocBin: scores as JSON and Markdown, samples as HTML."""

import json
import time
from pathlib import Path
from typing import Annotated, Any, Dict, List, Optional, Set

import spacy
from spacy.cli._util import Arg, Opt
from spacy.language import Language
from spacy.scorer import PRFScore
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from ..errors import FlatError
from ..pipeline.flat_ner import FlatNER
from ..pipeline.scorer import score_char_entities
from ..types import CharSpan
from .app import flat_cli
from .report import report_html, thresholds_curve


def span_scores(examples: List[Example]) -> Dict[str, float]:
    """The paper's Table 3 metrics: Span F (boundaries only, type ignored) and
    Type Acc (full-correct predictions / span-correct predictions)."""
    span = PRFScore()
    span_correct = full_correct = 0
    for eg in examples:
        gold: Set[CharSpan] = {(e.start_char, e.end_char, e.label_) for e in eg.reference.ents}
        pred: Set[CharSpan] = {(e.start_char, e.end_char, e.label_) for e in eg.predicted.ents}
        gold_b = {(s, e) for s, e, _ in gold}
        pred_b = {(s, e) for s, e, _ in pred}
        span.tp += len(gold_b & pred_b)
        span.fp += len(pred_b - gold_b)
        span.fn += len(gold_b - pred_b)
        span_correct += sum((s, e) in gold_b for s, e, _ in pred)
        full_correct += len(gold & pred)
    return {
        "span_p": span.precision,
        "span_r": span.recall,
        "span_f": span.fscore,
        "type_acc": full_correct / span_correct if span_correct else 0.0,
    }


def evaluate(
    model: str, data: Path, output: Path, *, n_samples: int = 30, gpu_id: int = -1, boundary_rules: bool = True
) -> Dict[str, Any]:
    """Score `model` on `data`; write scores.json, scores.md and samples.html to `output`.

    boundary_rules (bool): False decodes every `flat_ner` without its learned
        entity-boundary rules, to measure what they do.
    RETURNS (Dict[str, Any]): The scores.
    """
    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    nlp = spacy.load(model)
    for _, component in nlp.pipeline:
        cfg = getattr(component, "cfg", {})
        if not boundary_rules and "constrain_boundaries" in cfg:
            cfg["constrain_boundaries"] = False
    gold_docs = list(DocBin().from_disk(data).get_docs(nlp.vocab))
    start = time.perf_counter()
    predicted = list(nlp.pipe(Doc(nlp.vocab, words=[t.text for t in d], spaces=[False] * len(d)) for d in gold_docs))
    seconds = time.perf_counter() - start
    examples = [Example(p, g) for p, g in zip(predicted, gold_docs)]
    scores: Dict[str, Any] = {**score_char_entities(examples), **span_scores(examples)}
    n_chars = sum(len(d.text) for d in gold_docs)
    scores["speed"] = {"docs_per_second": len(gold_docs) / seconds, "chars_per_second": n_chars / seconds}
    scores["data"] = str(data)
    confidence = entity_confidence(nlp, examples)
    if confidence is not None:
        scores["confidence"] = confidence
    output.mkdir(parents=True, exist_ok=True)
    (output / "scores.json").write_text(json.dumps(scores, indent=2, ensure_ascii=False), encoding="utf8")
    (output / "scores.md").write_text(markdown_table(scores), encoding="utf8")
    (output / "samples.html").write_text(report_html(scores, examples, n_samples), encoding="utf8")
    return scores


@flat_cli.command("evaluate")
def evaluate_cli(
    model: Annotated[str, Arg()],
    data: Annotated[Path, Arg()],
    output: Annotated[Path, Arg()],
    gpu_id: Annotated[int, Opt("--gpu-id")] = -1,
    samples: Annotated[int, Opt("--samples")] = 30,
    no_boundary_rules: Annotated[
        bool, Opt("--no-boundary-rules", help="decode without the entity-boundary rules learned in training")
    ] = False,
) -> None:
    """score a pipeline: JSON, Markdown and an HTML sample page"""
    scores = evaluate(model, data, output, n_samples=samples, gpu_id=gpu_id, boundary_rules=not no_boundary_rules)
    print((output / "scores.md").read_text(encoding="utf8"))
    if scores["ents_f"] is None:
        raise FlatError("the data holds no entities to score")


def entity_confidence(nlp: Language, examples: List[Example]) -> Optional[Dict[str, Any]]:
    """Calibration of the entity probabilities: ECE, reliability bins, precision
    and recall at thresholds, and the least confident entities; None without scores."""
    from .calibrate import describe

    keys = [c.cfg.get("scores_key") for _, c in nlp.pipeline if isinstance(c, FlatNER)]
    key = keys[0] if keys else None
    if key is None:
        return None
    outcomes, least = [], []
    for eg in examples:
        gold = set(_ents(eg.reference))
        group = eg.predicted.spans.get(key)
        for span, prob in zip(group or [], group.attrs.get("scores", []) if group is not None else []):
            right = (span.start_char, span.end_char, span.label_) in gold
            outcomes.append((float(prob), right))
            least.append((float(prob), span.text, span.label_, right, eg.predicted.text[:80]))
    n_gold = sum(len(eg.reference.ents) for eg in examples)
    least.sort(key=lambda row: row[0])
    rows = [{"p": p, "text": t, "label": lab, "correct": c, "context": ctx} for p, t, lab, c, ctx in least[:10]]
    return {**describe(outcomes, n_gold), "least_confident": rows, "curve": thresholds_curve(outcomes, n_gold)}


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def markdown_table(scores: Dict[str, Any]) -> str:
    lines = [
        f"Scores on `{scores['data']}`",
        "",
        "| | P | R | F |",
        "|---|---|---|---|",
        f"| **all** | {_pct(scores['ents_p'])} | {_pct(scores['ents_r'])} | {_pct(scores['ents_f'])} |",
    ]
    for label, s in (scores.get("ents_per_type") or {}).items():
        lines.append(f"| {label} | {_pct(s['p'])} | {_pct(s['r'])} | {_pct(s['f'])} |")
    lines += [
        "",
        "| Span F | Type Acc |",
        "|---|---|",
        f"| {_pct(scores['span_f'])} | {_pct(scores['type_acc'])} |",
        "",
        f"Speed: {scores['speed']['chars_per_second']:.0f} characters/s, "
        f"{scores['speed']['docs_per_second']:.1f} docs/s (nlp.pipe).",
        "",
    ]
    confidence = scores.get("confidence")
    if confidence:
        lines += [
            f"Entity probabilities: expected calibration error {confidence['ece']:.4f}.",
            "",
            "| threshold | P | R | entities kept |",
            "|---|---|---|---|",
            *(f"| {t} | {_pct(v['p'])} | {_pct(v['r'])} | {v['kept']} |" for t, v in confidence["thresholds"].items()),
            "",
            "| probability bin | entities | mean probability | correct |",
            "|---|---|---|---|",
            *(
                f"| {r['low']:.1f}–{r['high']:.1f} | {r['count']} | {r['confidence']:.3f} | {r['accuracy']:.3f} |"
                for r in confidence["reliability"]
            ),
            "",
        ]
    return "\n".join(lines)


def _ents(doc: Doc) -> List[CharSpan]:
    return [(e.start_char, e.end_char, e.label_) for e in doc.ents]
