"""Dropout, forward and backward: `spacy_flat.nn.dropout.Dropout` (the mask drawn as uniform
numbers) against `torch.nn.Dropout` (`bernoulli_`), side by side, alternating, on the shapes
the models drop in a Resume training step: the embeddings before the input projections, the
Lattice LSTM's output, and FLAT's attention weights (batch, heads, tokens, tokens).

    OMP_NUM_THREADS=1 python benchmarks/dropout_speed.py --repeats 200
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
from common import load_average, machine

from spacy_flat.nn.dropout import Dropout

# name -> shape: about ten Resume sentences of 33 characters and 15 lexicon words each.
SHAPES: Dict[str, Tuple[int, ...]] = {
    "characters (330, 128)": (330, 128),
    "words (150, 50)": (150, 50),
    "Lattice LSTM output (10, 40, 200)": (10, 40, 200),
    "FLAT attention (10, 8, 55, 55)": (10, 8, 55, 55),
    "FLAT attention, long rows (4, 8, 250, 250)": (4, 8, 250, 250),
}


def step_us(layer: nn.Module, x: torch.Tensor, grad: torch.Tensor) -> float:
    start = time.perf_counter()
    layer(x).backward(grad)
    return (time.perf_counter() - start) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--p", type=float, default=0.5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"Machine: {machine()}; {load_average()} (before)\n")
    print("| shape | torch.nn.Dropout, µs | spacy-flat Dropout, µs | ratio |")
    print("|---|---|---|---|")
    ours, native = Dropout(args.p).train(), nn.Dropout(args.p).train()
    for name, shape in SHAPES.items():
        x = torch.randn(*shape, requires_grad=True)
        grad = torch.randn(*shape)
        times: Dict[str, List[float]] = {"native": [], "ours": []}
        for _ in range(args.repeats):
            times["native"].append(step_us(native, x, grad))
            times["ours"].append(step_us(ours, x, grad))
        a, b = statistics.median(times["native"]), statistics.median(times["ours"])
        print(f"| {name} | {a:.0f} | {b:.0f} | {a / b:.2f}x |")
    print(f"\nMedians of {args.repeats} alternating forward + backward passes, p = {args.p}; {load_average()} (after)")


if __name__ == "__main__":
    main()
