"""Throughput of `annotate`: nlp.pipe alone, the local engine with 1 and 2
processes, and the Ray engine with 1 and 2 actors, on MSRA test repeated to at
least --chars characters; peak memory per worker; Ray's start-up cost; and what
a run on N machines would do, from those figures. Run it on a quiet machine:

    python benchmarks/annotate_speed.py training/calib/msra/model-best --chars 1000000
    python benchmarks/annotate_speed.py configs/msra.cfg --chars 1000000   # initialized from the config, untrained
"""

import argparse
import json
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

import spacy

sys.path.insert(0, str(Path(__file__).parent))
from common import examples, load_average, machine, require_quiet, texts

from spacy_flat.annotation.local import AnnotateSettings, annotate
from spacy_flat.annotation.records import ReadReport, RecordFormat, read_records


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", help="a pipeline, or a config (.cfg) to initialize one from, untrained")
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--allow-busy", action="store_true")
    args = parser.parse_args()
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

    start = time.perf_counter()
    n_read = sum(1 for _ in read_records([source], RecordFormat(), ReadReport()))
    read_s = time.perf_counter() - start
    rows.append(("reading and checking records alone (one pass)", chars / read_s, "", f"{n_read:,} records"))

    nlp = spacy.load(args.model)
    list(nlp.pipe(docs[:64]))
    start = time.perf_counter()
    for _ in nlp.pipe(docs, batch_size=args.batch_size):
        pass
    rows.append(("nlp.pipe alone, one process", chars / (time.perf_counter() - start), "", ""))

    for n_process in (1, 2):
        settings = AnnotateSettings(args.batch_size, n_process, args.shard_size, progress=False)
        summary = annotate(args.model, [str(source)], work / f"local{n_process}", settings=settings)
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak = f"{children:.0f} MB a worker" if n_process > 1 else f"{own:.0f} MB (this process)"
        rows.append((f"local engine, {n_process} process(es)", summary["characters_per_second"], peak, ""))

    import ray

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    startup = time.perf_counter() - start
    from spacy_flat.annotation.ray_engine import annotate_with_ray

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


if __name__ == "__main__":
    main()
