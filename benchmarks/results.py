"""Benchmark results as data: one JSON file per measurement under benchmarks/results/.

Every benchmark script ends by calling `record(...)`, which writes its figures with what a reader needs to
trust them: the command line, the date, spacy-flat's version and commit, the machine, torch's thread count,
the load average before and after, and the seeds. `render.py` builds BENCHMARKS.md and the README's result
tables from these files alone, and `benchmarks/tests/test_results.py` fails when a table and its data disagree.

A script writes `benchmarks/results/<name>.json`, the name made from what was measured (question, dataset,
model, budget, seeds), so measuring the same thing again replaces the file (git keeps the old one); pass
`--results DIR` to a script to write elsewhere (a trial run), or `--results none` to write nothing.

A record (`validate` checks it):

    id         the file's name without .json
    question   one of QUESTIONS: what the measurement answers
    title      one line: what was measured
    dataset    "resume", "weibo", "msra" or null
    command    the command line that printed the figures (with OMP_NUM_THREADS where it was set)
    date       YYYY-MM-DD
    version    spacy-flat's version; commit: the git commit (at least one of the two)
    machine    CPU (or GPU), cores, memory, torch and spaCy versions
    threads    torch's intra-op threads (null where unknown)
    load       {"before": 1-minute load average or null, "after": ... or null, "note": optional words}
    seeds      the seeds, [] where none apply
    setup      optional: the settings a table groups by (architecture, inputs, epochs, transformer, ...)
    figures    the measurement: its shape is the question's (SHAPES below; render.py reads them)
    notes      optional: one or two sentences a table's reader needs

Question "reference" holds published figures (the papers): `source` in place of command, machine and load.
"""

import contextlib
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

RESULTS = Path(__file__).resolve().parent / "results"
# Settled experiments: benchmarks/archive/<topic>/results/*.json, each record as it ran at its commit.
ARCHIVE = RESULTS.parent / "archive"
ROOT = RESULTS.parents[1]

QUESTIONS = (
    "reference",
    "accuracy",
    "accuracy-peers",
    "calibration",
    "speed-cpu",
    "speed-gpu",
    "memory",
    "long-docs",
    "annotation",
    "training-cost",
    "analysis",
)
REQUIRED = ("id", "question", "title", "dataset", "command", "date", "machine", "threads", "load", "seeds", "figures")
REFERENCE_REQUIRED = ("id", "question", "title", "source", "figures")

# The figures each question's records carry (render.py's tables read these keys).
SHAPES: Dict[str, str] = {
    "accuracy": "test_f1 {mean, sd, per_seed}, dev_f1 {mean[, per_seed]}; optional train_s {median | min, max}",
    "accuracy-peers": "rows: [{annotator, scores {test set: {all|PER|LOC|ORG: {p, r, f}}}, chars_per_s {median, ...}}]",
    "calibration": "test_f1, temperature, ece {raw, scaled}, at {0.5|0.7|0.9: {raw: [P, R], scaled: [P, R]}}",
    "speed-cpu": "rows: [{dataset, pipeline, b1 {median, min, max}, batch {...}, ...}] or training rows",
    "speed-gpu": "rows: as speed-cpu, on a GPU",
    "memory": "rows: [{...}] per length or per pipeline",
    "long-docs": "rows: [{chars, seconds, chars_per_s, peak_mb}]",
    "annotation": "rows: [{run, chars_per_s, peak_mb}]",
    "training-cost": "rows or single figures (seconds, MB)",
    "analysis": "what a closer look at trained models found: counts and rows of scores",
}


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return ""
    return done.stdout.strip()


def commit() -> Optional[str]:
    """RETURNS (str or None): The checkout's short commit, "-dirty" if the package has uncommitted changes."""
    head = _git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    return head + ("-dirty" if _git("status", "--porcelain", "--", "spacy_flat") else "")


def version() -> str:
    from spacy_flat.about import __version__

    return __version__


def machine(gpu_id: int = -1) -> str:
    """RETURNS (str): The CPU (or the GPU), cores, memory and the torch and spaCy versions."""
    import spacy
    import torch

    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kb / 2**20:.0f} GB"
    except (OSError, ValueError, IndexError):
        pass
    where = f"{cpu or 'CPU'}, {os.cpu_count()} cores{memory}"
    if gpu_id >= 0:
        where = f"{torch.cuda.get_device_name(gpu_id)}; {where}"
    elif not torch.cuda.is_available():
        where += ", no GPU"
    return f"{where}; torch {torch.__version__}, spaCy {spacy.__version__}"


def load_now() -> float:
    return round(os.getloadavg()[0], 2)


def command_line() -> str:
    threads = os.environ.get("OMP_NUM_THREADS")
    argv = [Path(sys.argv[0]).as_posix(), *sys.argv[1:]]
    with contextlib.suppress(ValueError):  # a script outside the checkout keeps its path as given
        argv[0] = Path(sys.argv[0]).resolve().relative_to(ROOT).as_posix()
    line = "python " + " ".join(shlex.quote(a) for a in argv)
    return f"OMP_NUM_THREADS={threads} {line}" if threads else line


