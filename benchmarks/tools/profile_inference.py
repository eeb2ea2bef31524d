"""Where inference time goes: cProfile over `nlp.pipe` at several batch sizes and decodings.

Profile before optimising: this prints, for each batch size (and each --decodings setting of
flat_ner's `decoding`), the characters per second under the profiler and the cumulative share of the
stages that matter: lattice features, the encoder (and inside it the position triples, fused
positions, position scores, the kept position rows looked up, attention and its mask), the copy of
the emissions to the host, the NumPy decoding (Viterbi, the entity spans and probabilities), the
decoding on the model's device (`layers.device_decoder.decode_on_device`: Viterbi, the entity runs,
their probabilities and the one copy of the runs back) and the writing of the entities. Each stage
is named by its function under spacy_flat (a renamed one fails here at once). The figures are
shares, for comparing stages; time speeds with `benchmarks/speed.py` or `benchmarks/family.py` on a
quiet machine.

    OMP_NUM_THREADS=1 python benchmarks/tools/profile_inference.py resume --model training/resume/model-best
    OMP_NUM_THREADS=1 python benchmarks/tools/profile_inference.py msra --batch-sizes 1 64 --top 25
    python benchmarks/tools/profile_inference.py resume --gpu-id 0 --docs 512 --pool --batch-sizes 1 64 256 \\
        --decodings auto numpy --model /tmp/flat-300 --train-steps 300      # the GPU lane's run

--model: a saved pipeline; where there is none, flat_ner initialized on DATASET, or with --train-steps
FLAT trained that many updates (`family.trained_flat`, saved to --model when given, so that
benchmarks/family.py --trained-dir can time the same one). --pool repeats the test set up to --docs.

On a GPU the host waits for the device's queued work where it first reads a result back: the
encoder's kernels mostly count under the copy of the emissions to the host (`host_emissions`) with
NumPy decoding, and under the device decoding's waits (the count of entity marks in `entity_runs`,
the copy of the runs) with device decoding.

The run writes its shares as the result record speed-gpu-profile-DATASET (speed-cpu-profile-DATASET
without --gpu-id; benchmarks/results.py; --results DIR: elsewhere), which render.py shows beside the
GPU family table.
"""

import argparse
import cProfile
import importlib
import inspect
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, cast

import spacy
import torch
from spacy.language import Language

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts beside tools/
sys.path.insert(0, str(Path(__file__).parent))
from common import load_average, machine, texts
from family import pooled, trained_flat
from profile_training import cumulative_seconds
from results import record, results_option
from speed import flat

from spacy_flat.pipeline.flat_ner import FlatNER

# (label, function under spacy_flat, depth: a stage inside the one above it)
STAGES: List[Tuple[str, str, int]] = [
    ("lattice features", "layers.featurizer._forward", 0),
    ("thinc -> torch inputs", "layers.torch_tagger._convert_inputs", 0),
    ("encoder", "nn.tagger.LatticeTagger.forward", 0),
    ("position triples", "nn.flat.positions.relative_positions", 1),
    ("fused positions", "nn.flat.positions.PositionFusion.forward", 1),
    ("attention", "nn.flat.encoder.FlatAttention.forward", 1),
    ("position scores", "nn.flat.position_scores._PositionScores.forward", 2),
    ("projected positions looked up (prediction on a CPU)", "nn.flat.position_keys.PositionKeyCache.keys", 2),
    ("attention mask", "nn.flat.encoder.FlatEncoder._attention_mask", 1),
    ("emissions copied to the host, waiting for the device", "layers.arrays.host_emissions", 0),
    ("NumPy decoding: Viterbi", "layers.tagger_handle.TorchTagger.best_paths", 0),
    ("NumPy decoding: the entities' probabilities", "layers.tagger_handle.TorchTagger.span_probabilities", 0),
    ("entity spans mapped to the docs", "pipeline.confidence.Decoded.scored", 0),
    ("device decoding", "layers.device_decoder.decode_on_device", 0),
    ("Viterbi", "crf.device_decoding.viterbi", 1),
    ("entity runs, waiting for the device (their count)", "crf.device_decoding.entity_runs", 1),
    ("run probabilities", "crf.device_decoding.run_probabilities", 1),
    ("runs copied to the host, waiting for the device", "layers.device_decoder._one_copy", 1),
    ("writing entities", "pipeline.confidence.write_entities", 0),
]


