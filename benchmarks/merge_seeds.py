"""One accuracy record over several seeds from records of one seed each (seeds trained as separate
processes, e.g. side by side on one GPU), checked to share everything but the seed.

    python benchmarks/merge_seeds.py /work/.device/2/accuracy-resume-...-s0-m3e-small-gpu.json \\
        /work/.device/4/accuracy-resume-...-s1-m3e-small-gpu.json ... --notes "..."

The merged record is named as the script would have named a run over all the seeds (`-s0-` becomes
`-s012-`), its command says `--seeds N`, its test and dev F1 are the seeds' mean, sample sd and per-seed
values (as accuracy.seeds_figures makes them), and per-run speeds, measured beside each other, are dropped.
"""

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).parent))
from results import RESULTS, validate

OVER_SEEDS = ("test_f1", "dev_f1", "test_f1_without_boundary_rules")
SAME = ("question", "title", "dataset", "version", "machine", "setup", "date")


def merge(records: List[Dict[str, Any]], notes: str = "") -> Dict[str, Any]:
    """RETURNS: The record over the seeds of `records` (one seed each, everything else equal)."""
    for key in SAME:
        values = {json.dumps(r.get(key), sort_keys=True) for r in records}
        if len(values) > 1:
            raise ValueError(f"the records differ in {key}: {sorted(values)}")
    if any(len(r["seeds"]) != 1 for r in records):
        raise ValueError("each record must hold one seed")
    records = sorted(records, key=lambda r: r["seeds"][0])
    seeds = [r["seeds"][0] for r in records]
    first = records[0]
    figures: Dict[str, Any] = {}
    for key in OVER_SEEDS:
        if all(key in r["figures"] for r in records):
            values = [r["figures"][key]["mean"] for r in records]
            figures[key] = {"mean": round(statistics.mean(values), 2), "per_seed": values}
            if len(values) > 1:
                figures[key]["sd"] = round(statistics.stdev(values), 2)
    if all("train_s" in r["figures"] for r in records):
        train = [r["figures"]["train_s"]["median"] for r in records]
        figures["train_s"] = {"median": round(statistics.median(train)), "per_seed": train}
    if all("dev_curve" in r["figures"] for r in records):
        figures["dev_curve"] = [curve for r in records for curve in r["figures"]["dev_curve"]]
    seed_tag = "s" + "".join(map(str, seeds))
    merged = {
        **{k: v for k, v in first.items() if k not in ("figures", "notes")},
        "id": re.sub(r"-s\d+(?=-|$)", f"-{seed_tag}", first["id"], count=1),
        "command": re.sub(r"--seeds \d+", "--seeds N", first["command"]),
        "commit": first.get("commit"),
        "load": {
            "before": max((r["load"]["before"] for r in records if r["load"]["before"] is not None), default=None),
            "after": max((r["load"]["after"] for r in records if r["load"]["after"] is not None), default=None),
            "note": "the seeds' processes ran side by side; the highest load average of their records",
        },
        "seeds": seeds,
        "figures": figures,
    }
    if notes:
        merged["notes"] = notes
    problems = validate(merged)
    if problems:
        raise ValueError("; ".join(problems))
    return merged


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("records", type=Path, nargs="+", help="accuracy records of one seed each")
    parser.add_argument("--notes", default="")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    merged = merge([json.loads(p.read_text(encoding="utf8")) for p in args.records], args.notes)
    path = args.results / f"{merged['id']}.json"
    path.write_text(json.dumps(merged, ensure_ascii=False, indent=2) + "\n", encoding="utf8")
    print(f"Result written: {path}")


if __name__ == "__main__":
    main()
