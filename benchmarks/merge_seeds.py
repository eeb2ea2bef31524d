"""One accuracy record over several seeds from records of one seed each (seeds trained as separate
processes, e.g. side by side on one GPU), checked to share everything but the seed.

    python benchmarks/merge_seeds.py FETCHED/accuracy-resume-...-s0-m3e-small-gpu.json \\
        FETCHED/accuracy-resume-...-s1-m3e-small-gpu.json ... --notes "..." --load-note "..."

The merged record is named as the script would have named a run over all the seeds (`-s0-` becomes
`-s012-`), its command says `--seeds N`, its test and dev F1 are the seeds' mean, sample sd and per-seed
values (as accuracy.seeds_figures makes them), and per-run speeds, measured beside each other, are dropped.
Commands must be the same but for the seed and OMP_NUM_THREADS; where the seeds ran on different thread
counts the record's threads is null and its load note names each seed's. Seeds trained at different commits
(a run resumed after a change that leaves training alone) merge only with `--commit` (the merged record's, one of
theirs) and `--commits-note` (why they train alike); the notes name each seed's commit.
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
SAME = ("question", "title", "dataset", "version", "commit", "machine", "setup", "date")
THREADS_PREFIX = re.compile(r"^OMP_NUM_THREADS=\d+\s+")


def bare_command(command: str) -> str:
    """A record's command without its seed and thread count, which may differ between the seeds."""
    return re.sub(r"--seeds \d+", "--seeds N", THREADS_PREFIX.sub("", command))


def merge(
    records: List[Dict[str, Any]], notes: str = "", load_note: str = "", commit: str = "", commits_note: str = ""
) -> Dict[str, Any]:
    """RETURNS: The record over the seeds of `records` (one seed each, everything else equal).

    load_note (str): How the seeds' runs shared the machine (default: that the load is the highest of the
        records'); each seed's thread count is added where they differ.
    commit (str): Where the seeds' commits differ, the merged record's (one of theirs)...
    commits_note (str): ...and why the seeds train alike at those commits; both or neither.
    """
    commits = sorted({r["commit"] for r in records})
    if bool(commit) != bool(commits_note):
        raise ValueError("name both the merged record's commit and why the seeds' commits train alike")
    if commit and commit not in commits:
        raise ValueError(f"{commit} is none of the records' commits ({', '.join(commits)})")
    if commit and len(commits) == 1:
        raise ValueError(f"the seeds share their commit ({commit}): nothing to name")
    for key in (k for k in SAME if not (commit and k == "commit")):  # a named commit may differ by seed
        values = {json.dumps(r.get(key), sort_keys=True) for r in records}
        if len(values) > 1:
            raise ValueError(f"the records differ in {key}: {sorted(values)}")
    if any(len(r["seeds"]) != 1 for r in records):
        raise ValueError("each record must hold one seed")
    commands = {bare_command(r["command"]) for r in records}
    if len(commands) > 1:
        raise ValueError(f"the records' commands differ: {sorted(commands)}")
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
    threads = {r["threads"] for r in records}
    note = load_note or "the highest load average of the seeds' records"
    if len(threads) > 1:
        note += "; threads " + ", ".join(f"{r['threads']} (seed {r['seeds'][0]})" for r in records)
    merged = {
        **{k: v for k, v in first.items() if k not in ("figures", "notes")},
        "id": re.sub(r"-s\d+(?=-|$)", f"-{seed_tag}", first["id"], count=1),
        "command": bare_command(first["command"])
        if len(threads) > 1
        else re.sub(r"--seeds \d+", "--seeds N", first["command"]),
        "threads": threads.pop() if len(threads) == 1 else None,
        "load": {
            "before": max((r["load"]["before"] for r in records if r["load"]["before"] is not None), default=None),
            "after": max((r["load"]["after"] for r in records if r["load"]["after"] is not None), default=None),
            "note": note,
        },
        "seeds": seeds,
        "figures": figures,
    }
    if commit:
        merged["commit"] = commit
        at = ", ".join(f"seed {r['seeds'][0]} at {r['commit']}" for r in records)
        notes = " ".join(
            part for part in (notes, f"The seeds trained at different commits ({at}): {commits_note}") if part
        )
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
    parser.add_argument("--load-note", default="", help="how the seeds' runs shared the machine")
    parser.add_argument("--commit", default="", help="the merged record's commit, where the seeds' differ")
    parser.add_argument("--commits-note", default="", help="why the seeds train alike at their commits")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    records = [json.loads(p.read_text(encoding="utf8")) for p in args.records]
    merged = merge(records, args.notes, args.load_note, args.commit, args.commits_note)
    path = args.results / f"{merged['id']}.json"
    path.write_text(json.dumps(merged, ensure_ascii=False, indent=2) + "\n", encoding="utf8")
    print(f"Result written: {path}")


if __name__ == "__main__":
    main()