def slug(*parts: object) -> str:
    """RETURNS (str): A file name from parts: lower case, words joined by '-'."""
    text = "-".join(str(p) for p in parts if p not in (None, "", []))
    return re.sub(r"[^a-z0-9.+]+", "-", text.lower()).strip("-")


def over_seeds(values: Sequence[float], digits: int = 2) -> Dict[str, Any]:
    """RETURNS (dict): A figure over seeds as records hold it: mean, per_seed and, for two seeds or more, sd."""
    out: Dict[str, Any] = {
        "mean": round(statistics.mean(values), digits),
        "per_seed": [round(v, digits) for v in values],
    }
    if len(values) > 1:
        out["sd"] = round(statistics.stdev(values), digits)
    return out


def record(
    name: str,
    question: str,
    title: str,
    figures: Dict[str, Any],
    *,
    dataset: Optional[str] = None,
    seeds: Sequence[int] = (),
    setup: Optional[Dict[str, Any]] = None,
    load_before: Optional[float] = None,
    gpu_id: int = -1,
    notes: str = "",
    out_dir: Optional[str] = None,
) -> Optional[Path]:
    """Write one measurement as benchmarks/results/<name>.json (or under out_dir) and
    RETURNS (Path or None): the file written; None when out_dir is "none"."""
    import torch

    if out_dir is not None and out_dir.lower() == "none":
        return None
    folder = Path(out_dir) if out_dir else RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    data: Dict[str, Any] = {
        "id": name,
        "question": question,
        "title": title,
        "dataset": dataset,
        "command": command_line(),
        "date": time.strftime("%Y-%m-%d"),
        "version": version(),
        "commit": commit(),
        "machine": machine(gpu_id),
        "threads": torch.get_num_threads(),
        "load": {"before": load_before, "after": load_now()},
        "seeds": list(seeds),
        "setup": setup or {},
        "figures": figures,
    }
    if notes:
        data["notes"] = notes
    problems = validate(data)
    if problems:
        raise ValueError(f"result {name}: " + "; ".join(problems))
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf8")
    print(f"Result written: {path}", flush=True)
    return path


def results_option(parser: Any) -> None:
    """Add the scripts' shared --results option to an argparse parser."""
    parser.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="where the JSON result goes (default: benchmarks/results/, where render.py reads it; none: nowhere)",
    )


def validate(data: Dict[str, Any]) -> List[str]:
    """RETURNS (List[str]): What a record lacks or holds wrongly (empty: valid)."""
    problems: List[str] = []
    question = data.get("question")
    if question not in QUESTIONS:
        return [f"question {question!r} is not one of {', '.join(QUESTIONS)}"]
    required = REFERENCE_REQUIRED if question == "reference" else REQUIRED
    problems += [f"no {key}" for key in required if key not in data]
    if not isinstance(data.get("figures"), dict) or not data.get("figures"):
        problems.append("figures must be a non-empty object")
    if question == "reference":
        return problems
    if not data.get("version") and not data.get("commit"):
        problems.append("neither version nor commit")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(data.get("date", ""))):
        problems.append(f"date {data.get('date')!r} is not YYYY-MM-DD")
    if not data.get("command"):
        problems.append("empty command")
    if data.get("threads") is not None and not isinstance(data.get("threads"), int):
        problems.append("threads must be an integer (null where unknown)")
    load = data.get("load")
    if not isinstance(load, dict) or not {"before", "after"} <= set(load):
        problems.append("load must hold before and after (null where unknown)")
    if not isinstance(data.get("seeds"), list):
        problems.append("seeds must be a list")
    if question == "accuracy":
        test = data.get("figures", {}).get("test_f1")
        if not isinstance(test, dict) or "mean" not in test:
            problems.append("accuracy figures need test_f1.mean")
        elif len(data.get("seeds", [])) > 1 and "sd" not in test:
            problems.append("accuracy over several seeds needs test_f1.sd")
    return problems


def load_all(folder: Path = RESULTS) -> Dict[str, Dict[str, Any]]:
    """RETURNS: Every record under folder, by id (the file's stem)."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        out[path.stem] = json.loads(path.read_text(encoding="utf8"))
    return out


def load_archive(folder: Path = ARCHIVE) -> Dict[str, Dict[str, Any]]:
    """RETURNS: Every archived record (benchmarks/archive/<topic>/results/*.json), by id."""
    out: Dict[str, Dict[str, Any]] = {}
    for path in sorted(folder.glob("*/results/*.json")):
        if path.stem in out:
            raise ValueError(f"{path}: a second record with the id {path.stem!r}")
        out[path.stem] = json.loads(path.read_text(encoding="utf8"))
    return out


def numbers(records: Iterable[Dict[str, Any]]) -> List[float]:
    """RETURNS: Every number the records hold, in values and inside strings."""
    found: List[float] = []

    def walk(value: Any) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, (int, float)):
            found.append(float(value))
        elif isinstance(value, str):
            found.extend(float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for data in records:
        walk(data)
    return found
