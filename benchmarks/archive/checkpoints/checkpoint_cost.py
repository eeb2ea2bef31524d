"""What a checkpoint of `python -m spacy_flat train` costs: seconds to write and to verify, and disk.

Trains a config's model for a few steps on its corpus from ../shared/data (converted once into
corpus/bench, as the other benchmarks do; dev is cut to its first 200 sentences, since only the
step-0 evaluation runs and a checkpoint does not depend on dev's size), then writes a checkpoint after
each of several more steps, timing each write (the pipeline, model-best, the optimizer's state, the
random states, sha256 of every file, fsync, rename) and the verification a resume does before loading.
Disk is the checkpoint's files, and what is new on disk after hard-linking the files equal to the
previous checkpoint's.

    python benchmarks/checkpoint_cost.py                      # resume.cfg and msra.cfg
    python benchmarks/checkpoint_cost.py --configs msra_dcsan.cfg --writes 7

It also writes the table's result record, training-cost-checkpoints (benchmarks/results.py;
`checkpoint_figures` builds its figures; --results DIR: elsewhere).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import spacy
from spacy.tokens import DocBin
from spacy.training.initialize import init_nlp
from spacy.util import load_config

sys.path.insert(0, str(Path(__file__).parent))
from common import ROOT, load_average, machine, markdown_table, splits
from results import record, results_option

from spacy_flat.training.checkpoints import CheckpointStore, verify
from spacy_flat.training.fingerprint import fingerprint
from spacy_flat.training.loop import TrainingRun

DATASETS = {"resume": "resume", "msra": "msra"}
COLUMNS = ("config", "write s (median)", "write s (min-max)", "verify s", "files MB", "new on disk MB", "steps")


def small_dev(dev: Path, out: Path, n: int = 200) -> Path:
    nlp = spacy.blank("zh")
    docs = list(DocBin().from_disk(dev).get_docs(nlp.vocab))[:n]
    DocBin(docs=docs).to_disk(out)
    return out


def measure(config_name: str, writes: int, warm_steps: int, workdir: Path) -> Dict[str, float]:
    dataset = config_name.split("_")[0].removesuffix(".cfg")
    data = splits(DATASETS[dataset])
    dev = small_dev(data["dev"], workdir / f"{dataset}-dev.spacy")
    overrides = {"paths.train": str(data["train"]), "paths.dev": str(dev), "training.logger.progress_bar": False}
    config = load_config(ROOT / "configs" / config_name, overrides=overrides, interpolate=False)
    output = workdir / config_name
    store = CheckpointStore(output / "checkpoints", keep=2)
    run = TrainingRun(init_nlp(config), output, store, fingerprint(config), -1)
    run.start(None, replay_check=True)
    steps = run.steps()
    for _, _, is_best in (next(steps) for _ in range(warm_steps)):
        if is_best is not None:
            run._save_models(is_best)  # model-best exists, as in a run, and goes into each checkpoint
    seconds: List[float] = []
    verify_seconds: List[float] = []
    sizes: List[int] = []
    new_bytes: List[int] = []
    for _ in range(writes):
        next(steps)  # one more step, so the weights and moments a checkpoint writes have changed
        start = time.perf_counter()
        written = run.checkpoint()
        seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert verify(written.path) is None
        verify_seconds.append(time.perf_counter() - start)
        files = [p for p in written.path.rglob("*") if p.is_file()]
        sizes.append(sum(p.stat().st_size for p in files))
        new_bytes.append(sum(p.stat().st_size for p in files if p.stat().st_nlink == 1))
    return {
        "median": statistics.median(seconds),
        "min": min(seconds),
        "max": max(seconds),
        "verify": statistics.median(verify_seconds),
        "mb": statistics.median(sizes) / 1e6,
        "new_mb": statistics.median(new_bytes[1:] or new_bytes) / 1e6,
        "steps": run.state.steps,
    }


def checkpoint_figures(measured: Dict[str, Dict[str, float]]) -> Dict[str, Any]:
    """The figures of training-cost-checkpoints, as render.py's checkpoints table reads them.

    measured: config name -> `measure`'s result (median, min, max, verify, mb, new_mb, steps).
    """
    rows = [
        {
            "config": name,
            "write_s": {"median": round(r["median"], 2), "min": round(r["min"], 2), "max": round(r["max"], 2)},
            "verify_s": round(r["verify"], 2),
            "files_mb": round(r["mb"], 1),
            "new_mb": round(r["new_mb"], 1),
            "steps": int(r["steps"]),
        }
        for name, r in measured.items()
    ]
    return {"rows": rows}


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["resume.cfg", "msra.cfg"])
    parser.add_argument("--writes", type=int, default=5, help="checkpoints written per config (median taken)")
    parser.add_argument("--warm-steps", type=int, default=2, help="steps trained before the first checkpoint")
    results_option(parser)
    args = parser.parse_args(argv)
    load = round(os.getloadavg()[0], 2)
    print(f"{machine()}; {load_average()} at the start", flush=True)
    rows = []
    measured: Dict[str, Dict[str, float]] = {}
    with tempfile.TemporaryDirectory(dir=ROOT / "corpus") as tmp:
        for name in args.configs:
            result = measure(name, args.writes, args.warm_steps, Path(tmp))
            measured[name] = result
            rows.append(
                [
                    name,
                    f"{result['median']:.2f}",
                    f"{result['min']:.2f}-{result['max']:.2f}",
                    f"{result['verify']:.2f}",
                    f"{result['mb']:.1f}",
                    f"{result['new_mb']:.1f}",
                    str(result["steps"]),
                ]
            )
            print(f"{name}: done; {load_average()}", flush=True)
    print(markdown_table(COLUMNS, rows))
    print(f"{load_average()} at the end; {args.writes} checkpoints per config, one training step between them")
    title = "What a checkpoint of python -m spacy_flat train costs"
    setup = {"writes": args.writes, "warm_steps": args.warm_steps}
    figures = checkpoint_figures(measured)
    record(
        "training-cost-checkpoints",
        "training-cost",
        title,
        figures,
        setup=setup,
        load_before=load,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
