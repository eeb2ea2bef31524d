"""The CRF loss, forward and backward: our `ConstrainedCRF.nll` against pytorch-crf's
`CRF.forward` on the same module, side by side, on the training batches of each corpus.

Batches are the configs' (`spacy.batch_by_padded.v1`, size 400, buffer 256) over the
training file, gold tags are the corpus's own entities in BILUO; the emissions are
random, since the cost of either implementation does not depend on their values.
The two run alternately on every batch; figures are medians per batch, and the
seconds per epoch are the sums over the sampled batches, scaled to the whole file.

    OMP_NUM_THREADS=1 python benchmarks/crf_loss.py resume weibo msra --batches 300

With --updates N it also times whole training steps (`nlp.update`, batches of 10
shuffled training sentences, default pipeline) N times with each loss, alternating
on the same batches, and prints the median step time of each.

    OMP_NUM_THREADS=1 python benchmarks/crf_loss.py resume msra --batches 0 --updates 60
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple
from unittest import mock

import spacy
import torch
import torchcrf
from spacy.training.batchers import minibatch_by_padded_size

sys.path.insert(0, str(Path(__file__).parent))
from common import examples, machine, train_split

from spacy_flat.crf.model import ConstrainedCRF
from spacy_flat.decoding.tags import TagSet


def timed(loss: Callable[..., torch.Tensor], inputs: Tuple[torch.Tensor, ...], device: str) -> float:
    """Seconds of `loss(*inputs)` and its backward, waiting for the GPU's queue on either side."""
    if device != "cpu":
        torch.cuda.synchronize()
    start = time.perf_counter()
    loss(*inputs).backward()
    if device != "cpu":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def run(name: str, n_batches: int, device: str) -> Dict[str, float]:
    nlp = spacy.blank("zh")
    docs = [eg.reference for eg in examples(nlp, name, train_split(name))]
    tag_set = TagSet(label for doc in docs for ent in doc.ents for label in [ent.label_])
    rows = [tag_set.encode([(e.start_char, e.end_char, e.label_) for e in d.ents], len(d.text)) for d in docs]
    rows = [r for r in rows if r]
    random.Random(0).shuffle(rows)
    batches = list(minibatch_by_padded_size(rows, size=400, buffer=256, discard_oversize=False))
    sampled = random.Random(1).sample(batches, min(n_batches, len(batches)))
    crf = ConstrainedCRF(
        len(tag_set), tag_set.allowed_transitions(), tag_set.allowed_starts(), tag_set.allowed_ends()
    ).to(device)
    gen = torch.Generator().manual_seed(0)
    losses: Dict[str, Callable[..., torch.Tensor]] = {
        "ours": crf.nll,
        "pytorch-crf": lambda emissions, tags, mask: -torchcrf.CRF.forward(crf, emissions, tags, mask, "sum"),
    }
    times: Dict[str, List[float]] = {key: [] for key in losses}
    for batch in sampled:
        length = max(len(r) for r in batch)
        lengths = torch.tensor([len(r) for r in batch])
        mask = (torch.arange(length)[None] < lengths[:, None]).to(device)
        tags = torch.zeros(len(batch), length, dtype=torch.long)
        for b, row in enumerate(batch):
            tags[b, : len(row)] = torch.tensor(row)
        tags = tags.to(device)
        emissions = torch.randn(len(batch), length, len(tag_set), generator=gen).to(device).requires_grad_()

        for key, loss in losses.items():
            times[key].append(timed(loss, (emissions, tags, mask), device))
    scale = len(batches) / len(sampled)
    return {
        "tags": len(tag_set),
        "batches": len(batches),
        "sampled": len(sampled),
        "mean_length": statistics.mean(len(r) for r in rows),
        "ours_ms": statistics.median(times["ours"]) * 1000,
        "theirs_ms": statistics.median(times["pytorch-crf"]) * 1000,
        "ratio": statistics.median(t / o for o, t in zip(times["ours"], times["pytorch-crf"])),
        "ours_epoch_s": sum(times["ours"]) * scale,
        "theirs_epoch_s": sum(times["pytorch-crf"]) * scale,
    }


def training_steps(name: str, n_updates: int) -> Dict[str, float]:
    """Median seconds of `nlp.update` with our loss and with pytorch-crf's, alternating on the same batches."""
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner")
    egs = examples(nlp, name, train_split(name))
    random.Random(0).shuffle(egs)
    nlp.initialize(lambda: egs[:500])
    optimizer = nlp.create_optimizer()
    ours = ConstrainedCRF.nll

    def theirs(crf: ConstrainedCRF, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return -torchcrf.CRF.forward(crf, emissions.float(), tags, mask, "sum")

    nlp.update(egs[:10], sgd=optimizer)  # first-call set-up
    times: Dict[str, List[float]] = {"ours": [], "pytorch-crf": []}
    for i in range(n_updates):
        batch = egs[10 * (i + 1) : 10 * (i + 2)]
        for key, loss in (("ours", ours), ("pytorch-crf", theirs)):
            with mock.patch.object(ConstrainedCRF, "nll", loss):
                start = time.perf_counter()
                nlp.update(batch, sgd=optimizer)
                times[key].append(time.perf_counter() - start)
    return {key: statistics.median(values) for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("datasets", nargs="+", choices=["resume", "weibo", "msra"])
    parser.add_argument("--batches", type=int, default=300, help="batches sampled per corpus")
    parser.add_argument("--updates", type=int, default=0, help="also time this many whole training steps with each")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    print(f"Machine: {machine()}; torch threads: {torch.get_num_threads()}; device: {args.device}")
    if args.batches:
        print(
            "\n| corpus | tags | batches sampled (of) | mean chars | ours ms/batch | pytorch-crf ms/batch "
            "| pytorch-crf / ours (median per batch) | ours s/epoch | pytorch-crf s/epoch |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for name in args.datasets:
            r = run(name, args.batches, args.device)
            print(
                f"| {name} | {r['tags']} | {r['sampled']} ({r['batches']}) | {r['mean_length']:.1f} "
                f"| {r['ours_ms']:.2f} | {r['theirs_ms']:.2f} | **{r['ratio']:.2f}×** "
                f"| {r['ours_epoch_s']:.1f} | {r['theirs_epoch_s']:.1f} |",
                flush=True,
            )
    if args.updates:
        print("\n| corpus | training step, our loss (s, median) | with pytorch-crf's loss | pytorch-crf / ours |")
        print("|---|---|---|---|")
        for name in args.datasets:
            steps = training_steps(name, args.updates)
            ratio = steps["pytorch-crf"] / steps["ours"]
            print(f"| {name} | {steps['ours']:.3f} | {steps['pytorch-crf']:.3f} | **{ratio:.2f}×** |", flush=True)


if __name__ == "__main__":
    main()
