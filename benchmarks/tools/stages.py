"""Characters per second of flat_ner's CPU stages, the encoder left out, beside
the full `nlp.pipe`, on one thread.

"The stages" are everything the component's `pipe` does except the torch
encoder's forward: segmenting, lattice matching, features, groups and padding,
the array hand-over, boundary masks, Viterbi, entity spans, entity
probabilities, merging windows, and writing `doc.ents` and the scores' span
group. The encoder's emissions are recorded on a first pass and replayed
(`stage_timers.EncoderReplay`), so the passes timed decode exactly what the
model predicts. On a GPU the encoder is cheap and these stages are what is left.

With `--baseline REV` the same pipeline also runs an earlier commit's stage
code (`baseline.py`), interleaved round by round in this process, and the
table gives the ratio; the two must predict the same entities and scores.

    python benchmarks/tools/stages.py [--datasets resume msra] [--docs 600] [--repeats 5]
    python benchmarks/tools/stages.py --baseline HEAD~3 --shares
    python benchmarks/tools/stages.py --model training/resume/model-best --datasets resume
    python benchmarks/tools/stages.py --baseline HEAD~3 --training 30  # training shares the featurizer

It also writes the table's result record, speed-cpu-stages (benchmarks/results.py; `stages_figures`
builds its figures, a row a dataset, with the baseline's figures under "before"; --results DIR: elsewhere).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
import torch
from spacy.language import Language
from spacy.training import Example
from thinc.api import Optimizer

# This checkout's package first, whichever one the environment installed; then the scripts beside tools/.
sys.path[:0] = [
    str(Path(__file__).parent),
    str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parents[2]),
]
from baseline import load_package, use_baseline  # noqa: E402
from common import examples, load_average, machine, markdown_table, texts, train_split  # noqa: E402
from results import record, results_option  # noqa: E402
from speed import flat  # noqa: E402
from stage_timers import STAGES, EncoderReplay, StageTimers  # noqa: E402

import spacy_flat  # noqa: E402
from spacy_flat.nn.tagger import LatticeTagger  # noqa: E402

Predictions = List[Tuple[List[Tuple[int, int, str]], List[float]]]


def stage_pass(nlp: Language, docs_text: List[str], batch_size: int, replay: EncoderReplay) -> float:
    """RETURNS (float): Seconds of the component's `pipe` over fresh docs, the encoder replayed."""
    docs = [nlp.make_doc(text) for text in docs_text]
    ner = nlp.get_pipe("flat_ner")
    with replay.replaying():
        start = time.perf_counter()
        for _ in ner.pipe(docs, batch_size=batch_size):
            pass
        return time.perf_counter() - start


def full_pass(nlp: Language, docs_text: List[str], batch_size: int) -> float:
    """RETURNS (float): Seconds of `nlp.pipe` over the texts, tokenizer and encoder included."""
    start = time.perf_counter()
    for _ in nlp.pipe(docs_text, batch_size=batch_size):
        pass
    return time.perf_counter() - start


def training_pass(nlp: Language, egs: List[Example], optimizer: Optimizer) -> float:
    """RETURNS (float): Seconds of `nlp.update` over `egs` in batches of 10."""
    start = time.perf_counter()
    for i in range(0, len(egs), 10):
        nlp.update(egs[i : i + 10], sgd=optimizer)
    return time.perf_counter() - start


