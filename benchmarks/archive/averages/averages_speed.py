"""Training with parameter averages (`use_averages = true`) against without, on the Lattice LSTM's SGD.

thinc's optimizer moves every parameter's average after each step; for the embedding tables that is a
pass over every row, and it used to bring back the tables' dense step. Three ways to train on the same
batches (the config's batcher over the same sentences), in alternating rounds, one torch thread, each
on a pipeline of its own made from configs/<dataset>_lattice_lstm.cfg:

- the config's SGD, no averages: the tables stepped row by row;
- averaged SGD as thinc steps it: the tables' gradients made dense, stepped and averaged in full
  (what `use_averages = true` ran before the tables' averages were kept row by row);
- averaged SGD with the tables' averages kept row by row (`spacy_flat/layers/row_averages.py`).

    OMP_NUM_THREADS=1 python benchmarks/averages_speed.py resume --sentences 400 --rounds 5
"""

import argparse
import contextlib
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import torch
from spacy.language import Language
from spacy.training import Example
from thinc.api import Optimizer

sys.path.insert(0, str(Path(__file__).parent))
from common import examples, load_average, machine, require_quiet, train_split
from family import from_config
from lattice_lstm_speed import config_batches, sentences_per_second

import spacy_flat.layers.shim as shim_module

WAYS = {
    "SGD, no averages (the config)": False,
    "averaged SGD, dense tables (thinc's step)": True,
    "averaged SGD, tables' averages row by row": True,
}
DENSE = "averaged SGD, dense tables (thinc's step)"


@contextlib.contextmanager
def dense_tables() -> Iterator[None]:
    """Step the tables as thinc does whenever the optimizer keeps averages."""
    row_wise = shim_module.plain_sgd

    def without_averages(optimizer: Optimizer) -> bool:
        return row_wise(optimizer) and optimizer.averages is None

    shim_module.plain_sgd = without_averages
    try:
        yield
    finally:
        shim_module.plain_sgd = row_wise


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=("resume", "weibo", "msra"))
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--allow-busy", action="store_true", help="time even on a busy machine")
    args = parser.parse_args()
    require_quiet(args.allow_busy)
    torch.set_num_threads(1)
    print(f"Machine: {machine()}; {load_average()} (before); one CPU thread")
    pipelines: Dict[str, Language] = {
        name: from_config(
            f"{args.dataset}_lattice_lstm.cfg", args.dataset, {"training.optimizer.use_averages": averages}
        )
        for name, averages in WAYS.items()
    }
    first = next(iter(pipelines.values()))
    every = examples(first, args.dataset, train_split(args.dataset))
    egs: List[Example] = every[:: max(1, len(every) // args.sentences)][: args.sentences]
    batches = config_batches(first, egs)
    rates: Dict[str, List[float]] = {name: [] for name in WAYS}
    for _ in range(args.rounds):
        for name, nlp in pipelines.items():
            with dense_tables() if name == DENSE else contextlib.nullcontext():
                rates[name].append(sentences_per_second(nlp, batches))
    print(f"{len(egs)} {args.dataset} training sentences in {len(batches)} batches, {args.rounds} rounds; ", end="")
    print(f"{load_average()} (after)\n")
    base = rates[next(iter(WAYS))]
    print("| Lattice LSTM training | sentences/s (median) | range | against no averages, per round |")
    print("|---|---|---|---|")
    for name, found in rates.items():
        paired = [rate / first_rate for rate, first_rate in zip(found, base)]
        print(
            f"| {name} | {statistics.median(found):.1f} | {min(found):.1f}–{max(found):.1f} "
            f"| {statistics.median(paired):.2f}x ({min(paired):.2f}–{max(paired):.2f}) |"
        )
    print(f"\nOMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")


if __name__ == "__main__":
    main()
