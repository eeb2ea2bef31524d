"""The Lattice LSTM's training speed batched against one sentence a step, as the released code trains.

Zhang and Yang's `LatticeLSTM.forward` asserts a batch of one: each step is one sentence, its words
gathered in Python at every character. Here the same model (configs/<dataset>_lattice_lstm.cfg,
initialized, not trained) trains one sentence a step and then batches of ten, in alternating rounds
on the same sentences, one torch thread; the ratio is the batching's gain. One sentence a step here
is still vectorised over the words ending at each character and over both directions, so it is
faster than the released code's loop, and the ratio understates the gain over that code.

    OMP_NUM_THREADS=1 python benchmarks/lattice_lstm_speed.py resume --sentences 200 --rounds 3
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import List

import torch
from spacy.language import Language
from spacy.training import Example

sys.path.insert(0, str(Path(__file__).parent))
from common import examples, load_average, machine, train_split
from family import from_config


def sentences_per_second(nlp: Language, egs: List[Example], batch: int) -> float:
    optimizer = nlp.resume_training()
    nlp.update(egs[:batch], sgd=optimizer)  # first-call set-up is not a training cost
    start = time.perf_counter()
    for i in range(0, len(egs), batch):
        nlp.update(egs[i : i + batch], sgd=optimizer)
    return len(egs) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=("resume", "weibo", "msra"))
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10, help="sentences a step when batched")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"Machine: {machine()}; {load_average()} (before)")
    nlp = from_config(f"{args.dataset}_lattice_lstm.cfg", args.dataset)
    every = examples(nlp, args.dataset, train_split(args.dataset))
    egs = every[:: max(1, len(every) // args.sentences)][: args.sentences]
    single: List[float] = []
    batched: List[float] = []
    for _ in range(args.rounds):
        single.append(sentences_per_second(nlp, egs, 1))
        batched.append(sentences_per_second(nlp, egs, args.batch))
    one, many = statistics.median(single), statistics.median(batched)
    print(f"{len(egs)} {args.dataset} training sentences, {args.rounds} rounds; {load_average()} (after)\n")
    print("| Lattice LSTM training | sentences/s (median) | range |")
    print("|---|---|---|")
    print(f"| one sentence a step (the released code's batch) | {one:.1f} | {min(single):.1f}–{max(single):.1f} |")
    print(f"| batches of {args.batch} | {many:.1f} | {min(batched):.1f}–{max(batched):.1f} |")
    print(f"\nBatched / one a step: {many / one:.2f}x")


if __name__ == "__main__":
    main()