def training(pipelines: Dict[str, Tuple[Language, str]], dataset: str, n_batches: int, repeats: int) -> None:
    """Print each pipeline's training sentences per second (the featurizer is
    shared with training), interleaved round by round."""
    egs, optimizers = {}, {}
    for name, (nlp, _) in pipelines.items():
        every = examples(nlp, dataset, train_split(dataset))
        egs[name] = every[:: max(1, len(every) // (n_batches * 10))][: n_batches * 10]
        optimizers[name] = nlp.resume_training()
        nlp.update(egs[name][:10], sgd=optimizers[name])  # first-call set-up
    speeds: Dict[str, List[float]] = {name: [] for name in pipelines}
    for _ in range(repeats):
        for name, (nlp, _) in pipelines.items():
            speeds[name].append(len(egs[name]) / training_pass(nlp, egs[name], optimizers[name]))
    rows = [[name, f"{statistics.median(values):,.1f}"] for name, values in speeds.items()]
    if len(speeds) > 1:
        names = list(speeds)
        ratio = statistics.median(n / o for n, o in zip(speeds[names[-1]], speeds[names[0]]))
        rows.append(["current / baseline (median of round ratios)", f"{ratio:.2f}x"])
    print(f"{dataset} training: {n_batches} updates of 10 sentences; sentences/s, median of {repeats} rounds")
    print(markdown_table(["pipeline", "training sentences/s"], rows))
    print(f"{load_average()}\n")


def predictions(nlp: Language, docs_text: List[str], replay: EncoderReplay) -> Predictions:
    docs = [nlp.make_doc(text) for text in docs_text]
    with replay.replaying():
        done = list(nlp.get_pipe("flat_ner").pipe(docs, batch_size=64))
    return [
        ([(e.start_char, e.end_char, e.label_) for e in doc.ents], list(doc.spans["flat_ner"].attrs["scores"]))
        for doc in done
    ]


def same(ours: Predictions, peer: Predictions) -> bool:
    """RETURNS (bool): The same entities, with probabilities within 1e-6."""
    for (ents, scores), (peer_ents, peer_scores) in zip(ours, peer):
        if ents != peer_ents or not numpy.allclose(scores, peer_scores, rtol=0, atol=1e-6):
            return False
    return True


def shares(
    nlp: Language, package: str, docs_text: List[str], batch_size: int, replay: EncoderReplay, repeats: int
) -> List[str]:
    """RETURNS (List[str]): Each stage's share of `repeats` stage passes, as table cells."""
    timers = StageTimers(package)
    with timers.active(nlp.get_pipe("flat_ner").model.get_ref("tagger")):
        total = sum(stage_pass(nlp, docs_text, batch_size, replay) for _ in range(repeats))
    cells = [f"{100 * timers.seconds[label] / total:.1f}%" if label in timers.seconds else "—" for label in LABELS]
    top = sum(timers.seconds.get(label, 0.0) for label in LABELS if not label.startswith(" "))
    return [*cells, f"{100 * (total - top) / total:.1f}%"]


LABELS = list(dict.fromkeys(label for label, _, _ in STAGES))


DATASET_NAMES = {"resume": "Resume", "weibo": "Weibo", "msra": "MSRA"}
Runs = Dict[str, Dict[str, List[float]]]


def stages_figures(measured: Dict[str, Runs], model: str = "") -> Dict[str, Any]:
    """The figures of speed-cpu-stages, as render.py's cpu-stages table reads them.

    measured: dataset -> pipeline ("current", or "baseline REV") -> {"b1", "batch", "full": chars/s a round}.
    A row a dataset ("Resume, untrained", or the model's name with --model); the baseline's medians under
    "before".
    """

    def medians(runs: Dict[str, List[float]]) -> Dict[str, int]:
        keys = {"stages_b1": "b1", "stages_batch": "batch", "pipe_batch": "full"}
        return {key: round(statistics.median(runs[k])) for key, k in keys.items()}

    rows = []
    for dataset, runs in measured.items():
        label = f"{DATASET_NAMES[dataset]}, {Path(model).name if model else 'untrained'}"
        row: Dict[str, Any] = {"pipeline": label, **medians(runs["current"])}
        baseline = next((name for name in runs if name != "current"), None)
        if baseline is not None:
            row["before"] = medians(runs[baseline])
        rows.append(row)
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", nargs="+", choices=["resume", "weibo", "msra"], default=["resume", "msra"])
    parser.add_argument("--model", default="", help="a trained pipeline; default: flat_ner initialized per dataset")
    parser.add_argument("--docs", type=int, default=600, help="test docs per dataset (from the start)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--baseline", default="", help="a commit whose stage code runs beside today's")
    parser.add_argument("--shares", action="store_true", help="also print each stage's share of a stage pass")
    parser.add_argument("--training", type=int, default=0, help="also time this many training updates of 10")
    results_option(parser)
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 2)
    measured: Dict[str, Runs] = {}
    torch.set_num_threads(1)
    base = load_package(args.baseline) if args.baseline else None
    print(f"Machine: {machine()}; {torch.get_num_threads()} torch thread(s); before: {load_average()}\n")
    for dataset in args.datasets:
        docs_text = texts(dataset, "test")[: args.docs]
        chars = sum(len(t) for t in docs_text)
        nlp = flat(args.model, dataset)
        pipelines: Dict[str, Tuple[Language, str]] = {"current": (nlp, spacy_flat.__name__)}
        if base is not None:
            peer = pickle.loads(pickle.dumps(nlp))
            use_baseline(peer, base)
            pipelines = {f"baseline {args.baseline}": (peer, base.__name__), **pipelines}
        classes: List[type] = [LatticeTagger]
        if base is not None:
            classes.append(sys.modules[f"{base.__name__}.nn.tagger"].LatticeTagger)
        replay = EncoderReplay(classes)
        with replay.recording():
            for size in (1, args.batch_size):
                for pipeline, _ in pipelines.values():
                    list(pipeline.get_pipe("flat_ner").pipe([pipeline.make_doc(t) for t in docs_text], batch_size=size))
        found = {name: predictions(pipeline, docs_text, replay) for name, (pipeline, _) in pipelines.items()}
        agree = all(same(found["current"], other) for other in found.values())
        runs: Dict[str, Dict[str, List[float]]] = {name: {"b1": [], "batch": [], "full": []} for name in pipelines}
        for _ in range(args.repeats):
            for name, (pipeline, _) in pipelines.items():
                runs[name]["b1"].append(chars / stage_pass(pipeline, docs_text, 1, replay))
                runs[name]["batch"].append(chars / stage_pass(pipeline, docs_text, args.batch_size, replay))
                runs[name]["full"].append(chars / full_pass(pipeline, docs_text, args.batch_size))
        measured[dataset] = runs
        b = args.batch_size
        print(f"{dataset} test: {len(docs_text)} docs, {chars:,} characters; chars/s, median of {args.repeats} rounds")
        columns = ["pipeline", "stages batch 1", f"stages batch {b}", f"full nlp.pipe batch {b}"]
        rows = [[name, *(f"{statistics.median(runs[name][k]):,.0f}" for k in ("b1", "batch", "full"))] for name in runs]
        baseline_name: Optional[str] = next((name for name in runs if name != "current"), None)
        if baseline_name is not None:
            ratios = [
                statistics.median(n / o for n, o in zip(runs["current"][k], runs[baseline_name][k]))
                for k in ("b1", "batch", "full")
            ]
            rows.append(["current / baseline (median of round ratios)", *(f"{r:.2f}x" for r in ratios)])
        print(markdown_table(columns, rows))
        print(f"same entities and scores (1e-6) in every pipeline: {agree}; {load_average()}\n")
        if args.shares:
            table = [[label] for label in LABELS] + [["other (spaCy's pipe loop, groups, glue)"]]
            header = ["stage"]
            for name, (pipeline, package) in pipelines.items():
                for size in (1, b):
                    header.append(f"{name}, batch {size}")
                    for row, cell in zip(table, shares(pipeline, package, docs_text, size, replay, args.repeats)):
                        row.append(cell)
            print(markdown_table(header, table))
            print(f"{load_average()}\n")
        if args.training:
            training(pipelines, dataset, args.training, args.repeats)

    title = "The CPU stages around the encoder (everything but the encoder's forward), one thread"
    notes = (
        f"before: the stage code at {args.baseline}, run on the same pipelines in the same process, interleaved."
        if args.baseline
        else ""
    )
    setup = {"model": args.model, "docs": args.docs, "repeats": args.repeats, "batch_size": args.batch_size}
    record(
        "speed-cpu-stages",
        "speed-cpu",
        title,
        stages_figures(measured, args.model),
        setup=setup,
        load_before=load,
        notes=notes,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
