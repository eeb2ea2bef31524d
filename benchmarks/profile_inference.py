"""Where inference time goes: cProfile over `nlp.pipe` at two batch sizes.

Profile before optimising: this prints, for each batch size, the time per
character and the cumulative share of the parts that matter: lattice features, the
encoder (and inside it the position triples, fused positions, position scores,
attention and feed-forward), CRF decoding, entity probabilities and writing the
entities. The figures are shares, for comparing parts; time speeds with
`benchmarks/speed.py` on a quiet machine.

    OMP_NUM_THREADS=1 python benchmarks/profile_inference.py resume --model training/resume/model-best
    OMP_NUM_THREADS=1 python benchmarks/profile_inference.py msra --batch-sizes 1 64 --top 25
    python benchmarks/profile_inference.py resume --gpu-id 0 --batch-sizes 1 64 256

On a GPU the host waits for the device's queued work where it first reads a result
back: the encoder's kernels mostly count under "copy to the host" (`host_emissions`).
"""

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Callable, List, Tuple, Union

import spacy
import torch
from spacy.language import Language

sys.path.insert(0, str(Path(__file__).parent))
from common import examples, load_average, machine, texts, train_split
from profile_training import cumulative_seconds

from spacy_flat.layers import TorchTagger
from spacy_flat.layers.arrays import host_emissions
from spacy_flat.nn.encoder import FlatTagger
from spacy_flat.nn.flat_layer import FlatAttention
from spacy_flat.nn.position import PositionFusion, relative_positions
from spacy_flat.nn.position_scores import _PositionScores
from spacy_flat.pipeline.confidence import Decoded, write_entities


def _where(function: Callable) -> Tuple[str, int, str]:
    code = function.__code__
    return code.co_filename, code.co_firstlineno, code.co_name


PARTS: List[Tuple[str, Union[Tuple[str, int, str], Tuple[str, str]]]] = [
    ("lattice features (featurizer forward)", ("layers/featurizer.py", "_forward")),
    ("thinc -> torch inputs (_convert_inputs)", ("layers/torch_tagger.py", "_convert_inputs")),
    ("encoder (FlatTagger.forward)", _where(FlatTagger.forward)),
    ("  position triples (relative_positions)", _where(relative_positions)),
    ("  fused positions (PositionFusion.forward)", _where(PositionFusion.forward)),
    ("  attention (FlatAttention.forward)", _where(FlatAttention.forward)),
    ("    position scores (_PositionScores.forward)", _where(_PositionScores.forward)),
    ("  attention mask (_attention_mask)", ("spacy_flat/nn/encoder.py", "_attention_mask")),
    ("CRF decoding (TorchTagger.best_paths)", _where(TorchTagger.best_paths)),
    ("copy to the host, waiting for the device (host_emissions)", _where(host_emissions)),
    ("entity probabilities (Decoded.scored)", _where(Decoded.scored)),
    ("writing entities (write_entities)", _where(write_entities)),
]


def load(model: str, dataset: str) -> Language:
    if model and Path(model).exists():
        return spacy.load(model)
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner")
    egs = examples(nlp, dataset, train_split(dataset), limit=500)
    nlp.initialize(lambda: egs)
    return nlp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=["resume", "weibo", "msra"])
    parser.add_argument("--model", default="", help="a trained pipeline; default: flat_ner initialized on DATASET")
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--top", type=int, default=0, help="also print the N costliest functions by own time")
    parser.add_argument("--gpu-id", type=int, default=-1, help="run the pipeline on this GPU")
    args = parser.parse_args()
    if args.gpu_id >= 0:
        from thinc.api import set_gpu_allocator

        spacy.require_gpu(args.gpu_id)
        set_gpu_allocator("pytorch")
    nlp = load(args.model, args.dataset)
    docs = texts(args.dataset, "test")[: args.docs]
    chars = sum(len(t) for t in docs)
    print(f"Machine: {machine()}, {torch.get_num_threads()} torch thread(s); {load_average()}")
    print(f"{args.dataset} test, {len(docs)} docs, {chars:,} characters\n")
    list(nlp.pipe(docs[:64], batch_size=64))  # untimed: first-call set-up
    columns = []
    for size in args.batch_sizes:
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        list(nlp.pipe(docs, batch_size=size))
        profile.disable()
        total = time.perf_counter() - start
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        profiled = sum(entry[2] for entry in stats.values())
        columns.append((size, total, profiled, [cumulative_seconds(stats, key) for _, key in PARTS]))
        if args.top:
            print(f"batch {size}: the {args.top} costliest functions by own time")
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    print("| part of nlp.pipe | " + " | ".join(f"batch {size}" for size, *_ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    print("| chars/s under the profiler | " + " | ".join(f"{chars / total:,.0f}" for _, total, _, _ in columns) + " |")
    for k, (label, _) in enumerate(PARTS):
        print(
            f"| {label} | "
            + " | ".join(f"{100 * parts[k] / profiled:.1f}%" for _, _, profiled, parts in columns)
            + " |"
        )
    print(f"\nAfter: {load_average()}")


if __name__ == "__main__":
    main()
