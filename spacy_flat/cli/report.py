"""The evaluation page a person reads first: scores, errors by kind with
examples, entity-probability pictures (inline SVG, no plotting library), the
least confident entities, and samples in displaCy with a colour per label."""

import html
import warnings
from typing import Any, Dict, List, Sequence, Tuple

from spacy import displacy
from spacy.tokens import Doc
from spacy.training import Example

from ..types import CharSpan

# Colour-blind-friendly palette (Okabe-Ito, lightened for text backgrounds).
PALETTE = ("#f6c86b", "#9ccfee", "#7fd3b8", "#f9ee8c", "#86b5dc", "#f0ab7a", "#e3b3cf", "#c9c9c9")
KINDS = ("wrong type", "wrong boundary", "missed", "spurious")


def label_colors(labels: Sequence[str]) -> Dict[str, str]:
    """RETURNS (Dict[str, str]): A displaCy colour per label, stable for a label set."""
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(sorted(labels))}


def error_breakdown(examples: Sequence[Example], n_examples: int = 5) -> Dict[str, Dict[str, Any]]:
    """Errors by kind: a predicted span with the gold span but another label (wrong
    type); overlapping a gold span with other boundaries (wrong boundary); a gold
    span no prediction overlaps (missed); a prediction overlapping no gold (spurious).

    RETURNS (Dict[str, Dict[str, Any]]): Per kind, its count and a few examples.
    """
    out: Dict[str, Dict[str, Any]] = {kind: {"count": 0, "examples": []} for kind in KINDS}

    def add(kind: str, text: str, detail: str) -> None:
        out[kind]["count"] += 1
        if len(out[kind]["examples"]) < n_examples:
            out[kind]["examples"].append({"text": text[:120], "detail": detail})

    for eg in examples:
        text = eg.reference.text
        gold = {(e.start_char, e.end_char, e.label_) for e in eg.reference.ents}
        pred = {(e.start_char, e.end_char, e.label_) for e in eg.predicted.ents}
        for s, e, label in sorted(pred - gold):
            same = [g for g in gold if g[:2] == (s, e)]
            touching = [g for g in gold if g[0] < e and s < g[1]]
            if same:
                add("wrong type", text, f"{text[s:e]}: {label}, gold {same[0][2]}")
            elif touching:
                g = touching[0]
                add("wrong boundary", text, f"{text[s:e]} ({label}), gold {text[g[0] : g[1]]} ({g[2]})")
            else:
                add("spurious", text, f"{text[s:e]} ({label})")
        for s, e, label in sorted(gold - pred):
            if not any(p[0] < e and s < p[1] for p in pred):
                add("missed", text, f"{text[s:e]} ({label})")
    return out


def _svg(width: int, height: int, body: str, title: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
        f"aria-label='{html.escape(title)}'><rect width='100%' height='100%' fill='white'/>{body}</svg>"
    )


def _axes(size: int, pad: int, x_label: str, y_label: str) -> str:
    end = pad + size
    ticks = "".join(
        f"<text x='{pad + size * k / 4:.0f}' y='{end + 14}' font-size='10' text-anchor='middle'>{k / 4:.2f}</text>"
        f"<text x='{pad - 4}' y='{end - size * k / 4 + 3:.0f}' font-size='10' text-anchor='end'>{k / 4:.2f}</text>"
        for k in range(5)
    )
    return (
        f"<line x1='{pad}' y1='{end}' x2='{end}' y2='{end}' stroke='black'/>"
        f"<line x1='{pad}' y1='{pad}' x2='{pad}' y2='{end}' stroke='black'/>{ticks}"
        f"<text x='{pad + size / 2:.0f}' y='{end + 30}' font-size='11' text-anchor='middle'>{x_label}</text>"
        f"<text x='12' y='{pad + size / 2:.0f}' font-size='11' text-anchor='middle' "
        f"transform='rotate(-90 12 {pad + size / 2:.0f})'>{y_label}</text>"
    )


def reliability_svg(rows: Sequence[Dict[str, float]], size: int = 240, pad: int = 40) -> str:
    """A reliability diagram: the share correct in each probability bin, against the diagonal."""
    end = pad + size
    bars = "".join(
        f"<rect x='{pad + r['low'] * size:.1f}' y='{end - r['accuracy'] * size:.1f}' "
        f"width='{(r['high'] - r['low']) * size - 2:.1f}' height='{r['accuracy'] * size:.1f}' fill='#86b5dc'>"
        f"<title>{r['low']:.1f}-{r['high']:.1f}: {r['count']} entities, "
        f"{100 * r['accuracy']:.1f}% correct</title></rect>"
        for r in rows
    )
    diagonal = f"<line x1='{pad}' y1='{end}' x2='{end}' y2='{pad}' stroke='#d55e00' stroke-dasharray='4'/>"
    return _svg(
        size + pad + 10,
        size + pad + 40,
        bars + diagonal + _axes(size, pad, "probability", "share correct"),
        "reliability diagram",
    )


