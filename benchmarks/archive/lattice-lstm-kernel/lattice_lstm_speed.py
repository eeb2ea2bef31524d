"""The Lattice LSTM's training speed batched against one sentence a step, as the released code trains.

Zhang and Yang's `LatticeLSTM.forward` asserts a batch of one: each step is one sentence, its words
gathered in Python at every character. Three ways to train on the same sentences, in alternating
rounds, one torch thread:

- the released design (benchmarks/released_lattice_lstm.py: its loops re-created on today's PyTorch,
  the same sizes), one sentence a step;
- `spacy-flat.LatticeLstmTagger.v1` (configs/<dataset>_lattice_lstm.cfg, initialized, not trained)
  one sentence a step: still vectorised over the words ending at each character and both directions;
- the same in batches of ten (the config's batcher gives about as many), through `nlp.update`,
  featurizing included.

    OMP_NUM_THREADS=1 python benchmarks/lattice_lstm_speed.py resume --sentences 200 --rounds 3
    python benchmarks/lattice_lstm_speed.py resume --gpu-id 0   # both on a GPU (the released code ran on one)

On a GPU the record is speed-gpu-lattice-lstm-training-<dataset>, else speed-cpu-...
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch
from spacy.language import Language
from spacy.training import Example, offsets_to_biluo_tags
from spacy.util import registry

sys.path.insert(0, str(Path(__file__).parent))
from common import examples, load_average, machine, train_split
from family import from_config, use_gpu
from released_lattice_lstm import ReleasedLatticeLstm, sentences_of, train_rate
from results import record, results_option


def sentences_per_second(nlp: Language, batches: List[List[Example]]) -> float:
    optimizer = nlp.resume_training()
    nlp.update(batches[0], sgd=optimizer)  # first-call set-up is not a training cost
    start = time.perf_counter()
    for batch in batches:
        nlp.update(batch, sgd=optimizer)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()  # the GPU's queue belongs to the steps timed
    return sum(len(batch) for batch in batches) / (time.perf_counter() - start)


def config_batches(nlp: Language, egs: List[Example], size: int = 0) -> List[List[Example]]:
    """`egs` in the batches the config's `[training.batcher]` makes (sentences of like
    length together), in a fixed shuffled order as training would see them.

    size (int): The batcher's `size` in its place (0: the config's).
    """
    settings = dict(nlp.config["training"]["batcher"])
    if size:
        settings["size"] = size
    batcher = registry.resolve({"batcher": settings})["batcher"]
    batches = [list(batch) for batch in batcher(egs)]
    random.Random(0).shuffle(batches)
    return batches


def released_inputs(nlp: Language, egs: List[Example]):
    """The stand-in's model, sentences and gold tag ids for `egs`, with the config's sizes."""
    ner = nlp.get_pipe("flat_ner")
    texts = [eg.reference.text for eg in egs]
    sentences, chars, words = sentences_of(texts, [ner.lexicon.matches(text) for text in texts])
    spans = [[(e.start_char, e.end_char, e.label_) for e in eg.reference.ents] for eg in egs]
    tags = [offsets_to_biluo_tags(eg.reference, found) for eg, found in zip(egs, spans)]
    names = sorted({tag for row in tags for tag in row})
    ids = [torch.tensor([names.index(tag) for tag in row]) for row in tags]
    model_config = nlp.config["components"]["flat_ner"]["model"]
    model = ReleasedLatticeLstm(
        chars, words, len(names), model_config["char_width"], model_config["word_width"], model_config["width"]
    )
    return model, sentences, ids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=("resume", "weibo", "msra"))
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10, help="sentences a step when batched")
    parser.add_argument(
        "--sizes", type=int, nargs="*", default=[], help="also the config's batcher with these `size`s (padded chars)"
    )
    parser.add_argument("--gpu-id", type=int, default=-1, help="train both on this GPU (default: CPU)")
    parser.add_argument(
        "--set", nargs="+", default=[], metavar="KEY=JSON", help="config overrides (the record's name gains the keys)"
    )
    results_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    gpu = args.gpu_id >= 0
    if gpu:
        use_gpu(args.gpu_id)
    where = f"one {torch.cuda.get_device_name(args.gpu_id)}" if gpu else "one CPU thread"
    print(f"Machine: {machine()}; {load_average()} (before); training on {where}")
    overrides = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.set)}
    nlp = from_config(f"{args.dataset}_lattice_lstm.cfg", args.dataset, overrides)
    every = examples(nlp, args.dataset, train_split(args.dataset))
    egs = every[:: max(1, len(every) // args.sentences)][: args.sentences]
    model, sentences, tags = released_inputs(nlp, egs)
    if gpu:
        model.to(f"cuda:{args.gpu_id}")
    train_rate(model, sentences[:2], tags[:2])  # first-call set-up is not a training cost
    ways = {
        "one sentence a step": [[eg] for eg in egs],
        f"batches of {args.batch} in reading order": [egs[i : i + args.batch] for i in range(0, len(egs), args.batch)],
        "the config's batcher (like lengths together)": config_batches(nlp, egs),
    }
    for size in args.sizes:
        ways[f"the config's batcher at size {size}"] = config_batches(nlp, egs, size)
    released: List[float] = []
    rates: Dict[str, List[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        released.append(train_rate(model, sentences, tags))
        for name, batches in ways.items():
            rates[name].append(sentences_per_second(nlp, batches))
    base = statistics.median(released)
    sizes = [len(batch) for batch in ways["the config's batcher (like lengths together)"]]
    print(f"{len(egs)} {args.dataset} training sentences, {args.rounds} rounds; {load_average()} (after)\n")
    # Each round times the released design first, then every way: a ratio within a round pairs
    # runs seconds apart, so it holds where a shared machine's speed drifts between rounds.
    print("| Lattice LSTM training | sentences/s (median) | range | against the released design | per round |")
    print("|---|---|---|---|---|")
    rows = [("the released design, one sentence a step", released)]
    for name, found in rates.items():
        mean = statistics.mean(len(batch) for batch in ways[name])
        rows.append((f"spacy-flat, {name}" + (f", {mean:.1f} sentences a batch" if mean > 1 else ""), found))
    paired = {label: [rate / first for rate, first in zip(found, released)] for label, found in rows}
    for label, found in rows:
        median, ratios = statistics.median(found), paired[label]
        print(
            f"| {label} | {median:.1f} | {min(found):.1f}–{max(found):.1f} | {median / base:.2f}x "
            f"| {statistics.median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f}) |"
        )
    print(f"\nThe config's batches: {len(sizes)}, {statistics.mean(sizes):.1f} sentences on average.")
    # A step's time as a fixed part and a part per sentence, from the rows of like-length batches
    # (one sentence a step, the config's batcher at each size): what batching alone can reach.
    fitted = [name for name in ways if name == "one sentence a step" or name.startswith("the config's batcher")]
    per_batch = [statistics.mean(len(batch) for batch in ways[name]) for name in fitted]
    step_ms = [1000 * n / statistics.median(rates[name]) for n, name in zip(per_batch, fitted)]
    slope, intercept = statistics.linear_regression(per_batch, step_ms)
    ceiling = 1000 / base / slope
    print(
        f"A step takes {intercept:.1f} ms + {slope:.2f} ms a sentence (least squares over {len(fitted)} rows); "
        f"the released design {1000 / base:.1f} ms a sentence, so batches alone reach at most {ceiling:.1f}x."
    )
    figures = {
        "rows": [
            {
                "mode": label,
                "sentences_per_s": {
                    "median": round(statistics.median(found), 1),
                    "min": round(min(found), 1),
                    "max": round(max(found), 1),
                },
                "against_released": round(statistics.median(found) / base, 2),
                "per_round": {
                    "median": round(statistics.median(paired[label]), 2),
                    "min": round(min(paired[label]), 2),
                    "max": round(max(paired[label]), 2),
                },
            }
            for label, found in rows
        ],
        "baseline": rows[0][0],
        "ratio": round(statistics.median(rates["the config's batcher (like lengths together)"]) / base, 2),
        "batch_mean": round(statistics.mean(sizes), 1),
        "fit": {"step_ms": round(intercept, 2), "sentence_ms": round(slope, 3), "ceiling": round(ceiling, 2)},
    }
    title = f"Lattice LSTM training on {where}, {len(egs)} {args.dataset} sentences: against the released design"
    kind = "speed-gpu" if gpu else "speed-cpu"
    variant = "".join("-" + key.rsplit(".", 1)[-1].replace("_", "-") for key in overrides)
    record(
        f"{kind}-lattice-lstm-training-{args.dataset}{variant}",
        kind,
        title,
        figures,
        dataset=args.dataset,
        setup={"sentences": len(egs), "rounds": args.rounds, **({"overrides": overrides} if overrides else {})},
        load_before=load,
        gpu_id=args.gpu_id,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