def profile_key(stage: str) -> Tuple[str, int, str]:
    """cProfile's key (file, first line, name) of the function `stage` names under spacy_flat:
    a module path, then attributes (`nn.tagger.LatticeTagger.forward`)."""
    parts = stage.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found: Any = importlib.import_module("spacy_flat." + ".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        code = inspect.unwrap(found).__code__  # the function itself, not a decorator's wrapper
        return code.co_filename, code.co_firstlineno, code.co_name
    raise ValueError(f"no function {stage} under spacy_flat")


def load(model: str, dataset: str, train_steps: int = 0) -> Language:
    if train_steps:
        return trained_flat(dataset, train_steps, Path(model) if model else None)
    # A model path not yet written profiles flat_ner initialized, not trained, as speed.py builds it.
    return flat(model if model and Path(model).exists() else "", dataset)


def profile_figures(columns: List[Dict[str, Any]], seconds: List[List[float]]) -> Dict[str, Any]:
    """The figures of speed-gpu-profile-DATASET: `columns` (decoding, on_device, batch_size, chars_per_s,
    profiled_s), and a row a stage with its share (percent of the profiled time) in each column.

    seconds: a stage's cumulative seconds in each column, in STAGES' order."""
    rows = [
        {
            "stage": stage,
            "label": label,
            "depth": depth,
            "shares": [round(100 * spent[k] / column["profiled_s"], 1) for k, column in enumerate(columns)],
        }
        for (label, stage, depth), spent in zip(STAGES, seconds)
    ]
    return {"columns": columns, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=["resume", "weibo", "msra"])
    parser.add_argument("--model", default="", help="a saved pipeline; default: flat_ner initialized on DATASET")
    parser.add_argument("--train-steps", type=int, default=0, help="FLAT trained this many updates (see above)")
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--pool", action="store_true", help="repeat the test set in order up to --docs docs")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument(
        "--decodings", nargs="+", choices=("auto", "numpy", "torch"), default=["auto"], help="flat_ner's decoding"
    )
    parser.add_argument("--top", type=int, default=0, help="also print the N costliest functions by own time")
    parser.add_argument("--gpu-id", type=int, default=-1, help="run the pipeline on this GPU")
    results_option(parser)
    args = parser.parse_args()
    keys = [profile_key(stage) for _, stage, _ in STAGES]
    before = round(os.getloadavg()[0], 2)
    if args.gpu_id >= 0:
        from thinc.api import set_gpu_allocator

        spacy.require_gpu(args.gpu_id)
        set_gpu_allocator("pytorch")
    nlp = load(args.model, args.dataset, args.train_steps)
    ner = cast(FlatNER, nlp.get_pipe("flat_ner"))
    docs = texts(args.dataset, "test")
    docs = pooled(docs, args.docs) if args.pool else docs[: args.docs]
    chars = sum(len(t) for t in docs)
    print(f"Machine: {machine()}, {torch.get_num_threads()} torch thread(s); {load_average()}")
    print(f"{args.dataset} test, {len(docs)} docs, {chars:,} characters\n")
    columns: List[Dict[str, Any]] = []
    seconds: List[List[float]] = [[] for _ in STAGES]
    for decoding in args.decodings:
        ner.cfg["decoding"] = decoding
        list(nlp.pipe(docs[:64], batch_size=64))  # untimed: first-call set-up
        for size in args.batch_sizes:
            profile = cProfile.Profile()
            start = time.perf_counter()
            profile.enable()
            list(nlp.pipe(docs, batch_size=size))
            profile.disable()
            total = time.perf_counter() - start
            stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
            profiled = sum(entry[2] for entry in stats.values())
            columns.append(
                {
                    "decoding": decoding,
                    "on_device": ner.decodes_on_device,
                    "batch_size": size,
                    "chars_per_s": round(chars / total),
                    "profiled_s": round(profiled, 3),
                }
            )
            for k, key in enumerate(keys):
                seconds[k].append(cumulative_seconds(stats, key))
            if args.top:
                print(f"decoding {decoding}, batch {size}: the {args.top} costliest functions by own time")
                pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    figures = profile_figures(columns, seconds)
    heads = [f"{'device' if c['on_device'] else 'NumPy'} decoding, batch {c['batch_size']}" for c in columns]
    print("| stage of nlp.pipe | function | " + " | ".join(heads) + " |")
    print("|---|---|" + "---|" * len(columns))
    print("| chars/s under the profiler | | " + " | ".join(f"{c['chars_per_s']:,}" for c in columns) + " |")
    for row in figures["rows"]:
        label = "· " * row["depth"] + row["label"]
        print(f"| {label} | {row['stage']} | " + " | ".join(f"{share:.1f}%" for share in row["shares"]) + " |")
    print(f"\nAfter: {load_average()}")
    gpu = args.gpu_id >= 0
    where = f"one {torch.cuda.get_device_name(args.gpu_id)}" if gpu else "the CPU"
    trained: Optional[Dict[str, Any]] = nlp.meta.get("trained")
    if trained:
        model = f"FLAT trained {trained['steps']} steps on {trained['dataset'].capitalize()}"
    elif args.model and Path(args.model).exists():
        model = f"the pipeline {args.model}"
    else:
        model = "FLAT initialized, not trained"
    setup: Dict[str, Any] = {"docs": len(docs), "chars": chars, "pooled": args.pool, "model": model}
    if trained:
        setup["trained"] = trained
    record(
        f"speed-{'gpu' if gpu else 'cpu'}-profile-{args.dataset}",
        "speed-gpu" if gpu else "speed-cpu",
        f"Where nlp.pipe's time goes on {where}: each stage's share of the profiled time, {model}",
        figures,
        dataset=args.dataset,
        setup=setup,
        load_before=before,
        gpu_id=args.gpu_id,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