def threshold_svg(curve: Sequence[Dict[str, float]], size: int = 240, pad: int = 40) -> str:
    """Precision (blue) and recall (orange) of the entities kept at each probability threshold."""
    end = pad + size

    def line(key: str, colour: str) -> str:
        points = " ".join(f"{pad + c['threshold'] * size:.1f},{end - c[key] * size:.1f}" for c in curve)
        return f"<polyline points='{points}' fill='none' stroke='{colour}' stroke-width='2'/>"

    # Above the plot: inside it, the legend sat on the lines it names.
    legend = (
        f"<text x='{pad}' y='{pad - 12}' font-size='11' fill='#0072b2'>— precision</text>"
        f"<text x='{pad + 90}' y='{pad - 12}' font-size='11' fill='#d55e00'>— recall</text>"
    )
    body = line("p", "#0072b2") + line("r", "#d55e00") + legend + _axes(size, pad, "threshold", "P / R")
    return _svg(size + pad + 10, size + pad + 40, body, "precision and recall against the threshold")


def render(doc: Doc, colors: Dict[str, str]) -> str:
    with warnings.catch_warnings():
        # W006: a sentence with no entities is worth showing too.
        warnings.filterwarnings("ignore", message=r"\[W006\]")
        return displacy.render(doc, style="ent", page=False, jupyter=False, options={"colors": colors})


def pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def report_html(scores: Dict[str, Any], examples: List[Example], n_samples: int) -> str:
    """RETURNS (str): The whole evaluation page."""
    labels = sorted({e.label_ for eg in examples for doc in (eg.reference, eg.predicted) for e in doc.ents})
    colors = label_colors(labels)
    rows = [("all", scores["ents_p"], scores["ents_r"], scores["ents_f"])]
    rows += [(lab, s["p"], s["r"], s["f"]) for lab, s in (scores.get("ents_per_type") or {}).items()]
    table = "".join(
        f"<tr><td><span style='background:{colors.get(n, '#fff')}'>{html.escape(n)}</span></td>"
        f"<td>{pct(p)}</td><td>{pct(r)}</td><td>{pct(f)}</td></tr>"
        for n, p, r, f in rows
    )
    errors = error_breakdown(examples)
    error_rows = "".join(
        f"<tr><td>{kind}</td><td>{e['count']}</td><td>"
        + "<br>".join(html.escape(x["detail"]) + f" <small>{html.escape(x['text'])}</small>" for x in e["examples"])
        + "</td></tr>"
        for kind, e in errors.items()
    )
    parts = [
        f"<h1>flat_ner on {html.escape(scores['data'])}</h1>",
        f"<table class='s'><tr><th>type</th><th>P</th><th>R</th><th>F</th></tr>{table}</table>",
        f"<p>Span F {pct(scores.get('span_f'))}, Type Acc {pct(scores.get('type_acc'))}; "
        f"{scores['speed']['chars_per_second']:.0f} characters/s.</p>",
        f"<h2>Errors</h2><table class='s'><tr><th>kind</th><th>count</th><th>examples</th></tr>{error_rows}</table>",
    ]
    confidence = scores.get("confidence")
    if confidence:
        least = "".join(
            f"<tr><td>{r['p']:.3f}</td><td>{html.escape(r['text'])}</td><td>{html.escape(r['label'])}</td>"
            f"<td>{'✓' if r['correct'] else '✗'}</td><td><small>{html.escape(r['context'])}</small></td></tr>"
            for r in confidence["least_confident"]
        )
        parts += [
            f"<h2>Entity probabilities</h2><p>Expected calibration error {confidence['ece']:.4f}.</p>",
            f"<div>{reliability_svg(confidence['reliability'])} {threshold_svg(confidence['curve'])}</div>",
            f"<h3>Least confident</h3><table class='s'><tr><th>p</th><th>entity</th><th>type</th><th></th>"
            f"<th>sentence</th></tr>{least}</table>",
        ]
    wrong = [eg for eg in examples if _ents(eg.reference) != _ents(eg.predicted)]
    right = [eg for eg in examples if _ents(eg.reference) == _ents(eg.predicted)]
    chosen = (wrong[: n_samples * 2 // 3] + right)[:n_samples]
    samples = "".join(
        f"<tr><td>{'✗' if eg in wrong else '✓'}</td><td>{render(eg.reference, colors)}</td>"
        f"<td>{render(eg.predicted, colors)}</td></tr>"
        for eg in chosen
    )
    parts += [
        f"<h2>Samples</h2><p>{len(wrong)} of {len(examples)} sentences have at least one error; errors first.</p>",
        f"<table class='samples'><colgroup><col style='width:2em'><col><col></colgroup>"
        f"<tr><th></th><th>gold</th><th>predicted</th></tr>{samples}</table>",
    ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>flat_ner evaluation</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{vertical-align:top;border-bottom:1px solid #ddd;"
        "padding:4px}table.s td,table.s th{padding:4px 10px;text-align:left}"
        # Two equal columns that wrap long entities instead of running into each other.
        "table.samples{table-layout:fixed;width:100%}table.samples td{overflow-wrap:anywhere}</style></head><body>"
        + "".join(parts)
        + "</body></html>"
    )


def _ents(doc: Doc) -> List[CharSpan]:
    return [(e.start_char, e.end_char, e.label_) for e in doc.ents]


def thresholds_curve(outcomes: Sequence[Tuple[float, bool]], n_gold: int, steps: int = 20) -> List[Dict[str, float]]:
    """RETURNS (List[Dict[str, float]]): Precision and recall at thresholds 0, 1/steps, …, 1."""
    curve = []
    for k in range(steps + 1):
        t = k / steps
        kept = [c for p, c in outcomes if p >= t]
        curve.append(
            {"threshold": t, "p": sum(kept) / len(kept) if kept else 1.0, "r": sum(kept) / n_gold if n_gold else 0.0}
        )
    return curve
