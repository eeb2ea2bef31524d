"""Inference and training speed of flat_ner against spaCy's own `ner`, side by side.

The peer is what a spaCy user would pick instead: `spacy init config --lang zh
--pipeline ner --optimize accuracy` (no static vectors). Both run in this process on
the same texts; figures are medians of repeated runs.

    python benchmarks/speed.py [--model training/resume/model-best] [--docs 400]
    python benchmarks/speed.py --parts training --batches 40
    python benchmarks/speed.py --parts inference --batch-size 16 [--gpu-id 0]

The batch-parallel speed-up is nlp.pipe's characters per second at --batch-size over
batch 1's (the paper's Figure 3: 4.97x for FLAT at batch 16 on a GPU).

Each part also writes its figures as a result record (benchmarks/results.py) under benchmarks/results/:
speed-cpu-inference-N-threads, memory-pipe-batchB, speed-cpu-training (speed-gpu-… on a GPU; --results DIR:
elsewhere).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

import spacy
import torch
from spacy.language import Language
from spacy.tokens import Doc

sys.path.insert(0, str(Path(__file__).parent))
from common import (
    ROOT,
    examples,
    load_average,
    machine,
    median_time,
    n_docs,
    require_quiet,
    spacy_ner_config,
    texts,
    train_split,
)
from results import record, results_option

from spacy_flat.layers import TorchTagger


def spacy_ner(train_name: str) -> Language:
    nlp = spacy.util.load_model_from_config(spacy_ner_config(), auto_fill=True)
    egs = examples(nlp, train_name, train_split(train_name), limit=500)
    nlp.initialize(lambda: egs)
    return nlp


def flat(model: str, train_name: str) -> Language:
    """The trained pipeline at `model`, or (no model given) flat_ner initialized on 500 training docs."""
    if model:
        if not Path(model).exists():
            raise SystemExit(f"error: no trained pipeline at {model}")
        return spacy.load(model)
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner")
    egs = examples(nlp, train_name, train_split(train_name), limit=500)
    nlp.initialize(lambda: egs)
    return nlp


def entities(docs: Iterable[Doc]) -> List[List[Tuple[int, int, str]]]:
    return [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs]


def inference(
    pipelines: Dict[str, Language],
    docs: List[str],
    repeats: int,
    batch_size: int,
    large_batch: int = 0,
    b1_docs: int = 0,
) -> Dict[str, Dict[str, List[float]]]:
    """Characters per second of each pipeline one doc at a time and under
    nlp.pipe, over `repeats` rounds that interleave every pipeline and mode, so
    that a change in the machine's load reaches them all alike.

    large_batch (int): Also time nlp.pipe at this batch size ("large"; 0: not).
    b1_docs (int): Time one doc at a time over the first `b1_docs` docs only (0: all); their
        entities are compared with the batches' for those docs.
    RETURNS: pipeline -> {"b1": [chars/s per round], "batch": [...], ("large": [...],)
        "same": [1.0 if the batched entities equal those one doc at a time]}.
    """
    single = docs[:b1_docs] if b1_docs else docs
    chars, single_chars = sum(len(t) for t in docs), sum(len(t) for t in single)
    sizes = {"batch": batch_size, **({"large": large_batch} if large_batch else {})}
    out: Dict[str, Dict[str, List[float]]] = {
        name: {"b1": [], **{mode: [] for mode in sizes}, "same": []} for name in pipelines
    }
    for nlp in pipelines.values():  # untimed warm-up: first-call set-up is not a cost
        for size in sizes.values():
            list(nlp.pipe(docs[:size], batch_size=size))
    for _ in range(repeats):
        for name, nlp in pipelines.items():
            start = time.perf_counter()
            one = [nlp(t) for t in single]
            out[name]["b1"].append(single_chars / (time.perf_counter() - start))
            same = True
            for mode, size in sizes.items():
                start = time.perf_counter()
                batched = list(nlp.pipe(docs, batch_size=size))
                out[name][mode].append(chars / (time.perf_counter() - start))
                same = same and entities(one) == entities(batched[: len(single)])
            out[name]["same"].append(float(same))
    return out


def spread(values: List[float]) -> str:
    """RETURNS (str): The median and range of chars/s figures."""
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def decode_share(nlp: Language, docs: List[str]) -> float:
    """Fraction of nlp.pipe time spent in CRF decoding: Viterbi and the entity probabilities on
    the host, or both on the device (whichever the pipeline's `decoding` runs)."""
    spent = [0.0]
    names = ("best_paths", "span_probabilities", "device_runs")
    originals = {name: getattr(TorchTagger, name) for name in names}

    def timed(original):  # type: ignore[no-untyped-def]
        def run(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            out = original(*args, **kwargs)
            spent[0] += time.perf_counter() - start
            return out

        return run

    for name, original in originals.items():
        setattr(TorchTagger, name, timed(original))
    try:
        total = median_time(lambda: list(nlp.pipe(docs, batch_size=64)), 1)
    finally:
        for name, original in originals.items():
            setattr(TorchTagger, name, original)
    return spent[0] / total


# Training sentences per epoch: MSRA's train_dev minus the 4,636 dev sentences.
TRAIN_SENTENCES = {"resume": 3821, "msra": 41728}


def training_speed(nlp: Language, name: str, n_batches: int) -> float:
    """Sentences per second over n_batches updates of 10 sentences, spread
    evenly over the training file so the lengths are the epoch's."""
    step = max(1, n_docs(name, train_split(name)) // (n_batches * 10))
    egs = examples(nlp, name, train_split(name), step=step, limit=n_batches * 10)
    optimizer = nlp.resume_training()
    nlp.update(egs[:10], sgd=optimizer)  # first-call set-up (allocations, caches) is not a training cost
    start = time.perf_counter()
    for i in range(0, len(egs), 10):
        nlp.update(egs[i : i + 10], sgd=optimizer)
    return len(egs) / (time.perf_counter() - start)


def pipe_memory(model: str, name: str, batch_size: int, n_docs: int) -> float:
    """Peak resident memory of nlp.pipe over a test set above the memory before
    it (MB), in a fresh process so the high-water mark is this run's alone."""
    import subprocess

    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); from speed import flat; "
        "from common import texts, reset_peak_rss, peak_rss_mb; "
        f"nlp = flat({model!r}, 'resume'); docs = texts({name!r}, 'test')[:{n_docs}]; "
        "list(nlp.pipe(docs[:8])); base = reset_peak_rss(); "
        f"list(nlp.pipe(docs, batch_size={batch_size})); print(peak_rss_mb() - base)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def lattice_speed() -> Dict[str, float]:
    from spacy_flat.lattice.lexicon import Lexicon
    from spacy_flat.lattice.readers import jieba_dir, read_word_list

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
    parts = ("inference", "memory", "training", "lattice")
    parser.add_argument("--parts", nargs="+", choices=parts, default=list(parts))
    parser.add_argument(
        "--allow-busy", action="store_true", help="time even when the load average says the machine is busy"
    )
    results_option(parser)
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 2)
    where = "gpu" if args.gpu_id >= 0 else "cpu"
    saved = {"load_before": load, "gpu_id": args.gpu_id, "out_dir": args.results}
    require_quiet(args.allow_busy)
    if args.gpu_id >= 0:
        spacy.require_gpu(args.gpu_id)
    print(
        f"Machine: {machine()}; {'GPU ' + str(args.gpu_id) if args.gpu_id >= 0 else 'CPU'}; before: {load_average()}\n"
    )
    if "inference" in args.parts:
        ours, peer = flat(args.model, "resume"), spacy_ner("resume")
        # The same model without entity probabilities: their overhead.
        plain = flat(args.model, "resume")
        plain.get_pipe("flat_ner").cfg["scores_key"] = None
        print(
            f"nlp.pipe: batches of {args.batch_size} docs; {torch.get_num_threads()} torch thread(s); "
            f"chars/s median (range) over {args.repeats} interleaved rounds\n"
        )
        print(
            f"| test set | pipeline | chars/s batch 1 | chars/s batch {args.batch_size} | batch {args.batch_size} / "
            "batch 1 | same entities batched |"
        )
        print("|---|---|---|---|---|---|")
        figures: dict = {"rows": [], "ratio": {}, "probabilities_cost_pct": {}}
        for name in ("resume", "msra"):
            docs = texts(name, "test")[: args.docs]
            pipelines = {"flat_ner": ours, "flat_ner, no probabilities": plain, "spaCy ner": peer}
            rounds = inference(pipelines, docs, args.repeats, args.batch_size)
            for label, r in rounds.items():
                gain = statistics.median(r["batch"]) / statistics.median(r["b1"])
                same = "yes" if all(r["same"]) else "NO"
                if label != "flat_ner, no probabilities":
                    cell = {
                        key: {
                            "median": round(statistics.median(r[key])),
                            "min": round(min(r[key])),
                            "max": round(max(r[key])),
                        }
                        for key in ("b1", "batch")
                    }
                    figures["rows"].append({"dataset": name, "pipeline": label, **cell, "gain": round(gain, 2)})
                cells = [f"{name} ({len(docs)} docs)", label, spread(r["b1"]), spread(r["batch"]), f"{gain:.2f}x", same]
                print("| " + " | ".join(cells) + " |")
            a, b = rounds["flat_ner"], rounds["spaCy ner"]
            ratio_1 = statistics.median(a["b1"]) / statistics.median(b["b1"])
            ratio_n = statistics.median(a["batch"]) / statistics.median(b["batch"])
            print(f"| {name} | **flat / spaCy** | **{ratio_1:.2f}x** | **{ratio_n:.2f}x** | | |")
            c = rounds["flat_ner, no probabilities"]
            cost_1 = statistics.median(c["b1"]) / statistics.median(a["b1"]) - 1
            cost_n = statistics.median(c["batch"]) / statistics.median(a["batch"]) - 1
            print(f"| {name} | entity probabilities: extra time | {100 * cost_1:.1f}% | {100 * cost_n:.1f}% | | |")
            figures["ratio"][name] = {"b1": round(ratio_1, 2), "batch": round(ratio_n, 2)}
            figures["probabilities_cost_pct"][name] = {"b1": round(100 * cost_1, 1), "batch": round(100 * cost_n, 1)}
        share = decode_share(ours, texts("resume", "test")[: args.docs])
        print(f"\nCRF decoding: {100 * share:.1f}% of flat_ner's nlp.pipe time on Resume test.")
        figures["decode_share_pct"] = round(100 * share, 1)
        n = torch.get_num_threads()
        title = (
            f"Inference, {n} thread{'s' if n > 1 else ''}: flat_ner against spaCy's ner, batch 1 and {args.batch_size}"
        )
        setup = {"model": args.model, "batch_size": args.batch_size, "docs": args.docs, "repeats": args.repeats}
        name = f"speed-{where}-inference-{n}-thread{'s' if n > 1 else ''}"
        record(name, f"speed-{where}", title, figures, setup=setup, **saved)
    if "memory" in args.parts:
        print(f"\n| test set | flat_ner nlp.pipe batch {args.batch_size}: peak memory above the loaded pipeline |")
        print("|---|---|")
        memory = []
        for name in ("resume", "msra"):
            # The measuring process runs from the repository root: give it the pipeline's full path.
            peak = pipe_memory(str(Path(args.model).resolve()) if args.model else "", name, args.batch_size, args.docs)
            memory.append({"dataset": name, "peak_mb": round(peak)})
            print(f"| {name} ({args.docs} docs) | {peak:.0f} MB |")
        title = f"Peak memory of nlp.pipe at batch {args.batch_size} over the loaded pipeline"
        setup = {"model": args.model, "batch_size": args.batch_size, "docs": args.docs}
        record(f"memory-pipe-batch{args.batch_size}", "memory", title, {"rows": memory}, setup=setup, **saved)
    if "training" in args.parts:
        print(f"\n| training, {args.batches} batches of 10 | pipeline | sentences/s | s/epoch |")
        print("|---|---|---|---|")
        training: dict = {"rows": [], "ratio": {}}
        for name in ("resume", "msra"):
            rates = {}
            for label, nlp in (("flat_ner", flat("", name)), ("spaCy ner", spacy_ner(name))):
                rates[label] = training_speed(nlp, name, args.batches)
                epoch = TRAIN_SENTENCES[name] / rates[label]
                print(f"| {name} ({TRAIN_SENTENCES[name]:,} sentences) | {label} | {rates[label]:.1f} | {epoch:.0f} |")
                row = {"dataset": name, "pipeline": label, "sentences_per_s": round(rates[label], 1)}
                training["rows"].append({**row, "s_per_epoch": round(epoch)})
            print(f"| {name} | **flat/spaCy** | {rates['flat_ner'] / rates['spaCy ner']:.2f}x | |")
            training["ratio"][name] = round(rates["flat_ner"] / rates["spaCy ner"], 2)
        n = torch.get_num_threads()
        title = (
            f"Training, {n} thread{'s' if n > 1 else ''}: {args.batches} updates of 10 sentences, against spaCy's ner"
        )
        record(f"speed-{where}-training", f"speed-{where}", title, training, setup={"batches": args.batches}, **saved)
    if "lattice" in args.parts:
        lat = lattice_speed()
        print(
            f"\nLattice: {lat['chars']:,} MSRA train_dev characters matched against jieba's 337k words in "
            f"{lat['seconds']:.2f} s ({lat['chars_per_s']:,.0f} chars/s), {lat['words']:,} lattice words."
        )
    print(f"\nAfter: {load_average()}")


if __name__ == "__main__":
    main()
