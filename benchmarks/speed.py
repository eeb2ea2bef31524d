"""Inference and training speed of flat_ner against spaCy's own `ner`, side by side.

The peer is what a spaCy user would pick instead: `spacy init config --lang zh
--pipeline ner --optimize accuracy` (no static vectors). Both run in this process on
the same texts; figures are medians of repeated runs.

    python benchmarks/speed.py [--model training/resume/model-best] [--docs 400]
    python benchmarks/speed.py --parts training --batches 40
    python benchmarks/speed.py --parts inference --batch-size 16 [--gpu-id 0]

The batch-parallel speed-up is nlp.pipe's characters per second at --batch-size over
batch 1's (the paper's Figure 3: 4.97x for FLAT at batch 16 on a GPU).
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Dict, List

import spacy
from spacy.language import Language

sys.path.insert(0, str(Path(__file__).parent))
from common import (
    ROOT,
    examples,
    load_average,
    machine,
    median_time,
    require_quiet,
    spacy_ner_config,
    texts,
    train_split,
)

from spacy_flat.layers import TorchTagger


def spacy_ner(train_name: str) -> Language:
    nlp = spacy.util.load_model_from_config(spacy_ner_config(), auto_fill=True)
    egs = examples(nlp, train_name, train_split(train_name))
    nlp.initialize(lambda: egs[:500])
    return nlp


def flat(model: str, train_name: str) -> Language:
    if model and Path(model).exists():
        return spacy.load(model)
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner")
    egs = examples(nlp, train_name, train_split(train_name))
    nlp.initialize(lambda: egs[:500])
    return nlp


def inference(nlp: Language, docs: List[str], repeats: int, batch_size: int) -> Dict[str, float]:
    chars = sum(len(t) for t in docs)
    one = median_time(lambda: [nlp(t) for t in docs], repeats)
    batched = median_time(lambda: list(nlp.pipe(docs, batch_size=batch_size)), repeats)
    return {
        "b1_chars": chars / one,
        "b1_docs": len(docs) / one,
        "batch_chars": chars / batched,
        "batch_docs": len(docs) / batched,
    }


def decode_share(nlp: Language, docs: List[str]) -> float:
    """Fraction of nlp.pipe time spent in CRF decoding."""
    spent = [0.0]
    original = TorchTagger.decode

    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        out = original(*args, **kwargs)
        spent[0] += time.perf_counter() - start
        return out

    TorchTagger.decode = timed  # type: ignore[method-assign]
    try:
        total = median_time(lambda: list(nlp.pipe(docs, batch_size=64)), 1)
    finally:
        TorchTagger.decode = original  # type: ignore[method-assign]
    return spent[0] / total


# Training sentences per epoch: MSRA's train_dev minus the 4,636 dev sentences.
TRAIN_SENTENCES = {"resume": 3821, "msra": 41728}


def training_speed(nlp: Language, name: str, n_batches: int) -> float:
    """Sentences per second over n_batches updates of 10 sentences, spread
    evenly over the training file so the lengths are the epoch's."""
    every = examples(nlp, name, train_split(name))
    step = max(1, len(every) // (n_batches * 10))
    egs = every[::step][: n_batches * 10]
    optimizer = nlp.resume_training()
    nlp.update(egs[:10], sgd=optimizer)  # first-call set-up (allocations, caches) is not a training cost
    start = time.perf_counter()
    for i in range(0, len(egs), 10):
        nlp.update(egs[i : i + 10], sgd=optimizer)
    return len(egs) / (time.perf_counter() - start)


def lattice_speed() -> Dict[str, float]:
    from spacy_flat.lexicon import Lexicon
    from spacy_flat.readers import jieba_dir, read_word_list

    lexicon = Lexicon(read_word_list(jieba_dir() / "dict.txt")[0])
    lexicon.matches("预热")
    sentences = texts("msra", "train_dev")
    chars = sum(len(s) for s in sentences)
    seconds = median_time(lambda: [lexicon.matches(s) for s in sentences], 3)
    words = sum(len(lexicon.matches(s)) for s in sentences)
    return {"chars": chars, "seconds": seconds, "chars_per_s": chars / seconds, "words": words}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(ROOT / "training/resume/model-best"))
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=40, help="training updates of 10 sentences per corpus")
    parser.add_argument("--batch-size", type=int, default=64, help="docs per nlp.pipe batch")
    parser.add_argument("--gpu-id", type=int, default=-1, help="run both pipelines on this GPU (spacy.require_gpu)")
    parts = ("inference", "training", "lattice")
    parser.add_argument("--parts", nargs="+", choices=parts, default=list(parts))
    parser.add_argument(
        "--allow-busy", action="store_true", help="time even when the load average says the machine is busy"
    )
    args = parser.parse_args()
    require_quiet(args.allow_busy)
    if args.gpu_id >= 0:
        spacy.require_gpu(args.gpu_id)
    print(
        f"Machine: {machine()}; {'GPU ' + str(args.gpu_id) if args.gpu_id >= 0 else 'CPU'}; before: {load_average()}\n"
    )
    if "inference" in args.parts:
        ours, peer = flat(args.model, "resume"), spacy_ner("resume")
        print(f"nlp.pipe: batches of {args.batch_size} docs\n")
        print("| test set | pipeline | chars/s batch 1 | docs/s batch 1 | chars/s nlp.pipe | docs/s nlp.pipe |")
        print("|---|---|---|---|---|---|")
        parallel = []
        for name in ("resume", "msra"):
            docs = texts(name, "test")[: args.docs]
            a, b = (
                inference(ours, docs, args.repeats, args.batch_size),
                inference(peer, docs, args.repeats, args.batch_size),
            )
            for label, r in (("flat_ner", a), ("spaCy ner", b)):
                print(
                    f"| {name} ({len(docs)} docs) | {label} | {r['b1_chars']:.0f} | {r['b1_docs']:.1f} | "
                    f"{r['batch_chars']:.0f} | {r['batch_docs']:.1f} |"
                )
            print(
                f"| {name} | **flat/spaCy** | {a['b1_chars'] / b['b1_chars']:.2f}x | | "
                f"{a['batch_chars'] / b['batch_chars']:.2f}x | |"
            )
            for label, r in (("flat_ner", a), ("spaCy ner", b)):
                parallel.append(f"| {name} | {label} | {r['batch_chars'] / r['b1_chars']:.2f}x |")
        print(f"\n| test set | pipeline | batch-parallel speed-up (batch {args.batch_size} over batch 1) |")
        print("|---|---|---|")
        print("\n".join(parallel))
        share = decode_share(ours, texts("resume", "test")[: args.docs])
        print(f"\nCRF decoding: {100 * share:.1f}% of flat_ner's nlp.pipe time on Resume test.")
    if "training" in args.parts:
        print(f"\n| training, {args.batches} batches of 10 | pipeline | sentences/s | s/epoch |")
        print("|---|---|---|---|")
        for name in ("resume", "msra"):
            rates = {}
            for label, nlp in (("flat_ner", flat("", name)), ("spaCy ner", spacy_ner(name))):
                rates[label] = training_speed(nlp, name, args.batches)
                epoch = TRAIN_SENTENCES[name] / rates[label]
                print(f"| {name} ({TRAIN_SENTENCES[name]:,} sentences) | {label} | {rates[label]:.1f} | {epoch:.0f} |")
            print(f"| {name} | **flat/spaCy** | {rates['flat_ner'] / rates['spaCy ner']:.2f}x | |")
    if "lattice" in args.parts:
        lat = lattice_speed()
        print(
            f"\nLattice: {lat['chars']:,} MSRA train_dev characters matched against jieba's 337k words in "
            f"{lat['seconds']:.2f} s ({lat['chars_per_s']:,.0f} chars/s), {lat['words']:,} lattice words."
        )
    print(f"\nAfter: {load_average()}")


if __name__ == "__main__":
    main()
