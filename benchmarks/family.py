"""FLAT, TENER, DC-SAN and the Lattice LSTM side by side on cost: inference characters per
second one doc at a time and under nlp.pipe, training seconds per epoch, and the
peak memory of a training step on ten 300-character texts, each architecture
built from its config under configs/ and spaCy's own `ner` beside them.

Cost hardly depends on training, so the models are initialized, not trained; what does
(how many entities are decoded, written and scored) shows beside them with
--trained-steps: FLAT trained that many updates on Resume's training set, its rows on
Resume's test set, once for each of --trained-decodings (decoding on the device against
NumPy on a GPU). Inference rounds interleave every pipeline (`speed.inference`); run it on
a quiet machine, one thread and two:

    OMP_NUM_THREADS=1 python benchmarks/family.py --docs 400 --repeats 3
    python benchmarks/family.py --parts memory
    python benchmarks/family.py --gpu-id 0 --datasets resume   # on a GPU: memory is CUDA memory
    OMP_NUM_THREADS=1 python benchmarks/family.py --architectures FLAT "Lattice LSTM" --datasets resume
    python benchmarks/family.py --gpu-id 0 --docs 1600 --pool --b1-docs 100 --repeats 5 --large-batch 256 \
        --parts inference training --trained-steps 300     # the GPU lane's run (benchmarks/tools/device_lane.sh)

--pool repeats a test set in order until it holds --docs docs (Resume's has 477), so that
a GPU's batches of 256 come several times; --b1-docs times one doc at a time over the
first N of them only (a rate, comparable; batch 1 on a GPU is slow).

On a GPU every pipeline runs there (spacy.require_gpu) and cupy allocates through
PyTorch, so a training step's peak memory is torch.cuda.max_memory_allocated for
all of them, spaCy's `ner` included.

A run of every part over Resume and MSRA also writes the table's result record (benchmarks/results.py):
speed-cpu-family, or speed-gpu-family with --gpu-id (`family_figures` builds its figures; --results DIR:
elsewhere). On a GPU the memory part is optional (the table leaves its column out without it). A run of
fewer parts or datasets prints its figures and writes no record, since the table needs them all.
"""

import argparse
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, cast

import spacy
import torch
from spacy.language import Language
from spacy.util import fix_random_seed

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

from spacy_flat.pipeline.flat_ner import FlatNER

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


def pooled(docs: Sequence[str], n: int) -> List[str]:
    """The first n of `docs` repeated in order (a test set pooled to n docs)."""
    return list(itertools.islice(itertools.cycle(docs), n)) if docs else []


def trained_flat(dataset: str, steps: int, path: Optional[Path] = None, seed: int = 0) -> Language:
    """FLAT of configs/<dataset>.cfg trained `steps` updates of 10 training sentences (shuffled
    with `seed`; Adam at the config's top rate, 1e-3, without its warm-up), its test F1 in
    nlp.meta["trained"]. With `path`: loaded from there where an earlier run saved it, else
    saved there (so that a second benchmark of one run times the same model)."""
    from thinc.api import Adam

    if path is not None and (path / "meta.json").exists():
        nlp = spacy.load(path)
        done = nlp.meta.get("trained", {})
        if done.get("dataset") == dataset and done.get("steps") == steps and done.get("seed") == seed:
            return nlp
    start = time.perf_counter()
    fix_random_seed(seed)
    nlp = from_config(f"{dataset}.cfg", dataset)
    train = examples(nlp, dataset, train_split(dataset))
    random.Random(seed).shuffle(train)
    optimizer = Adam(0.001, grad_clip=5.0)
    batches = itertools.cycle(train[i : i + 10] for i in range(0, len(train), 10))
    for batch in itertools.islice(batches, steps):
        nlp.update(batch, sgd=optimizer)
    seconds = time.perf_counter() - start
    test = examples(nlp, dataset, "test")
    f1 = nlp.evaluate(test)["ents_f"]
    nlp.meta["trained"] = {
        "dataset": dataset,
        "steps": steps,
        "batch": 10,
        "seed": seed,
        "seconds": round(seconds, 1),
        "test_f1": round(100 * f1, 2),
    }
    print(f"FLAT trained {steps} steps on {dataset} in {seconds:.0f} s (with its set-up): test F1 {100 * f1:.2f}")
    if path is not None:
        nlp.to_disk(path)
    return nlp


