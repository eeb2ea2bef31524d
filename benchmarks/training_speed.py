"""Training speed of the real loop: seconds of the first (cold) epoch and of the second (warm) one.

Each measurement is a fresh process that trains a config of `configs/` two epochs through the loop
behind `python -m spacy_flat train` (`spacy_flat.training.loop.TrainingRun`: the batch stream, the
updates, the optimizer, the schedules), with its dev evaluation replaced by nothing and no checkpoint
or model written. The cold epoch runs from the loop's start (the corpus read into examples included)
to the first step of the second epoch; the warm epoch from there to the end of the last step (a GPU
is synchronised at both marks only). The pipeline's set-up (`init_nlp`) is timed apart.

With `--baseline REV` the same runs go at an earlier commit's package and configs (extracted by
`git archive` into a temporary folder on PYTHONPATH), alternating with today's process by process, so
a drift in the machine's speed reaches both alike; the gain is the median of the round ratios.

`--sentences [DATASET=]N` trains on N training sentences spread evenly over the file (their lengths are the
epoch's) and scales the seconds to the whole training set; the table says so.

    python benchmarks/training_speed.py msra --architectures flat dcsan --threads 2 --baseline 8517047
    python benchmarks/training_speed.py resume --gpu-id 0 --rounds 1

Writes the record `speed-training-cpu` (`speed-training-gpu` with --gpu-id; other architectures than FLAT and
DC-SAN add their names to it): a row per dataset, architecture and thread count with `cold_s` and `warm_s`
(medians, whole epochs), and the baseline's.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy.tokens import DocBin

sys.path.insert(0, str(Path(__file__).parent))
from common import ROOT, load_average, markdown_table, require_quiet, splits
from results import load_now, record, results_option
from tools.baseline import extract

# The config suffix of each architecture: configs/<dataset><suffix>.cfg.
CONFIGS = {"flat": "", "dcsan": "_dcsan", "tener": "_tener", "lattice_lstm": "_lattice_lstm"}
NAMES = {"flat": "FLAT", "dcsan": "DC-SAN", "tener": "TENER", "lattice_lstm": "Lattice LSTM"}


def worker(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Train two epochs in this process and RETURNS the seconds of each and what the run held."""
    import resource

    import torch
    from spacy.training.initialize import init_nlp
    from spacy.util import load_config
    from thinc.api import require_gpu

    from spacy_flat.training.checkpoints import CheckpointStore
    from spacy_flat.training.fingerprint import fingerprint
    from spacy_flat.training.loop import TrainingRun

    gpu = int(spec["gpu_id"])
    work = Path(spec["work"])
    train_path = Path(spec["train"])
    if spec.get("sentences"):
        import spacy

        nlp = spacy.blank("zh")
        docs = list(DocBin().from_disk(train_path).get_docs(nlp.vocab))
        step = max(1, len(docs) // int(spec["sentences"]))
        train_path = work / "train.spacy"
        DocBin(docs=docs[::step][: int(spec["sentences"])]).to_disk(train_path)
    overrides = {
        "paths.train": str(train_path),
        "paths.dev": str(train_path),  # never read: evaluation is replaced below
        "training.max_epochs": 2,
        "training.max_steps": 0,
        **spec.get("overrides", {}),
    }
    config = load_config(Path(spec["configs"]) / spec["config"], overrides=overrides, interpolate=False)
    if gpu >= 0:
        require_gpu(gpu)
    start = time.perf_counter()
    nlp = init_nlp(config, use_gpu=gpu)
    try:  # the feature cache, where this commit has one, set as the loop's `train` sets it
        from spacy_flat.layers.featurizer import set_feature_cache
    except ImportError:
        set_feature_cache = None  # type: ignore[assignment]
    if set_feature_cache is not None:
        for _, proc in nlp.pipeline:
            model = getattr(proc, "model", None)
            if model is not None and hasattr(model, "has_ref") and model.has_ref("features"):
                set_feature_cache(model, work / "feature-cache")
    run = TrainingRun(nlp, work / "run", CheckpointStore(work / "run" / "checkpoints"), fingerprint(config), gpu)
    init_s = time.perf_counter() - start

    def wait() -> None:
        if gpu >= 0:
            torch.cuda.synchronize()

    marks: Dict[int, float] = {}

    def before_update(_nlp: Any, info: Dict[str, Any]) -> None:
        if info["epoch"] not in marks:
            wait()
            marks[info["epoch"]] = time.perf_counter()

    run.T["before_update"] = before_update
    run.evaluate = lambda: (0.0, {})
    run.start(None, replay_check=True)
    steps = 0
    begin = time.perf_counter()
    for _batch, _info, _ in run.steps():
        steps += 1
    wait()
    end = time.perf_counter()
    cache_mb = None
    folder = work / "feature-cache"
    try:
        from spacy_flat.layers.featurizer import training_cache

        ner = nlp.get_pipe(nlp.pipe_names[0])
        cache = training_cache(ner.model)
        if cache is not None:
            spilled = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.exists() else 0
            cache_mb = (cache.memory_used + spilled) / 2**20
    except ImportError:
        pass
    return {
        "init_s": init_s,
        "cold_s": marks[1] - begin,
        "warm_s": end - marks[1],
        "steps": steps,
        "threads": torch.get_num_threads(),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cache_mb": cache_mb,
    }


def measure(spec: Dict[str, Any], threads: int, package_root: Optional[Path]) -> Dict[str, Any]:
    """One worker process; `package_root` puts another commit's spacy_flat first on the path."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    # Each side trains its own commit's config (today's configs may name settings an older package lacks).
    spec = dict(spec, configs=str(ROOT / "configs"))
    if package_root is not None:
        env["PYTHONPATH"] = str(package_root) + os.pathsep + env.get("PYTHONPATH", "")
        if (package_root / "configs").is_dir():
            spec["configs"] = str(package_root / "configs")
    with tempfile.TemporaryDirectory(prefix="training-speed-") as work:
        spec = dict(spec, work=work)
        done = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(spec)], env=env, capture_output=True, text=True
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def summary(runs: List[Dict[str, Any]], scale: float) -> Dict[str, Any]:
    """Medians (and spread) of a row's runs, seconds scaled to the whole training set."""

    def cell(key: str, scaled: bool = True) -> Dict[str, float]:
        values = [run[key] * (scale if scaled else 1.0) for run in runs]
        return {
            "median": round(statistics.median(values), 2),
            "min": round(min(values), 2),
            "max": round(max(values), 2),
        }

    out: Dict[str, Any] = {"cold_s": cell("cold_s"), "warm_s": cell("warm_s"), "init_s": cell("init_s", scaled=False)}
    out["peak_mb"] = round(max(run["peak_mb"] for run in runs))
    caches = [run["cache_mb"] for run in runs if run.get("cache_mb") is not None]
    if caches:
        out["cache_mb"] = round(max(caches) * scale, 1)
    return out


def training_row(
    dataset: str,
    architecture: str,
    threads: Optional[int],
    head: List[Dict[str, Any]],
    base: List[Dict[str, Any]],
    used: int,
    total: int,
) -> Dict[str, Any]:
    """A record's row: the medians of a dataset and architecture's runs (`worker`'s results), scaled
    from `used` of the `total` training sentences, beside the baseline's runs (a round each) if any."""
    scale = total / used
    row: Dict[str, Any] = {"dataset": dataset, "architecture": architecture, "threads": threads}
    if used < total:
        row["sentences"] = used
    row.update(summary(head, scale))
    row["steps"] = head[0]["steps"]
    if base:
        row["base"] = summary(base, scale)
        for key in ("warm", "cold"):
            ratios = [b[f"{key}_s"] / h[f"{key}_s"] for b, h in zip(base, head)]
            row[f"speedup_{key}"] = round(statistics.median(ratios), 2)
    return row


def measure_rows(
    args: argparse.Namespace,
    sentences: Dict[str, int],
    overrides: Dict[str, Any],
    threads: List[int],
    base_root: Optional[Path],
) -> List[Dict[str, Any]]:
    """A row per dataset, architecture and thread count, each from `args.rounds` processes a side."""
    rows: List[Dict[str, Any]] = []
    for dataset in args.datasets:
        train = splits(dataset)["train"]
        total = len(DocBin().from_disk(train))
        wanted = sentences.get(dataset, sentences.get("", 0))
        used = min(wanted, total) if wanted else total
        for arch in args.architectures:
            for n in threads:
                spec = {
                    "config": f"{dataset}{CONFIGS[arch]}.cfg",
                    "train": str(train),
                    "gpu_id": args.gpu_id,
                    "sentences": wanted,
                    "overrides": overrides,
                }
                runs: Dict[str, List[Dict[str, Any]]] = {"head": [], "base": []}
                for _ in range(args.rounds):
                    if base_root is not None:
                        runs["base"].append(measure(spec, n or 1, base_root))
                    runs["head"].append(measure(spec, n or 1, None))
                row = training_row(dataset, arch, n or None, runs["head"], runs["base"], used, total)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="*", help="resume, weibo or msra")
    parser.add_argument("--architectures", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="CPU threads (ignored on a GPU)")
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--baseline", default="", help="an earlier commit timed beside this checkout")
    parser.add_argument(
        "--baseline-path", type=Path, default=None, help="a folder with an earlier spacy_flat/ and configs/ (no git)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="processes per row and side")
    parser.add_argument(
        "--sentences", nargs="*", default=[], metavar="[DATASET=]N", help="N sentences (of DATASET) only"
    )
    parser.add_argument("--override", nargs="*", default=[], metavar="KEY=JSON", help="config overrides")
    parser.add_argument("--allow-busy", action="store_true")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    results_option(parser)
    args = parser.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    unknown = [name for name in args.datasets if name not in ("resume", "weibo", "msra")]
    if unknown or not args.datasets:
        parser.error(f"datasets: one or more of resume, weibo, msra (not {unknown or 'none'})")
    require_quiet(args.allow_busy)
    load, load_before = load_average(), load_now()
    overrides = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.override)}
    threads = [0] if args.gpu_id >= 0 else args.threads
    sentences = {name: int(n) for name, _, n in (item.rpartition("=") for item in args.sentences)}
    with tempfile.TemporaryDirectory(prefix="training-speed-base-") as folder:
        # An earlier commit's package and configs, as --baseline-path would hold them.
        base_root = (
            extract(args.baseline, Path(folder), "spacy_flat", "configs") if args.baseline else args.baseline_path
        )
        base_name = args.baseline or (args.baseline_path.name if args.baseline_path else "")
        rows = measure_rows(args, sentences, overrides, threads, base_root)
    where = "GPU" if args.gpu_id >= 0 else "threads"
    columns = ["dataset", "architecture", where, "sentences", "cold s", "warm s"]
    if base_name:
        columns += [f"{base_name} cold s", f"{base_name} warm s", "warm gain"]
    table = []
    for row in rows:
        cells = [
            row["dataset"],
            NAMES[row["architecture"]],
            str(row["threads"] or args.gpu_id),
            f"{row['sentences']:,} (scaled)" if row.get("sentences") else "all",
            f"{row['cold_s']['median']:.1f}",
            f"{row['warm_s']['median']:.1f}",
        ]
        if "base" in row:
            cells += [f"{row['base']['cold_s']['median']:.1f}", f"{row['base']['warm_s']['median']:.1f}"]
            cells.append(f"{row['speedup_warm']:.2f}x")
        table.append(cells)
    print(f"\n{load} before; after: {load_now()}; sentences: {args.sentences or 'all'}, scaled to whole epochs")
    print(markdown_table(columns, table))
    gpu = args.gpu_id >= 0
    setup: Dict[str, Any] = {"rounds": args.rounds, "overrides": overrides}
    if base_name:
        setup["baseline"] = base_name
    # FLAT and DC-SAN (the speed goals' pair) under the plain name; other architectures in records of their own.
    name = "speed-training-gpu" if gpu else "speed-training-cpu"
    if sorted(args.architectures) != ["dcsan", "flat"]:
        name += "-" + "-".join(a.replace("_", "-") for a in args.architectures)
    record(
        name,
        "speed-gpu" if gpu else "speed-cpu",
        "Seconds of a cold (first) and a warm (second) training epoch through the real loop, no dev evaluation",
        {"rows": rows},
        setup=setup,
        load_before=load_before,
        gpu_id=args.gpu_id,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
