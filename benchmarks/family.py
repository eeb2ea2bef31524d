"""FLAT, TENER, DC-SAN and the Lattice LSTM side by side on cost: inference characters per
second one doc at a time and under nlp.pipe, training seconds per epoch, and the
peak memory of a training step on ten 300-character texts, each architecture
built from its config under configs/ and spaCy's own `ner` beside them.

Cost does not depend on training, so the models are initialized, not trained.
Inference rounds interleave every pipeline (`speed.inference`); run it on a quiet
machine, one thread and two:

    OMP_NUM_THREADS=1 python benchmarks/family.py --docs 400 --repeats 3
    python benchmarks/family.py --parts memory
    python benchmarks/family.py --gpu-id 0 --datasets resume   # on a GPU: memory is CUDA memory
    OMP_NUM_THREADS=1 python benchmarks/family.py --architectures FLAT "Lattice LSTM" --datasets resume

On a GPU every pipeline runs there (spacy.require_gpu) and cupy allocates through
PyTorch, so a training step's peak memory is torch.cuda.max_memory_allocated for
all of them, spaCy's `ner` included.

A run of every part over Resume and MSRA also writes the table's result record (benchmarks/results.py):
speed-cpu-family, or speed-gpu-family with --gpu-id (`family_figures` builds its figures; --results DIR:
elsewhere). A run of fewer parts or datasets prints its figures and writes no record, since the table needs
them all.
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import spacy
import torch
from spacy.language import Language

sys.path.insert(0, str(Path(__file__).parent))
from common import (
    ROOT,
    examples,
    load_average,
    machine,
    peak_rss_mb,
    require_quiet,
    reset_peak_rss,
    texts,
    train_split,
)
from results import record, results_option
from speed import TRAIN_SENTENCES, inference, spacy_ner, spread, training_speed

ARCHITECTURES = {
    "FLAT": "{}.cfg",
    "TENER": "{}_tener.cfg",
    "DC-SAN": "{}_dcsan.cfg",
    "Lattice LSTM": "{}_lattice_lstm.cfg",
}


def from_config(name: str, dataset: str, overrides: Optional[Dict[str, Any]] = None) -> Language:
    """An initialized (untrained) pipeline of configs/<dataset>[_arch].cfg, with
    `overrides` (dotted config keys) applied."""
    config = spacy.util.load_config(ROOT / "configs" / name, overrides=overrides or {})
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    egs = examples(nlp, dataset, train_split(dataset), limit=500)
    nlp.initialize(lambda: egs)
    return nlp


def use_gpu(gpu_id: int) -> None:
    """Run every pipeline on this GPU, cupy allocating through PyTorch (one pool to measure)."""
    from thinc.api import set_gpu_allocator

    spacy.require_gpu(gpu_id)
    set_gpu_allocator("pytorch")


def step_memory(name: str, gpu_id: int = -1) -> float:
    """Peak memory (MB) of one training step on ten 300-character MSRA test
    texts above the memory before it, in a fresh process (on a GPU: CUDA memory)."""
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); from family import measure_step, use_gpu; "
        + (f"use_gpu({gpu_id}); " if gpu_id >= 0 else "")
        + f"print(measure_step({name!r}, gpu={gpu_id >= 0}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def measure_step(name: str, length: int = 300, rows: int = 10, gpu: bool = False) -> float:
    from spacy.training import Example

    source = "".join(texts("msra", "test"))
    batch = [source[i * length : (i + 1) * length] for i in range(rows)]
    nlp = from_config(name, "resume") if name != "spaCy ner" else spacy_ner("resume")
    optimizer = nlp.resume_training()
    warm = [Example.from_dict(nlp.make_doc(t[:10]), {"entities": []}) for t in batch]
    nlp.update(warm, sgd=optimizer)
    egs = [Example.from_dict(nlp.make_doc(t), {"entities": []}) for t in batch]
    if gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 2**20
        nlp.update(egs, sgd=optimizer)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20 - base
    base = reset_peak_rss()
    nlp.update(egs, sgd=optimizer)
    return peak_rss_mb() - base


Rounds = Dict[str, Dict[str, Dict[str, List[float]]]]


def _cell(values: List[float]) -> Dict[str, int]:
    return {"median": round(statistics.median(values)), "min": round(min(values)), "max": round(max(values))}


def family_figures(
    rounds: Rounds,
    rates: Dict[str, Dict[str, float]],
    memory: Dict[str, float],
    gpu: bool = False,
    large_batch: int = 0,
) -> Dict[str, Any]:
    """The figures of speed-cpu-family (gpu: speed-gpu-family), as render.py's family tables read them.

    rounds: dataset -> pipeline -> {"b1": [chars/s a round], "batch": [...], ("large": [...])}
    (`speed.inference`; "large" at `large_batch`, on a GPU only);
    rates: dataset -> pipeline -> training sentences/s; memory: pipeline -> a training step's peak MB.
    On a CPU one row a pipeline (both datasets in its cells, the ratio to spaCy ner at one digit); on a
    GPU one row a dataset and pipeline (the ratio at two digits, the step's memory on Resume's rows).
    """
    pipelines = list(rounds["resume"])

    def ratio(dataset: str, pipeline: str, mode: str = "batch") -> float:
        return statistics.median(rounds[dataset][pipeline][mode]) / statistics.median(
            rounds[dataset]["spaCy ner"][mode]
        )

    def epoch(dataset: str, pipeline: str) -> int:
        return round(TRAIN_SENTENCES[dataset] / rates[dataset][pipeline])

    if gpu:
        rows = []
        for dataset in rounds:
            for pipeline in rounds[dataset]:
                row: Dict[str, Any] = {
                    "dataset": dataset,
                    "pipeline": pipeline,
                    "b1": _cell(rounds[dataset][pipeline]["b1"]),
                    "batch": _cell(rounds[dataset][pipeline]["batch"]),
                    "ratio": round(ratio(dataset, pipeline), 2),
                    "s_per_epoch": epoch(dataset, pipeline),
                }
                if large_batch:
                    row["large"] = _cell(rounds[dataset][pipeline]["large"])
                    row["large_ratio"] = round(ratio(dataset, pipeline, "large"), 2)
                if dataset == "resume" and pipeline in memory:
                    row["step_memory_mb"] = round(memory[pipeline])
                rows.append(row)
        return {"rows": rows, **({"large_batch": large_batch} if large_batch else {})}
    rows = [
        {
            "pipeline": pipeline,
            "resume_b1": _cell(rounds["resume"][pipeline]["b1"]),
            "resume_batch": _cell(rounds["resume"][pipeline]["batch"]),
            "msra_batch": _cell(rounds["msra"][pipeline]["batch"]),
            "ratio": {d: round(ratio(d, pipeline), 1) for d in ("resume", "msra")},
            "s_per_epoch": {d: epoch(d, pipeline) for d in ("resume", "msra")},
            "step_memory_mb": round(memory[pipeline]),
        }
        for pipeline in pipelines
    ]
    figures: Dict[str, Any] = {"rows": rows}
    if "FLAT" in pipelines and "DC-SAN" in pipelines:
        flat, dcsan = rounds["resume"]["FLAT"], rounds["resume"]["DC-SAN"]
        figures["dcsan_over_flat"] = {
            key: round(statistics.median(dcsan[key]) / statistics.median(flat[key]), 2) for key in ("batch", "b1")
        }
    return figures


def write_record(
    args: argparse.Namespace,
    rounds: Rounds,
    rates: Dict[str, Dict[str, float]],
    memory: Dict[str, float],
    load: Optional[float],
) -> None:
    """speed-cpu-family or speed-gpu-family, when the run measured what its table shows."""
    gpu = args.gpu_id >= 0
    needed = ["inference", "training"] + ([] if gpu else ["memory"])
    missing = [p for p in needed if p not in args.parts] + [d for d in ("resume", "msra") if d not in args.datasets]
    if missing:
        print(f"No result record written: the family's table needs {', '.join(missing)} too.")
        return
    n = torch.get_num_threads()
    if gpu:
        where, name = f"one {torch.cuda.get_device_name(args.gpu_id)}", "speed-gpu-family"
        title = f"The family on {where}: inference, training and a training step's CUDA memory"
    else:
        where, name = f"{n} thread{'s' if n > 1 else ''}", "speed-cpu-family"
        title = f"The family's cost, {where}: inference, training and a training step's memory"
    setup = {"docs": args.docs, "repeats": args.repeats, "batch_size": args.batch_size, "batches": args.batches}
    if args.large_batch:
        setup["large_batch"] = args.large_batch
    figures = family_figures(rounds, rates, memory, gpu=gpu, large_batch=args.large_batch)
    record(
        name,
        "speed-gpu" if gpu else "speed-cpu",
        title + ", models initialized from their configs",
        figures,
        setup=setup,
        load_before=load,
        gpu_id=args.gpu_id,
        out_dir=args.results,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--large-batch", type=int, default=0, help="on a GPU, also time nlp.pipe at this size")
    parser.add_argument("--batches", type=int, default=40, help="training updates of 10 sentences")
    parts = ("inference", "training", "memory")
    parser.add_argument("--parts", nargs="+", choices=parts, default=list(parts))
    parser.add_argument("--allow-busy", action="store_true")
    parser.add_argument("--gpu-id", type=int, default=-1, help="run every pipeline on this GPU")
    parser.add_argument("--datasets", nargs="+", choices=("resume", "msra"), default=["resume", "msra"])
    parser.add_argument("--architectures", nargs="+", choices=list(ARCHITECTURES), default=list(ARCHITECTURES))
    results_option(parser)
    args = parser.parse_args()
    if args.large_batch and args.gpu_id < 0:
        parser.error("--large-batch is a GPU column: give --gpu-id too")
    load = round(os.getloadavg()[0], 2)
    all_rounds: Rounds = {}
    all_rates: Dict[str, Dict[str, float]] = {}
    memory: Dict[str, float] = {}
    chosen = {arch: cfg for arch, cfg in ARCHITECTURES.items() if arch in args.architectures}
    require_quiet(args.allow_busy)
    where = "CPU"
    if args.gpu_id >= 0:
        use_gpu(args.gpu_id)
        where = f"GPU {torch.cuda.get_device_name(args.gpu_id)}"
    print(f"Machine: {machine()}; {where}; {torch.get_num_threads()} torch thread(s); before: {load_average()}\n")
    if "inference" in args.parts:
        pipelines: Dict[str, Language] = {
            arch: from_config(cfg.format("resume"), "resume") for arch, cfg in chosen.items()
        }
        pipelines["spaCy ner"] = spacy_ner("resume")
        size, large = args.batch_size, args.large_batch
        extra = f" chars/s batch {large} | / spaCy ner at {large} |" if large else ""
        print(f"| test set | pipeline | chars/s batch 1 | chars/s batch {size} | / spaCy ner at batch {size} |{extra}")
        print("|---|---|---|---|---|" + ("---|---|" if large else ""))
        for dataset in args.datasets:
            docs = texts(dataset, "test")[: args.docs]
            rounds = inference(pipelines, docs, args.repeats, args.batch_size, large)
            all_rounds[dataset] = rounds
            for label, r in rounds.items():
                cells = [spread(r["b1"])]
                for mode in ("batch", "large") if large else ("batch",):
                    peer = statistics.median(rounds["spaCy ner"][mode])
                    cells += [spread(r[mode]), f"{statistics.median(r[mode]) / peer:.2f}x"]
                print(f"| {dataset} | {label} | {' | '.join(cells)} |")
    if "training" in args.parts:
        print(f"\n| training, {args.batches} batches of 10 | pipeline | sentences/s | s/epoch |")
        print("|---|---|---|---|")
        for dataset in args.datasets:
            for arch, cfg in [*chosen.items(), ("spaCy ner", "")]:
                nlp = spacy_ner(dataset) if arch == "spaCy ner" else from_config(cfg.format(dataset), dataset)
                rate = training_speed(nlp, dataset, args.batches)
                all_rates.setdefault(dataset, {})[arch] = rate
                print(f"| {dataset} | {arch} | {rate:.1f} | {TRAIN_SENTENCES[dataset] / rate:.0f} |")
    if "memory" in args.parts:
        print("\n| pipeline | peak memory of a training step, 10 x 300 characters |")
        print("|---|---|")
        for arch, cfg in [*chosen.items(), ("spaCy ner", "spaCy ner")]:
            name = cfg if arch == "spaCy ner" else cfg.format("resume")
            memory[arch] = step_memory(name, args.gpu_id)
            print(f"| {arch} | {memory[arch]:.0f} MB |")
    print(f"\nAfter: {load_average()}")
    write_record(args, all_rounds, all_rates, memory, load)


if __name__ == "__main__":
    main()
