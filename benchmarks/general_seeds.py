"""The general pipeline's accuracy over seeds, each seed trained, calibrated and scored by the workflow's own
commands (the project's train-general, calibrate-general and evaluate-general).

Seed 0 is the workflow's run: training/general and metrics/general. Seed N runs the same commands with
`--system.seed N` into training/general-sN and metrics/general-sN (the seed also draws the pool's repeats).
A seed whose four test scores are saved is read back, not trained again, so a stopped run goes on where it
stopped (training itself resumes from its checkpoints).

    python -m spacy project run general .            # seed 0, once
    python benchmarks/general_seeds.py --seeds 0 1 2  # about 20 to 25 minutes a further seed on 2 cores

It prints a table and writes the record `accuracy-general-pipeline-s012` (benchmarks/results.py): F1 on each
test set (mean, sd, per seed), the pooled dev F1 of the model each seed ships, and the calibration's temperature
and expected calibration error on the pooled dev sets.
"""

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).parent))
from common import markdown_table
from results import ROOT, load_now, over_seeds, record, results_option

TEST_SETS = ("msra", "weibo", "resume", "uner")
STEPS = ("train-general", "calibrate-general", "evaluate-general")


def folders(seed: int) -> Dict[str, str]:
    """RETURNS: The seed's training and metrics folders, relative to the project's root."""
    suffix = "" if seed == 0 else f"-s{seed}"
    return {"training": f"training/general{suffix}", "metrics": f"metrics/general{suffix}"}


def seed_commands(project: Dict[str, Any], seed: int) -> List[str]:
    """The workflow's commands for the general pipeline, moved to the seed's folders and given its seed.

    project (dict): The project's config, its variables filled in (weasel's load_project_config).
    RETURNS (List[str]): The command lines, in order.
    """
    by_name = {c["name"]: c for c in project["commands"]}
    out = []
    for step in STEPS:
        for line in by_name[step]["script"]:
            if seed:
                line = line.replace("training/general/", f"training/general-s{seed}/")
                line = line.replace("--output training/general ", f"--output training/general-s{seed} ")
                line = line.replace("metrics/general/", f"metrics/general-s{seed}/")
                if " train " in line:
                    line += f" --system.seed {seed}"
            out.append(line)
    return out


def run_seed(root: Path, project: Dict[str, Any], seed: int) -> None:
    """Train, calibrate and score one seed with the workflow's commands."""
    for line in seed_commands(project, seed):
        print(f"$ {line}", flush=True)
        subprocess.run(shlex.split(line), cwd=root, check=True)


def read_seed(root: Path, seed: int) -> Dict[str, Any]:
    """RETURNS: One seed's figures from its saved scores, the shipped model's dev scores and calibration."""
    where = folders(seed)
    tests = {}
    for name in TEST_SETS:
        scores = json.loads((root / where["metrics"] / name / "scores.json").read_text(encoding="utf8"))
        tests[name] = 100 * scores["ents_f"]
    calibrated = root / where["training"] / "model-calibrated"
    # The calibrated model's meta carries the dev scores of the model the workflow calibrated.
    meta = json.loads((calibrated / "meta.json").read_text(encoding="utf8"))
    calibration = json.loads((calibrated / "calibration.json").read_text(encoding="utf8"))
    return {
        "tests": tests,
        "dev_f": 100 * meta["performance"]["ents_f"],
        "dev_macro": 100 * meta["performance"]["ents_f_macro"],
        "temperature": calibration["temperature"],
        "ece_before": calibration["dev"]["before"]["ece"],
        "ece_after": calibration["dev"]["after"]["ece"],
    }


def figures_of(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """RETURNS: The record's figures: each test set's F1 over the seeds; test_f1 is their macro mean."""
    per_test = {name: over_seeds([r["tests"][name] for r in runs]) for name in TEST_SETS}
    macro = [statistics.mean(r["tests"].values()) for r in runs]
    return {
        "test_f1": over_seeds(macro),
        "test_sets": per_test,
        "dev_f1": over_seeds([r["dev_f"] for r in runs]),
        "dev_f1_macro": over_seeds([r["dev_macro"] for r in runs]),
        "temperature": over_seeds([r["temperature"] for r in runs], 3),
        "ece": {
            "before": over_seeds([r["ece_before"] for r in runs], 4),
            "after": over_seeds([r["ece_after"] for r in runs], 4),
        },
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--project", type=Path, default=ROOT, help="the project's root (default: this checkout)")
    parser.add_argument("--notes", default="", help="what else the record's reader needs: where the seeds ran")
    results_option(parser)
    args = parser.parse_args(argv)
    load = load_now()
    runs = []
    project: Optional[Dict[str, Any]] = None  # read once, where a seed is to be trained
    for seed in args.seeds:
        saved = args.project / folders(seed)["metrics"]
        if not all((saved / name / "scores.json").exists() for name in TEST_SETS):
            if seed == 0:
                parser.error(f"no scores under {saved}: run `spacy project run general .` first")
            if project is None:
                from weasel.util import load_project_config

                project = load_project_config(args.project)
            run_seed(args.project, project, seed)
        runs.append(read_seed(args.project, seed))
    figures = figures_of(runs)
    rows = [
        [f"seed {seed}", *(f"{r['tests'][n]:.2f}" for n in TEST_SETS), f"{r['ece_after']:.4f}"]
        for seed, r in zip(args.seeds, runs)
    ]
    spread = [figures["test_sets"][n] for n in TEST_SETS]
    rows.append(["mean ± sd", *(f"{s['mean']:.2f} ± {s.get('sd', 0):.2f}" for s in spread), ""])
    print(markdown_table(["", "MSRA", "Weibo (named)", "Resume", "UNER", "ECE, pooled dev"], rows))
    record(
        "accuracy-general-pipeline-s" + "".join(map(str, args.seeds)),
        "accuracy",
        "The general pipeline (spacy project run general .): FLAT on MSRA, Weibo, Resume and UNER pooled, "
        "PER, LOC, ORG, on each test set",
        figures,
        seeds=args.seeds,
        setup={"architecture": "FLAT", "inputs": "wiki words + our bigrams", "kind": "pipeline", "pipeline": "general"},
        load_before=load,
        notes=(
            "Each seed trained, calibrated and scored by the workflow's commands (seed N with --system.seed N); "
            "test F1 of the calibrated model, exact spans; test_f1 is the mean of the four test sets' F1; dev_f1 "
            "is the pooled dev F1 of the shipped model (model-last); ece is on the four dev sets pooled, before "
            "and after the temperature. " + args.notes
        ).strip(),
        out_dir=args.results,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
