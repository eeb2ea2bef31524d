"""`model-card`: the meta.json that `spacy package --meta-path` packages a pipeline with: its sources and their
licences from a hand-written file, and its precision, recall and F-score per label on each test set from the
scores that `evaluate` wrote, as a table in the card's notes (spaCy's package README shows them)."""

import json
from pathlib import Path
from typing import Annotated, Any, Dict, List, Optional

from spacy.cli._util import Arg, Opt

from ..errors import FlatError
from .app import flat_cli

REQUIRED = ("name", "description", "license", "sources")


def _pct(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def read_scores(metrics: Path) -> Dict[str, Dict[str, Any]]:
    """RETURNS (Dict[str, Dict[str, Any]]): Each test set's scores: `metrics/<name>/scores.json` by name."""
    found = {path.parent.name: path for path in sorted(metrics.glob("*/scores.json"))}
    if not found:
        raise FlatError(f"{metrics}: no <test set>/scores.json here; run `evaluate` into {metrics}/<name> first")
    scores = {}
    for name, path in found.items():
        try:
            scores[name] = json.loads(path.read_text(encoding="utf8"))
        except json.JSONDecodeError as err:
            raise FlatError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
        if scores[name].get("ents_per_type") is None:
            raise FlatError(f"{path}: no `ents_per_type` scores in it")
    return scores


def score_table(scores: Dict[str, Dict[str, Any]], titles: Dict[str, str]) -> str:
    """RETURNS (str): A Markdown table of P, R and F per label and overall, a row per test set and label."""
    lines = ["| test set | label | P | R | F |", "|---|---|---|---|---|"]
    for name, data in scores.items():
        title = titles.get(name, name)
        for label, prf in sorted(data["ents_per_type"].items()):
            lines.append(f"| {title} | {label} | {_pct(prf['p'])} | {_pct(prf['r'])} | {_pct(prf['f'])} |")
        lines.append(
            f"| {title} | **all** | {_pct(data['ents_p'])} | {_pct(data['ents_r'])} | **{_pct(data['ents_f'])}** |"
        )
    return "\n".join(lines)


def model_card(template: Path, metrics: Path) -> Dict[str, Any]:
    """The meta of a packaged pipeline: `template`'s fields, with the test scores added to its notes and to
    `test_performance`.

    template (Path): JSON with at least name, description, license and sources (name, url, license each),
        and optionally `test_sets` (a title for each folder under `metrics`) and `notes`.
    metrics (Path): A folder of `evaluate` outputs, one subfolder a test set.
    RETURNS (Dict[str, Any]): The meta.
    """
    try:
        meta: Dict[str, Any] = json.loads(template.read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise FlatError(f"{template}:{err.lineno}: not valid JSON ({err.msg})") from None
    missing = [key for key in REQUIRED if not meta.get(key)]
    if missing:
        raise FlatError(f"{template}: the model card needs {', '.join(missing)}")
    for i, source in enumerate(meta["sources"]):
        absent = [key for key in ("name", "url", "license") if not source.get(key)]
        if absent:
            raise FlatError(f"{template}: source {i + 1} ({source.get('name', '?')}) has no {', '.join(absent)}")
    titles: Dict[str, str] = meta.pop("test_sets", {})
    scores = read_scores(metrics)
    table = score_table(scores, titles)
    notes: List[str] = [meta.get("notes", "").strip(), "### Test scores", table]
    meta["notes"] = "\n\n".join(part for part in notes if part)
    meta["test_performance"] = {
        titles.get(name, name): {
            "ents_p": data["ents_p"],
            "ents_r": data["ents_r"],
            "ents_f": data["ents_f"],
            "ents_per_type": data["ents_per_type"],
        }
        for name, data in scores.items()
    }
    return meta


@flat_cli.command("model-card")
def model_card_cli(
    template: Annotated[Path, Arg(help="the card's sources, licences and description (JSON)")],
    metrics: Annotated[Path, Arg(help="evaluate's outputs, one folder a test set")],
    output: Annotated[Path, Opt("--output", help="the meta.json to write")] = Path("meta.json"),
) -> None:
    """write the meta.json for `spacy package --meta-path`: sources, licences and P/R/F per label on each test
    set"""
    meta = model_card(template, metrics)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf8")
    print(f"wrote {output}: {len(meta['sources'])} sources, {len(meta['test_performance'])} test sets")
