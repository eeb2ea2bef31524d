"""Throughput of `annotate`: nlp.pipe alone, the local engine with 1 and 2
processes, and the Ray engine with 1 and 2 actors, on MSRA test repeated to at
least --chars characters; peak memory per worker; Ray's start-up cost; and what
a run on N machines would do, from those figures. Run it on a quiet machine:

    python benchmarks/annotate_speed.py training/calib/msra/model-best --chars 1000000
    python benchmarks/annotate_speed.py configs/msra.cfg --chars 1000000   # initialized from the config, untrained

It also writes the table's result record, annotation-throughput (benchmarks/results.py;
`annotation_figures` builds its figures; --results DIR: elsewhere).
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import spacy

sys.path.insert(0, str(Path(__file__).parent))
from common import examples, load_average, machine, require_quiet, texts
from results import record, results_option

from spacy_flat.annotate.local import AnnotateSettings, annotate
from spacy_flat.annotate.records import ReadReport, RecordFormat, read_records


def worker_peaks(marker: str, stop: threading.Event, peaks: Dict[int, float]) -> None:
    """Sample the resident memory (MB) of every process whose command line holds `marker`."""
    while not stop.is_set():
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if marker not in (proc / "cmdline").read_bytes().decode(errors="ignore"):
                    continue
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        mb = int(line.split()[1]) / 1024
                        peaks[int(proc.name)] = max(peaks.get(int(proc.name), 0.0), mb)
            except OSError:
                continue
        time.sleep(0.2)


def initialized(config_path: Path, out: Path) -> str:
    """A pipeline built from `config_path` and initialized on MSRA's training data, not trained:
    as fast as a trained one of the same config, for a throughput benchmark."""
    from spacy.training import Example
    from spacy.util import load_config, load_model_from_config

    nlp = load_model_from_config(load_config(config_path), auto_fill=True)
    train = examples(spacy.blank("zh"), "msra", "test")[:500]
    nlp.initialize(lambda: [Example(nlp.make_doc(e.reference.text), e.reference) for e in train])
    nlp.to_disk(out)
    return str(out)


def annotation_figures(
    read_rate: float,
    pipe_rate: float,
    threads: int,
    local: Dict[int, Dict[str, float]],
    ray: Dict[int, Dict[str, float]],
    startup_s: float,
    chars: int,
    documents: int,
) -> Dict[str, Any]:
    """The figures of annotation-throughput, as render.py's annotation table reads them.

    read_rate, pipe_rate: chars/s of reading the records alone and of nlp.pipe alone; local, ray: processes
    (actors) -> {"chars_per_s", "peak_mb"} (peak_mb: this process's with one process, a worker's with more);
    startup_s: ray.init's seconds.
    """

    def row(run: str, rate: float, peak: Optional[float], note: str = "") -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "run": run,
            "chars_per_s": round(rate),
            "peak_mb": None if peak is None or peak != peak else round(peak),
        }
        if note:
            out["memory_note"] = note
        return out

    rows = [
        row("reading and checking records alone (one pass)", read_rate, None),
        row(f"nlp.pipe alone, one process (torch's {threads} thread{'s' if threads > 1 else ''})", pipe_rate, None),
    ]
    for n, r in local.items():
        rows.append(
            row(
                f"local engine, {n} process{'es' if n > 1 else ''}",
                r["chars_per_s"],
                r["peak_mb"],
                "a worker" * (n > 1),
            )
        )
    for n, r in ray.items():
        rows.append(
            row(f"Ray engine, {n} actor{'s' if n > 1 else ''}", r["chars_per_s"], r["peak_mb"], "an actor" * (n > 1))
        )
    figures: Dict[str, Any] = {"rows": rows, "ray_startup_s": round(startup_s, 1)}
    if ray and local:
        most = max(ray)
        figures["ray_over_local"] = round(ray[most]["chars_per_s"] / local[min(local)]["chars_per_s"], 2)
        figures["per_actor_core"] = round(ray[most]["chars_per_s"] / most)
    figures.update({"chars": chars, "documents": documents})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", help="a pipeline, or a config (.cfg) to initialize one from, untrained")
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--allow-busy", action="store_true")
    results_option(parser)
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 2)
    untrained = args.model.endswith(".cfg")
    config_name = args.model
    require_quiet(args.allow_busy)
    print(f"Machine: {machine()}; before: {load_average()}\n")
    sentences = texts("msra", "test")
    docs: List[str] = []
    while sum(map(len, docs)) < args.chars:
        docs.extend(sentences)
    chars = sum(map(len, docs))
    work = Path(tempfile.mkdtemp())
    if args.model.endswith(".cfg"):
        args.model = initialized(Path(args.model), work / "model")
    source = work / "msra.txt"
    source.write_text("\n".join(docs) + "\n", encoding="utf8")
    print(f"{len(docs):,} documents, {chars:,} characters (MSRA test repeated)\n")
    rows = []
    local: Dict[int, Dict[str, float]] = {}
    on_ray: Dict[int, Dict[str, float]] = {}

    start = time.perf_counter()
    n_read = sum(1 for _ in read_records([source], RecordFormat(), ReadReport()))
    read_s = time.perf_counter() - start
    rows.append(("reading and checking records alone (one pass)", chars / read_s, "", f"{n_read:,} records"))

    nlp = spacy.load(args.model)
    list(nlp.pipe(docs[:64]))
    start = time.perf_counter()
    for _ in nlp.pipe(docs, batch_size=args.batch_size):
        pass
    pipe_rate = chars / (time.perf_counter() - start)
    rows.append(("nlp.pipe alone, one process", pipe_rate, "", ""))

    for n_process in (1, 2):
        settings = AnnotateSettings(args.batch_size, n_process, args.shard_size, progress=False)
        summary = annotate(args.model, [str(source)], work / f"local{n_process}", settings=settings)
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak = f"{children:.0f} MB a worker" if n_process > 1 else f"{own:.0f} MB (this process)"
        local[n_process] = {
            "chars_per_s": summary["characters_per_second"],
            "peak_mb": children if n_process > 1 else own,
        }
        rows.append((f"local engine, {n_process} process(es)", summary["characters_per_second"], peak, ""))

    import ray

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    startup = time.perf_counter() - start
    from spacy_flat.annotate.ray_engine import annotate_with_ray

    for actors in (1, 2):
        peaks: Dict[int, float] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=worker_peaks, args=("MapWorker", stop, peaks), daemon=True)
        sampler.start()
        settings = AnnotateSettings(args.batch_size, 1, args.shard_size, progress=False)
        summary = annotate_with_ray(args.model, [str(source)], work / f"ray{actors}", settings=settings, actors=actors)
        stop.set()
        sampler.join()
        per_worker = max(peaks.values()) if peaks else float("nan")
        on_ray[actors] = {"chars_per_s": summary["characters_per_second"], "peak_mb": per_worker}
        note = "both reading passes, actor pool start and pipeline load included"
        rows.append((f"Ray engine, {actors} actor(s)", summary["characters_per_second"], f"{per_worker:.0f} MB", note))
    ray.shutdown()
    same = all(
        (work / "local1" / p.name).read_text() == p.read_text() for p in sorted((work / "ray2").glob("shard-*.jsonl"))
    )

    print("| run | chars/s | peak memory | note |")
    print("|---|---|---|---|")
    for label, rate, memory, note in rows:
        print(f"| {label} | {rate:,.0f} | {memory} | {note} |")
    print(f"\nRay start-up (ray.init of a local 2-CPU Ray): {startup:.1f} s. Ray output equals the local: {same}.")
    print(json.dumps({"rows": rows, "ray_startup_s": startup, "chars": chars}))
    print(f"\nAfter: {load_average()}")
    figures = annotation_figures(chars / read_s, pipe_rate, torch_threads(), local, on_ray, startup, chars, len(docs))
    title = (
        f"annotate on MSRA test repeated to {chars:,} characters ({len(docs):,} documents), "
        f"shards of {args.shard_size:,}, batch {args.batch_size}"
    )
    notes = "Ray's rows include both reading passes, Ray Data's start and the pipeline's load."
    if untrained:
        notes = (
            f"The pipeline is {config_name} initialized, not trained: the same size as a trained one, "
            f"so the same work a character. {notes}"
        )
    setup = {"model": config_name, "batch_size": args.batch_size, "shard_size": args.shard_size}
    record(
        "annotation-throughput",
        "annotation",
        title,
        figures,
        dataset="msra",
        setup=setup,
        load_before=load,
        notes=notes,
        out_dir=args.results,
    )


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()
