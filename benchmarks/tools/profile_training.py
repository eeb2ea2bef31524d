"""Where a training step's time goes: cProfile over `nlp.update` on real batches.

Profile before optimising: this prints the step time and the cumulative time of the
calls that matter (encoder forward and backward, position scores, CRF loss, optimizer,
spaCy's example copies), each as a share of the profiled time.

    OMP_NUM_THREADS=1 python benchmarks/tools/profile_training.py msra --batches 60
"""

import argparse
import cProfile
import pstats
import random
import sys
import time
from pathlib import Path
from typing import Callable, List, Tuple, Union

import spacy
import torch
from spacy.util import fix_random_seed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripts beside tools/
sys.path.insert(0, str(Path(__file__).parent))
from common import examples, machine, train_split

from spacy_flat.layers import TorchTagger
from spacy_flat.layers.shim import InPlacePyTorchShim
from spacy_flat.nn.flat.position_scores import _PositionScores
from spacy_flat.nn.tagger import LatticeTagger


def _where(function: Callable) -> Tuple[str, int, str]:
    """cProfile's key of a Python function: (file, first line, name)."""
    code = function.__code__
    return code.co_filename, code.co_firstlineno, code.co_name


# The profiled calls to report, by cProfile key (ours) or by file suffix and name (libraries').
PARTS: List[Tuple[str, Union[Tuple[str, int, str], Tuple[str, str]]]] = [
    ("FLAT forward (LatticeTagger.forward)", _where(LatticeTagger.forward)),
    ("encoder backward (thinc PyTorchShim.begin_update's backprop)", ("thinc/shims/pytorch.py", "backprop")),
    ("position scores, backward (part of the encoder backward)", _where(_PositionScores.backward)),
    ("position scores, forward (part of the FLAT forward)", _where(_PositionScores.forward)),
    ("CRF loss, forward and backward (TorchTagger.loss)", _where(TorchTagger.loss)),
    ("optimizer (InPlacePyTorchShim.finish_update, thinc Adam)", _where(InPlacePyTorchShim.finish_update)),
    ("spaCy's example copies (Language._copy_examples)", ("spacy/language.py", "_copy_examples")),
]


def cumulative_seconds(stats: dict, key: Union[Tuple[str, int, str], Tuple[str, str]]) -> float:
    """Cumulative seconds of the calls matching `key` (a full key, or a file suffix and name)."""
    if len(key) == 3:
        return stats[key][3] if key in stats else 0.0
    suffix, name = key
    return sum(entry[3] for (path, _, func), entry in stats.items() if path.endswith(suffix) and func == name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=["resume", "weibo", "msra"])
    parser.add_argument("--batches", type=int, default=60, help="updates of --batch-size sentences")
    parser.add_argument("--batch-size", type=int, default=10)
    args = parser.parse_args()
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner")
    egs = examples(nlp, args.dataset, train_split(args.dataset))
    random.Random(0).shuffle(egs)
    nlp.initialize(lambda: egs[:500])
    optimizer = nlp.create_optimizer()
    size = args.batch_size
    batches = [egs[i * size : (i + 1) * size] for i in range(args.batches + 1)]
    nlp.update(batches[0], sgd=optimizer)  # untimed: first-call set-up
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    for batch in batches[1:]:
        nlp.update(batch, sgd=optimizer)
    profile.disable()
    total = time.perf_counter() - start
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    print(f"Machine: {machine()}; torch threads: {torch.get_num_threads()}")
    print(f"{args.dataset}: {args.batches} updates of {size} sentences, {total / args.batches:.3f} s per update\n")
    print("| part of a training step | seconds | share |")
    print("|---|---|---|")
    for label, key in PARTS:
        seconds = cumulative_seconds(stats, key)
        print(f"| {label} | {seconds:.2f} | {100 * seconds / total:.0f}% |")


if __name__ == "__main__":
    main()