def trained_rows(
    dataset: str, steps: int, decodings: Sequence[str], path: Optional[Path] = None
) -> Dict[str, Language]:
    """The trained FLAT once for each decoding ("FLAT, trained N steps, decoding MODE"): one
    training, loaded again from disk for each further decoding (`path`, or a temporary folder)."""
    path = path or Path(tempfile.mkdtemp(prefix="family-trained-")) / "flat"
    first = trained_flat(dataset, steps, path)
    out: Dict[str, Language] = {}
    for k, mode in enumerate(decodings):
        nlp = first if k == 0 else spacy.load(path)
        cast(FlatNER, nlp.get_pipe("flat_ner")).cfg["decoding"] = mode
        out[f"FLAT, trained {steps} steps, decoding {mode}"] = nlp
    return out


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
    (`inference`; "large" at `large_batch`, on a GPU only);
    rates: dataset -> pipeline -> training sentences/s; memory: pipeline -> a training step's peak MB.
    On a CPU one row a pipeline (both datasets in its cells, the ratio to spaCy ner at one digit); on a
    GPU one row a dataset and pipeline (the ratio at two digits, the step's memory on Resume's rows where
    measured); a dataset may have rows of its own (the trained FLAT's, s_per_epoch None: not timed).
    """
    # The CPU table's rows: the pipelines timed on both test sets whose step was measured.
    pipelines = [p for p in rounds["resume"] if all(p in r for r in rounds.values()) and (gpu or p in memory)]

    def ratio(dataset: str, pipeline: str, mode: str = "batch") -> float:
        return statistics.median(rounds[dataset][pipeline][mode]) / statistics.median(
            rounds[dataset]["spaCy ner"][mode]
        )

    def epoch(dataset: str, pipeline: str) -> Optional[int]:
        """Seconds an epoch; None for a pipeline whose training was not timed (a trained one's rows)."""
        rate = rates.get(dataset, {}).get(pipeline)
        return round(TRAIN_SENTENCES[dataset] / rate) if rate else None

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
    trained: Optional[Dict[str, Any]] = None,
) -> None:
    """speed-cpu-family or speed-gpu-family, when the run measured what its table shows
    (trained: the trained FLAT's meta["trained"], with the decodings of its rows)."""
    gpu = args.gpu_id >= 0
    needed = ["inference", "training"] + ([] if gpu else ["memory"])
    missing = [p for p in needed if p not in args.parts] + [d for d in ("resume", "msra") if d not in args.datasets]
    if missing:
        print(f"No result record written: the family's table needs {', '.join(missing)} too.")
        return
    n = torch.get_num_threads()
    if gpu:
        where, name = f"one {torch.cuda.get_device_name(args.gpu_id)}", "speed-gpu-family"
        title = f"The family on {where}: inference, training" + (" and a training step's CUDA memory" if memory else "")
    else:
        where, name = f"{n} thread{'s' if n > 1 else ''}", "speed-cpu-family"
        title = f"The family's cost, {where}: inference, training and a training step's memory"
    setup: Dict[str, Any] = {
        "docs": args.docs,
        "repeats": args.repeats,
        "batch_size": args.batch_size,
        "batches": args.batches,
    }
    if args.large_batch:
        setup["large_batch"] = args.large_batch
    if args.pool:
        setup["pooled"] = True
    if args.b1_docs:
        setup["b1_docs"] = args.b1_docs
    title += ", models initialized from their configs"
    if trained and gpu:  # the CPU table has no rows for it
        setup["trained"] = trained
        title += f" and FLAT trained {trained['steps']} steps on {trained['dataset'].capitalize()}"
    figures = family_figures(rounds, rates, memory, gpu=gpu, large_batch=args.large_batch)
    record(
        name,
        "speed-gpu" if gpu else "speed-cpu",
        title,
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
    parser.add_argument("--pool", action="store_true", help="repeat a test set in order up to --docs docs")
    parser.add_argument("--b1-docs", type=int, default=0, help="time batch 1 over the first N docs only (0: all)")
    parser.add_argument(
        "--trained-steps", type=int, default=0, help="also time FLAT trained this many updates on Resume (0: not)"
    )
    parser.add_argument(
        "--trained-decodings",
        nargs="+",
        choices=("auto", "numpy", "torch"),
        default=["auto", "numpy"],
        help="the trained FLAT's rows: one for each decoding setting",
    )
    parser.add_argument(
        "--trained-dir", type=Path, default=None, help="where the trained FLAT is saved (or loaded from, if there)"
    )
    results_option(parser)
    args = parser.parse_args()
    if args.large_batch and args.gpu_id < 0:
        parser.error("--large-batch is a GPU column: give --gpu-id too")
    trained: Optional[Dict[str, Any]] = None
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
    # Initialized on Resume for inference, then timed in training on Resume (no second set-up).
    pipelines: Dict[str, Language] = {}
    if "inference" in args.parts:
        pipelines = {arch: from_config(cfg.format("resume"), "resume") for arch, cfg in chosen.items()}
        pipelines["spaCy ner"] = spacy_ner("resume")
        extra_rows: Dict[str, Language] = {}
        if args.trained_steps:
            extra_rows = trained_rows("resume", args.trained_steps, args.trained_decodings, args.trained_dir)
            trained = {**next(iter(extra_rows.values())).meta["trained"], "decodings": args.trained_decodings}
        size, large = args.batch_size, args.large_batch
        extra = f" chars/s batch {large} | / spaCy ner at {large} |" if large else ""
        print(f"| test set | pipeline | chars/s batch 1 | chars/s batch {size} | / spaCy ner at batch {size} |{extra}")
        print("|---|---|---|---|---|" + ("---|---|" if large else ""))
        for dataset in args.datasets:
            docs = texts(dataset, "test")
            docs = pooled(docs, args.docs) if args.pool else docs[: args.docs]
            # The trained FLAT's rows on its own test set only.
            timed = {**pipelines, **(extra_rows if dataset == "resume" else {})}
            rounds = inference(timed, docs, args.repeats, args.batch_size, large, args.b1_docs)
            all_rounds[dataset] = rounds
            for label, r in rounds.items():
                cells = [spread(r["b1"])]
                for mode in ("batch", "large") if large else ("batch",):
                    peer = statistics.median(rounds["spaCy ner"][mode])
                    cells += [spread(r[mode]), f"{statistics.median(r[mode]) / peer:.2f}x"]
                print(f"| {dataset} | {label} | {' | '.join(cells)} |")
            differ = [label for label, r in rounds.items() if min(r["same"]) < 1]
            if differ:
                print(f"On {dataset}, batch 1 wrote other entities than the batches for: {', '.join(differ)}")
    if "training" in args.parts:
        print(f"\n| training, {args.batches} batches of 10 | pipeline | sentences/s | s/epoch |")
        print("|---|---|---|---|")
        for dataset in args.datasets:
            for arch, cfg in [*chosen.items(), ("spaCy ner", "")]:
                if dataset == "resume" and arch in pipelines:
                    nlp = pipelines.pop(arch)
                elif arch == "spaCy ner":
                    nlp = spacy_ner(dataset)
                else:
                    nlp = from_config(cfg.format(dataset), dataset)
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
    write_record(args, all_rounds, all_rates, memory, load, trained)


if __name__ == "__main__":
    main()
