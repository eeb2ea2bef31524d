"""Render the benchmark documents from the result records.

    python benchmarks/render.py            # rewrite the documents below
    python benchmarks/render.py --check    # exit 1, naming each table that differs from its data

BENCHMARKS.md is `benchmarks/results/BENCHMARKS.template.md` with its placeholders filled from the standing
records (benchmarks/results/*.json), and `benchmarks/archive/DECISIONS.md` is its template filled from the
archived records (benchmarks/archive/*/results/*.json) and the standing ones. `{{table:NAME}}` is the table
`TABLES[NAME]` builds; `{{v:ID:path}}` is one figure of record ID (`figures.test_f1.mean`; `:.1f` after the
path sets the format); `{{f1:ID}}` is a record's test F1 as mean ± sd; `{{sources}}` names the records a
section read and their commits; `{{load}}` the load averages its timings started at; `{{index}}` links
the section's entry in the page's index. Each index
(`benchmarks/results/INDEX.md`, `benchmarks/archive/INDEX.md`) lists, section by section, the command, date,
commit, machine, threads, load and notes of every record the section read. In README.md each block between
`<!-- results:NAME -->` and `<!-- /results:NAME -->` is `TABLES[NAME]`.
"""

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import ARCHIVE, RESULTS, ROOT, load_all, load_archive

TEMPLATE = RESULTS / "BENCHMARKS.template.md"
BENCHMARKS = ROOT / "BENCHMARKS.md"
README = ROOT / "README.md"
DATASETS = ("resume", "weibo", "msra")
DATASET_NAMES = {"resume": "Resume", "weibo": "Weibo", "msra": "MSRA"}
Record = Dict[str, Any]


class Tables:
    """The records, and the tables built from them; `used` gathers the records each table read."""

    def __init__(self, records: Dict[str, Record]):
        self.records = records
        self.used: List[str] = []

    def get(self, rid: str) -> Record:
        if rid not in self.records:
            raise KeyError(f"no result record {rid!r} under {RESULTS}")
        if rid not in self.used:
            self.used.append(rid)
        return self.records[rid]


# ---- formatting ----


def num(value: Optional[float], digits: int = 0) -> str:
    """A figure with thousands separators; '–' where there is none."""
    if value is None:
        return "–"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def spread(cell: Optional[Dict[str, float]], digits: int = 0) -> str:
    """median (min–max), or the median alone."""
    if not cell:
        return "–"
    out = num(cell["median"], digits)
    if cell.get("min") is not None:
        out += f" ({num(cell['min'], digits)}–{num(cell['max'], digits)})"
    return out


def mean_sd(cell: Dict[str, Any], bold: bool = False) -> str:
    """RETURNS (str): A figure over seeds, `mean ± sd` (the mean alone for one seed)."""
    mean = f"**{cell['mean']:.2f}**" if bold else f"{cell['mean']:.2f}"
    return f"{mean} ± {cell['sd']:.2f}" if "sd" in cell else mean


def f1(rec: Record, bold: bool = False, seeds: bool = False) -> str:
    out = mean_sd(rec["figures"]["test_f1"], bold)
    if seeds and len(rec["seeds"]) != 3:
        out += f" ({len(rec['seeds'])} seed{'s' if len(rec['seeds']) > 1 else ''})"
    return out


def train_seconds(rec: Record) -> str:
    cell = rec["figures"].get("train_s")
    if not cell:
        wall = rec["figures"].get("wall_s")
        return num(wall) if wall else "–"
    if "median" in cell:
        return num(cell["median"])
    return f"{num(cell['min'])}–{num(cell['max'])}"


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


# ---- accuracy ----

KIND_ORDER = {"pipeline": 0, "defaults": 1, "pretrained": 2, "variant": 3, "transformer": 4, "peer": 5}
ARCH_ORDER = {"FLAT": 0, "DC-SAN": 1, "TENER": 2, "Lattice LSTM": 3, "spaCy ner": 4}


INPUT_NAMES = {"": "embedded defaults", "defaults": "embedded defaults"}
INPUT_WORDS = (("wiki-words", "wiki words"), ("own-bigrams", "our bigrams"), ("own-chars", "our characters"))
# `--raw`: the word and bigram tables as pretrain-vectors wrote them, not scaled to unit length.
INPUT_WORDS += (("-raw", " (raw tables)"),)


def run_label(rec: Record) -> str:
    """RETURNS (str): What a run was, told apart from every other run of its dataset: the model, its inputs,
    its budget, its seeds where they are not 0, 1 and 2, and where it trained."""
    s = rec["setup"]
    if s.get("pipeline"):
        return f"the `{s['pipeline']}` pipeline ({s['architecture']}, {plural(s['epochs'], 'epoch')})"
    model = s["architecture"] + (f" + {s['transformer']}" if s.get("transformer") else "")
    inputs = s.get("inputs", "")
    said = INPUT_NAMES.get(inputs, inputs)
    for short, words in INPUT_WORDS:
        said = said.replace(short, words)
    parts = [model, said, plural(s["epochs"], "epoch")]
    n = len(rec["seeds"])
    if n != 3:
        parts.append(f"seed{'s' if n > 1 else ''} {', '.join(map(str, rec['seeds']))}")
    if rec["id"].endswith("-gpu"):
        parts.append("on a GPU")
    return ", ".join(parts)


def accuracy_by_dataset(t: Tables, dataset: str) -> str:
    chosen = [rid for rid, rec in t.records.items() if rec["question"] == "accuracy" and rec.get("dataset") == dataset]

    def order(rid: str) -> Tuple:
        s = t.records[rid]["setup"]
        inputs = s.get("inputs", "")
        kind, arch = KIND_ORDER.get(s.get("kind"), 9), ARCH_ORDER.get(s.get("architecture"), 9)
        return (kind, arch, s.get("epochs") or 0, inputs.count("+"), len(inputs), rid)

    rows, labels = [], set()
    for rid in sorted(chosen, key=order):
        rec = t.get(rid)
        fig = rec["figures"]
        label = run_label(rec)
        if label in labels:
            raise ValueError(f"{rid}: a second row labelled {label!r}")
        labels.add(label)
        per_seed = ", ".join(f"{x:.2f}" for x in fig["test_f1"].get("per_seed", [])) or "–"
        dev = fig.get("dev_f1", {}).get("mean")
        rows.append([label, f1(rec), per_seed, num(dev, 2) if dev is not None else "–", train_seconds(rec)])
    return table(["run", "test F1", "test F1 per seed", "dev F1", "train s"], rows)


def papers(t: Tables) -> str:
    rec = t.get("reference-papers")
    rows = []
    for name, cells in rec["figures"].items():
        rows.append([name, *(f"{cells[d]:.2f}" for d in DATASETS), cells.get("setting", "")])
    return table(["published", "Resume", "Weibo", "MSRA", "setting"], rows)


# The headline: the family at one budget per dataset, where every architecture has three seeds at it.
SUMMARY_EPOCHS = {"resume": 5, "weibo": 10, "msra": 1}
# (label, the id of each dataset's record): ids are accuracy-{dataset}-{name}-{epochs}ep-s012 unless spelled out.
HEADLINE: List[Tuple[str, str]] = [
    ("FLAT, embedded defaults", "flat-defaults"),
    ("DC-SAN, embedded defaults", "dcsan-defaults"),
    ("TENER, embedded characters (no lexicon)", "tener-defaults"),
    ("Lattice LSTM, embedded defaults", "lattice-lstm-defaults"),
    ("FLAT, pretrained inputs", "flat-wiki-words+own-bigrams"),
    ("DC-SAN, pretrained inputs", "dcsan-wiki-words+own-bigrams"),
    ("TENER, our bigrams", "tener-own-bigrams"),
    ("spaCy ner (`--optimize accuracy`), one seed", "spacy-ner"),
]


def headline_id(dataset: str, name: str) -> str:
    """RETURNS (str): The record of a headline cell: Resume's and Weibo's pretrained tables were read raw
    (`-raw`, not scaled to unit length), MSRA's at unit length; spaCy's ner ran one seed."""
    raw = "-raw" if dataset != "msra" and ("bigrams" in name) else ""
    seeds = "s0" if name == "spacy-ner" else "s012"
    return f"accuracy-{dataset}-{name}{raw}-{SUMMARY_EPOCHS[dataset]}ep-{seeds}"


def headline(t: Tables) -> str:
    rows = []
    for label, name in HEADLINE:
        row = [label]
        for d in DATASETS:
            rec = t.get(headline_id(d, name))
            if rec["setup"].get("epochs") != SUMMARY_EPOCHS[d]:
                raise ValueError(
                    f"{rec['id']}: {rec['setup'].get('epochs')} epochs, the column's are {SUMMARY_EPOCHS[d]}"
                )
            row.append(f1(rec))
        rows.append(row)
    columns = [
        "test F1, mean ± sd of 3 seeds",
        *(f"{DATASET_NAMES[d]}, {plural(SUMMARY_EPOCHS[d], 'epoch')}" for d in DATASETS),
    ]
    return table(columns, rows)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def headline_speed(t: Tables) -> str:
    one = t.get("speed-cpu-inference-1-thread")["figures"]
    train = t.get("speed-cpu-training")["figures"]
    gpu_record = t.get("speed-gpu-family")
    gpu = gpu_record["figures"]
    card = gpu_record["machine"].split(";")[0].removeprefix("NVIDIA ")

    def row_of(rows: List[Record], dataset: str, pipeline: str) -> Record:
        return next(r for r in rows if r.get("dataset") == dataset and r["pipeline"] == pipeline)

    out = []
    for pipeline, gpu_name in (("flat_ner", "FLAT"), ("spaCy ner", "spaCy ner")):
        cells = [pipeline]
        for d in ("resume", "msra"):
            cells.append(num(row_of(one["rows"], d, pipeline)["batch"]["median"]))
        for d in ("resume", "msra"):
            cells.append(num(row_of(train["rows"], d, pipeline)["s_per_epoch"]))
        for d in ("resume", "msra"):
            cells.append(num(row_of(gpu["rows"], d, gpu_name)["s_per_epoch"]))
        out.append(cells)
    out.append(
        [
            "flat_ner / spaCy ner",
            *(f"{one['ratio'][d]['batch']:.2f}×" for d in ("resume", "msra")),
            *(f"{train['ratio'][d]:.2f}× faster" for d in ("resume", "msra")),
            "",
            "",
        ]
    )
    columns = [
        f"one CPU thread; one {card}",
        "Resume chars/s, batch 64",
        "MSRA chars/s, batch 64",
        "Resume training s/epoch",
        "MSRA training s/epoch",
        f"Resume s/epoch, {card}",
        f"MSRA s/epoch, {card}",
    ]
    return table(columns, out)


# The general pipeline over seeds (general_seeds.py): the pipelines row and the peers table read it.
GENERAL_SEEDS = "accuracy-general-pipeline-s012"

PIPELINES = [
    (
        "`resume`",
        "résumés: NAME, ORG, TITLE, EDU, CONT, LOC, PRO, RACE",
        "`spacy project run all .`",
        "accuracy-resume-main-job",
    ),
    ("`news`", "news: PER, LOC, ORG", "`spacy project run news .`", "accuracy-msra-news-pipeline"),
    (
        "`general`",
        "general text (news, Wikipedia, posts): PER, LOC, ORG",
        "`spacy project run general .`",
        GENERAL_SEEDS,
    ),
    (
        "`weibo`",
        "social media: PER, ORG, LOC, GPE, each named or nominal",
        "`spacy project run all . --vars.dataset weibo`",
        "",
    ),
]


def choose(t: Tables) -> str:
    rows = []
    for name, use, run, rid in PIPELINES:
        if not rid:
            rows.append([name, use, run, "–", "not measured at its schedule"])
            continue
        rec = t.get(rid)
        if rec["setup"].get("pipeline") == "general":
            budget = f"4 epochs of the pool, {plural(len(rec['seeds']), 'seed')}"
            rows.append([name, use, run, general_cells(rec), budget])
            continue
        dataset = DATASET_NAMES[rec["dataset"]]
        rows.append([name, use, run, f"{dataset} {f1(rec)}", f"{plural(rec['setup']['epochs'], 'epoch')}, one run"])
    return table(["pipeline", "labels", "train it", "test F1", "its training"], rows)


PRETRAINED_ROWS = [
    (
        "embedded defaults (jieba's words, LAC characters)",
        {
            "resume": "accuracy-resume-flat-defaults-5ep-s012",
            "weibo": "accuracy-weibo-flat-defaults-10ep-s012",
            "msra": "accuracy-msra-flat-defaults-1ep-s012",
        },
    ),
    (
        "shared wiki word vectors as the lexicon",
        {
            "resume": "accuracy-resume-flat-wiki-words-raw-5ep-s012",
            "weibo": "accuracy-weibo-flat-wiki-words-raw-10ep-s012",
            "msra": "accuracy-msra-flat-wiki-words-1ep-s012-eval-frequency-2760",
        },
    ),
    (
        "+ our bigram table",
        {
            "resume": "accuracy-resume-flat-wiki-words+own-bigrams-raw-5ep-s012",
            "weibo": "accuracy-weibo-flat-wiki-words+own-bigrams-raw-10ep-s012",
            "msra": "accuracy-msra-flat-wiki-words+own-bigrams-1ep-s012",
        },
    ),
]


def pretrained_inputs(t: Tables) -> str:
    rows = []
    for label, cells in PRETRAINED_ROWS:
        rows.append([label, *(f1(t.get(cells[d])) if d in cells else "–" for d in DATASETS)])
    return table(["FLAT, test F1", "Resume, 5 epochs", "Weibo, 10 epochs", "MSRA, 1 epoch"], rows)


def calibration(t: Tables) -> str:
    rows = []
    for d in DATASETS:
        rec = t.get(f"calibration-{d}")
        fig = rec["figures"]
        cells = [f"{DATASET_NAMES[d]} ({fig['test_f1']:.2f})", f"{fig['temperature']:.3f}"]
        cells.append(f"{fig['ece']['raw']:.4f} → {fig['ece']['scaled']:.4f}")
        for level in ("0.5", "0.7", "0.9"):
            raw, scaled = fig["at"][level]["raw"], fig["at"][level]["scaled"]
            cells.append(f"{raw[0]:.2f} / {raw[1]:.2f} → {scaled[0]:.2f} / {scaled[1]:.2f}")
        rows.append(cells)
    columns = ["test set (F1)", "temperature", "ECE raw → scaled", "P / R at 0.5", "at 0.7", "at 0.9"]
    return table(columns, rows)


# ---- speed ----


def cpu_inference(t: Tables) -> str:
    rows = []
    for rid, threads in (("speed-cpu-inference-1-thread", "1"), ("speed-cpu-inference-2-threads", "2")):
        fig = t.get(rid)["figures"]
        for d in ("resume", "msra"):
            for r in (r for r in fig["rows"] if r["dataset"] == d):
                rows.append(
                    [DATASET_NAMES[d], threads, r["pipeline"], spread(r["b1"]), spread(r["batch"]), f"{r['gain']:.2f}×"]
                )
            ratio = fig["ratio"][d]
            rows.append(
                [
                    DATASET_NAMES[d],
                    threads,
                    "**flat_ner / spaCy ner**",
                    f"{ratio['b1']:.2f}×",
                    f"**{ratio['batch']:.2f}×**",
                    "",
                ]
            )
    columns = [
        "test set (400 docs)",
        "threads",
        "pipeline",
        "chars/s, one doc at a time",
        "chars/s, batch 64",
        "64 / 1",
    ]
    return table(columns, rows)


def probabilities_cost(t: Tables) -> str:
    rows = []
    for rid, threads in (("speed-cpu-inference-1-thread", "1"), ("speed-cpu-inference-2-threads", "2")):
        cost = t.get(rid)["figures"]["probabilities_cost_pct"]
        for d in ("resume", "msra"):
            c = cost[d]
            rows.append([DATASET_NAMES[d], threads, f"{c['b1']:.1f}%" if "b1" in c else "–", f"{c['batch']:.1f}%"])
    return table(["test set", "threads", "extra time, one doc at a time", "extra time, batch 64"], rows)


def cpu_training(t: Tables) -> str:
    fig = t.get("speed-cpu-training")["figures"]
    rows = [
        [DATASET_NAMES[r["dataset"]], r["pipeline"], f"{r['sentences_per_s']:.1f}", num(r["s_per_epoch"])]
        for r in fig["rows"]
    ]
    rows += [
        [DATASET_NAMES[d], "**flat_ner / spaCy ner**", f"**{fig['ratio'][d]:.2f}×**", ""] for d in ("resume", "msra")
    ]
    return table(["training set", "pipeline", "sentences/s", "s/epoch"], rows)


def cpu_family(t: Tables) -> str:
    fig = t.get("speed-cpu-family")["figures"]
    rows = []
    for r in fig["rows"]:
        rows.append(
            [
                r["pipeline"],
                spread(r["resume_b1"]),
                spread(r["resume_batch"]),
                spread(r["msra_batch"]),
                f"{r['ratio']['resume']:.1f}× / {r['ratio']['msra']:.1f}×",
                num(r["s_per_epoch"]["resume"]),
                num(r["s_per_epoch"]["msra"]),
                f"{num(r['step_memory_mb'])} MB",
            ]
        )
    columns = [
        "architecture",
        "Resume chars/s, batch 1",
        "Resume chars/s, batch 64",
        "MSRA chars/s, batch 64",
        "/ spaCy ner at 64",
        "s/epoch Resume",
        "s/epoch MSRA",
        "training step, 10 × 300 chars",
    ]
    return table(columns, rows)


def cpu_lattice_lstm(t: Tables) -> str:
    fig = t.get("speed-cpu-lattice-lstm")["figures"]
    rows = [
        [r["pipeline"], spread(r["b1"]), spread(r["batch"]), f"{r['sentences_per_s']:.1f}", num(r["s_per_epoch"])]
        for r in fig["rows"]
    ]
    columns = ["Resume test, 400 docs", "chars/s, batch 1", "chars/s, batch 64", "training sentences/s", "s/epoch"]
    return table(columns, rows)


def lattice_lstm_batching(t: Tables) -> str:
    record = t.get("speed-cpu-lattice-lstm-training-resume")
    fig = record["figures"]
    # Records since the per-round ratios (each round's rate over the released design's in the same round).
    paired = all("per_round" in r for r in fig["rows"])
    rows = []
    for r in fig["rows"]:
        row = [r["mode"], spread(r["sentences_per_s"], 1), f"{r['against_released']:.2f}×"]
        if paired:
            p = r["per_round"]
            row.append(f"{p['median']:.2f}× ({p['min']:.2f}–{p['max']:.2f})")
        rows.append(row)
    fit = fig.get("fit")
    if fit:
        # What batching alone can reach: a step's time fitted as fixed + per sentence.
        rows.append(
            [
                f"a step fitted over the like-length rows: {fit['step_ms']:.1f} ms"
                f" + {fit['sentence_ms']:.2f} ms a sentence",
                "unbounded batches",
                f"at most {fit['ceiling']:.2f}×",
                *([""] if paired else []),
            ]
        )
    sentences = record["setup"]["sentences"]
    rounds = record["setup"]["rounds"]
    columns = [
        f"Lattice LSTM training, {sentences} Resume sentences",
        f"sentences/s, median (range) of {rounds}",
        "ratio of the medians" if paired else "ratio",
        *(["ratio within each round, median (range)"] if paired else []),
    ]
    return table(columns, rows)


def cpu_stages(t: Tables) -> str:
    fig = t.get("speed-cpu-stages")["figures"]
    rows = [[r["pipeline"], num(r["stages_b1"]), num(r["stages_batch"]), num(r["pipe_batch"])] for r in fig["rows"]]
    return table(
        ["chars/s, median of 5 rounds", "CPU stages, batch 1", "CPU stages, batch 64", "whole nlp.pipe, batch 64"], rows
    )


def gpu_family(t: Tables) -> str:
    """The family on a GPU; the step's memory column only where a row has it, '–' for a training
    not timed (the trained FLAT's rows)."""
    fig = t.get("speed-gpu-family")["figures"]
    large = fig.get("large_batch")
    with_memory = any(r.get("step_memory_mb") for r in fig["rows"])
    rows = []
    for r in fig["rows"]:
        memory = [f"{num(r['step_memory_mb'])} MB" if r.get("step_memory_mb") else "–"] if with_memory else []
        at_large = [spread(r["large"]), f"{r['large_ratio']:.2f}×"] if large else []
        rows.append(
            [
                DATASET_NAMES[r["dataset"]],
                r["pipeline"],
                spread(r["b1"]),
                spread(r["batch"]),
                f"{r['ratio']:.2f}×",
                *at_large,
                num(r["s_per_epoch"]),
                *memory,
            ]
        )
    columns = [
        "test set",
        "architecture",
        "chars/s, batch 1",
        "chars/s, batch 64",
        "/ spaCy ner at 64",
        *([f"chars/s, batch {large}", f"/ spaCy ner at {large}"] if large else []),
        "training s/epoch",
        *(["training step, 10 × 300 chars (CUDA)"] if with_memory else []),
    ]
    return table(columns, rows)


GPU_PROFILE = "speed-gpu-profile-resume"


def gpu_profile(t: Tables) -> str:
    """Each stage's share of nlp.pipe's profiled time on a GPU (benchmarks/tools/profile_inference.py), a column
    for each decoding and batch size; a sentence saying how to measure it while there is no record."""
    if GPU_PROFILE not in t.records:
        return (
            f"No GPU profile is recorded yet: `bash benchmarks/tools/device_lane.sh profile` on a GPU machine writes "
            f"`{GPU_PROFILE}`."
        )
    fig = t.get(GPU_PROFILE)["figures"]
    columns = [
        "stage of nlp.pipe, share of the profiled time",
        "function (spacy_flat.)",
        *(f"{'device' if c['on_device'] else 'NumPy'} decoding, batch {c['batch_size']}" for c in fig["columns"]),
    ]
    rows = [["chars/s under the profiler", "", *(num(c["chars_per_s"]) for c in fig["columns"])]]
    for r in fig["rows"]:
        label = "· " * r["depth"] + r["label"]
        rows.append([label, f"`{r['stage']}`", *(f"{share:.1f}%" for share in r["shares"])])
    return table(columns, rows)


TRAINING_SPEED = ("speed-training-cpu", "speed-training-gpu")
ARCHITECTURE_LABELS = {"flat": "FLAT", "dcsan": "DC-SAN", "tener": "TENER", "lattice_lstm": "Lattice LSTM"}


def training_speed(t: Tables) -> str:
    """Seconds of a cold and a warm training epoch through the real loop (benchmarks/training_speed.py), on
    CPU threads and on a GPU, beside the baseline commit's where it ran; a sentence for a missing record."""
    rows = []
    # The CPU records first, then the GPU's.
    measured = [rid for rid in t.records if rid.startswith(TRAINING_SPEED)]
    measured.sort(key=lambda rid: ("-gpu" in rid, rid))
    for rid in measured:
        rec = t.get(rid)
        base = rec.get("setup", {}).get("baseline", "")
        for r in rec["figures"]["rows"]:
            where = f"{r['threads']} thread{'s' if r['threads'] > 1 else ''}" if r["threads"] else "GPU"
            sample = f"{r['sentences']:,} sentences, scaled" if r.get("sentences") else "whole epochs"
            before = r.get("base")
            rows.append(
                [
                    DATASET_NAMES[r["dataset"]],
                    ARCHITECTURE_LABELS[r["architecture"]],
                    where,
                    sample,
                    num(r["cold_s"]["median"], 1),
                    num(r["warm_s"]["median"], 1),
                    f"{num(before['warm_s']['median'], 1)} ({base})" if before else "",
                    f"{r['speedup_warm']:.2f}×" if before else "",
                    f"{num(r['cache_mb'], 1)} MB" if r.get("cache_mb") is not None else "",
                ]
            )
    if not rows:
        return "No training-speed record yet: `python benchmarks/training_speed.py` writes `speed-training-cpu`."
    columns = ["training set", "architecture", "where", "timed", "cold epoch s", "warm epoch s", "before", "gain",
               "feature cache"]  # fmt: skip
    missing = [rid for rid in TRAINING_SPEED if not any(m.startswith(rid) for m in measured)]
    note = f"\n\nNot measured yet: `{missing[0]}` (`bash benchmarks/tools/device_lane.sh training`)." if missing else ""
    return table(columns, rows) + note


# ---- memory, long documents, annotation, training cost ----


def memory_by_length(t: Tables) -> str:
    fig = t.get("memory-training-step-by-length")["figures"]
    rows = []
    for r in fig["rows"]:

        def ratio(x: Optional[float]) -> str:
            return f"{x:.1f}×" if x is not None else "–"

        windows_t = num(r["train_windows_mb"]) if r["train_windows_mb"] is not None else "="
        windows_i = num(r["infer_windows_mb"]) if r["infer_windows_mb"] is not None else "="
        rows.append(
            [
                num(r["chars"]),
                num(r["words_per_text"]),
                num(r["train_mb"]),
                windows_t,
                num(r["train_literal_mb"]),
                ratio(r["train_ratio"]),
                num(r["infer_mb"]),
                windows_i,
                num(r["infer_literal_mb"]),
                ratio(r["infer_ratio"]),
            ]
        )
    columns = [
        "chars",
        "lattice words a text",
        "training MB",
        "training MB, 512-char windows",
        "training MB, literal eq. 11",
        "literal / ours",
        "inference MB",
        "inference MB, windows",
        "inference MB, literal",
        "literal / ours",
    ]
    return table(columns, rows)


def long_docs(t: Tables) -> str:
    fig = t.get("long-docs-windows")["figures"]
    rows = [[num(r["chars"]), f"{r['seconds']:.1f}", num(r["chars_per_s"]), num(r["peak_mb"])] for r in fig["rows"]]
    return table(["characters", "seconds", "chars/s", "peak MB over the loaded pipeline"], rows)


def annotation(t: Tables) -> str:
    fig = t.get("annotation-throughput")["figures"]
    rows = []
    for r in fig["rows"]:
        memory = (
            "–"
            if r["peak_mb"] is None
            else f"{num(r['peak_mb'])} MB" + (f" {r['memory_note']}" if r.get("memory_note") else "")
        )
        rows.append([r["run"], num(r["chars_per_s"]), memory])
    return table(["run", "chars/s", "peak memory"], rows)


def annotation_reading(t: Tables) -> str:
    fig = t.get("annotation-read-cost")["figures"]
    rows = [[r["pass"], spread(r["seconds"], 2), num(r["chars_per_s"]), f"{r['share_pct']:.2f}%"] for r in fig["rows"]]
    return table(["pass, one core", "seconds, median (range)", "chars/s", "share of an actor's annotating time"], rows)


def checkpoints(t: Tables) -> str:
    fig = t.get("training-cost-checkpoints")["figures"]
    rows = [
        [
            f"`{r['config']}`",
            spread(r["write_s"], 2),
            f"{r['verify_s']:.2f}",
            f"{r['files_mb']:.1f}",
            f"{r['new_mb']:.1f}",
        ]
        for r in fig["rows"]
    ]
    return table(["config", "write s, median (range) of 5", "verify on load, s", "files, MB", "new on disk, MB"], rows)


def pretraining(t: Tables) -> str:
    fig = t.get("training-cost-pretrain-vectors")["figures"]
    rows = [[r["stage"], f"{r['seconds']:.1f}"] for r in fig["rows"]]
    rows.append(["all, wall clock", f"{fig['wall']} ({num(fig['peak_rss_mb'])} MB peak RSS)"])
    return table(["stage", "seconds"], rows)


PEER_SETS = (
    ("msra", "MSRA test"),
    ("weibo", "Weibo test (named)"),
    ("uner", "UNER GSDSimp test"),
    ("uner-traditional", "UNER, traditional script"),
    ("uner-spaced", "UNER, words spaced"),
)


def general_cells(rec: Record) -> str:
    """The pipelines table's test F1 cell of the general pipeline: three of its four test sets, over seeds."""
    sets = rec["figures"]["test_sets"]
    return ", ".join(
        f"{short} {mean_sd(sets[key])}" for key, short in (("msra", "MSRA"), ("weibo", "Weibo"), ("uner", "UNER"))
    )


def peers(t: Tables) -> str:
    """Our pipelines beside Baidu LAC and jiagu (benchmarks/peers.py): F1 on each test set, one thread."""
    if "peers-offline" not in t.records:
        return "Not measured yet: `spacy project run peers benchmarks` writes `peers-offline`."
    rows = []
    for row in t.get("peers-offline")["figures"]["rows"]:
        scores = row["scores"]
        cells = [f"{scores[key]['all']['f']:.2f}" if key in scores else "–" for key, _ in PEER_SETS]
        rows.append([row["annotator"], *cells, num(row["chars_per_s"]["median"])])
    if GENERAL_SEEDS in t.records:
        # The rows above are one trained pipeline; this one is the workflow's spread over seeds.
        rec = t.get(GENERAL_SEEDS)
        sets = rec["figures"]["test_sets"]
        cells = [mean_sd(sets[key]) if key in sets else "–" for key, _ in PEER_SETS]
        rows.append([f"`general` as shipped, {plural(len(rec['seeds']), 'seed')}", *cells, "–"])
    return table(["F1, exact PER, LOC and ORG spans", *(name for _, name in PEER_SETS), "chars/s, one thread"], rows)


TABLES: Dict[str, Callable[[Tables], str]] = {
    "headline": headline,
    "headline-speed": headline_speed,
    "pipelines": choose,
    "peers": peers,
    "papers": papers,
    "accuracy-resume": lambda t: accuracy_by_dataset(t, "resume"),
    "accuracy-weibo": lambda t: accuracy_by_dataset(t, "weibo"),
    "accuracy-msra": lambda t: accuracy_by_dataset(t, "msra"),
    "pretrained-inputs": pretrained_inputs,
    "calibration": calibration,
    "cpu-inference": cpu_inference,
    "probabilities-cost": probabilities_cost,
    "cpu-training": cpu_training,
    "cpu-family": cpu_family,
    "training-speed": training_speed,
    "cpu-lattice-lstm": cpu_lattice_lstm,
    "lattice-lstm-batching": lattice_lstm_batching,
    "cpu-stages": cpu_stages,
    "gpu-family": gpu_family,
    "gpu-profile": gpu_profile,
    "memory-by-length": memory_by_length,
    "long-docs": long_docs,
    "annotation": annotation,
    "annotation-reading": annotation_reading,
    "checkpoints": checkpoints,
    "pretraining": pretraining,
}


# ---- provenance and placeholders ----


def provenance(t: Tables, ids: Sequence[str]) -> str:
    """Where a section's figures come from: the machine once, then one line per run (the records that one
    command wrote at one time share its line)."""
    machines = {t.records[i]["machine"] for i in ids if t.records[i]["question"] != "reference"}
    same = len(machines) == 1
    lines: List[str] = [f"Machine: {next(iter(machines))}."] if same else []
    runs: Dict[Tuple[str, ...], List[str]] = {}
    slots: Dict[Tuple[str, ...], int] = {}
    for rid in ids:
        rec = t.records[rid]
        if rec["question"] == "reference":
            lines.append(f"- `{rid}`: {rec['title']}: {rec['source']}.")
            continue
        key = (rec["command"], rec["date"], str(rec.get("commit")), repr(sorted(rec["load"].items())), rec["machine"])
        if key not in runs:
            slots[key] = len(lines)
            lines.append("")
        runs.setdefault(key, []).append(rid)
    for key, rids in runs.items():
        lines[slots[key]] = run_line(t, rids, same)
    return "\n".join(lines)


def run_line(t: Tables, rids: Sequence[str], same_machine: bool) -> str:
    """RETURNS (str): The provenance line of one run's records: command, date, code, threads, load, ids."""
    rec = t.records[rids[0]]
    code = ", ".join(x for x in (rec.get("version") and f"spacy-flat {rec['version']}", rec.get("commit")) if x)
    threads = "" if rec.get("threads") is None else f", {rec['threads']} thread{'s' if rec['threads'] != 1 else ''}"
    load = rec["load"]
    said = [f"{k} {load[k]:.2f}" for k in ("before", "after") if load.get(k) is not None]
    load_text = f"; load average {', '.join(said)}" if said else ""
    load_text += f"; {load['note']}" if load.get("note") else ""
    where = "" if same_machine else f"; {rec['machine']}"
    notes = " ".join(dict.fromkeys(t.records[r]["notes"] for r in rids if t.records[r].get("notes")))
    names = ", ".join(f"`{r}`" for r in rids)
    note = f" {notes}" if notes else ""
    return f"- `{rec['command']}` ({rec['date']}, {code}{threads}{load_text}{where}; {names}).{note}"


def sources(t: Tables, ids: Sequence[str]) -> str:
    """RETURNS (str): One line naming a section's records and the commits that wrote them."""
    by_commit: Dict[str, List[str]] = {}
    for rid in ids:
        rec = t.records[rid]
        if rec["question"] == "reference":
            continue
        code = rec.get("commit") or f"spacy-flat {rec.get('version')}"
        by_commit.setdefault(code, []).append(f"`{rid}`")
    parts = [f"{', '.join(names)} at `{code}`" for code, names in by_commit.items()]
    return f"Records: {'; '.join(parts)}." if parts else ""


def loads(t: Tables, ids: Sequence[str]) -> str:
    """RETURNS (str): The 1-minute load averages the section's timings started at (each record's before),
    with the records' own words on the load where they give them."""
    # An accuracy record times nothing: its load is not the load a timing in the section started at.
    timed = [r for r in ids if t.records[r]["question"] not in ("reference", "accuracy")]
    recorded = [t.records[r].get("load") or {} for r in timed]
    said = sorted({load["before"] for load in recorded if load.get("before") is not None})
    notes = "; ".join(dict.fromkeys(load["note"] for load in recorded if load.get("note")))
    if said:
        figure = f"{said[0]:.2f}" if said[0] == said[-1] else f"{said[0]:.2f} to {said[-1]:.2f}"
        return f"Load average {figure}" + (f" ({notes})" if notes else "")
    return f"Load: {notes}" if notes else "Load average not recorded"


def lookup(rec: Record, path: str) -> Any:
    value: Any = rec
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def anchor(heading: str) -> str:
    """RETURNS (str): The fragment GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


HEADING = re.compile(r"^(#{1,6}) +(.+)$", re.M)


class Page:
    """A document rendered from a template, with an index of where each section's figures come from."""

    def __init__(self, template: Path, output: Path, index: Path, title: str):
        self.template, self.output, self.index, self.title = template, output, index, title

    def render(self, records: Dict[str, Record]) -> Tuple[str, str]:
        """RETURNS (Tuple[str, str]): The page and its index."""
        t = Tables(records)
        text = self.template.read_text(encoding="utf8")
        cuts = [m.start() for m in HEADING.finditer(text)]
        pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]
        out, sections = [], []
        link = os.path.relpath(self.index, self.output.parent)
        for piece in pieces:
            found = HEADING.match(piece)
            heading = found.group(2) if found else ""
            t.used = []
            body = fill(piece, t)
            used = list(t.used)
            body = body.replace("{{sources}}", sources(t, used)).replace("{{load}}", loads(t, used))
            # A section that read no record (a measurement still to come) has no entry in the index.
            said = f"[records]({link}#{anchor(heading)})" if used else "no record yet"
            body = body.replace("{{index}}", said)
            out.append(body)
            if used:
                sections.append((found.group(1) if found else "##", heading, used))
        index = [
            f"# {self.title}",
            "",
            f"<!-- Generated by `python benchmarks/render.py` with {self.output.relative_to(ROOT)}: never edit it. -->",
            "",
            f"Where the figures of [{self.output.name}]({os.path.relpath(self.output, self.index.parent)}) come from,"
            " section by section: each record's command, date, code, threads, load and notes.",
        ]
        for level, heading, used in sections:
            index += ["", f"{level} {heading}", "", provenance(t, used)]
        return "".join(out), "\n".join(index) + "\n"


def fill(template: str, t: Tables) -> str:
    def table_block(match: "re.Match[str]") -> str:
        return TABLES[match.group(1)](t)

    def value(match: "re.Match[str]") -> str:
        rid, path, spec = match.group(1), match.group(2), match.group(3)
        v = lookup(t.get(rid), path)
        if spec:
            return format(v, spec)
        if isinstance(v, int):
            return f"{v:,}"
        if isinstance(v, float):
            return f"{v:,.2f}"
        return str(v)

    text = re.sub(r"\{\{table:([a-z0-9-]+)\}\}", table_block, template)
    text = re.sub(r"\{\{v:([^:}]+):([^:}]+)(?::([^}]+))?\}\}", value, text)
    return re.sub(r"\{\{f1:([^}]+)\}\}", lambda m: f1(t.get(m.group(1))), text)


BENCHMARKS_PAGE = Page(TEMPLATE, BENCHMARKS, RESULTS / "INDEX.md", "Benchmarks: where each figure comes from")
DECISIONS_PAGE = Page(
    ARCHIVE / "DECISIONS.template.md",
    ARCHIVE / "DECISIONS.md",
    ARCHIVE / "INDEX.md",
    "Settled experiments: where each figure comes from",
)


def render_benchmarks(records: Dict[str, Record]) -> str:
    return BENCHMARKS_PAGE.render(records)[0]


MARKER = re.compile(r"(<!-- results:([a-z0-9-]+) -->\n)(.*?)(<!-- /results:\2 -->)", re.S)
MARKERS_REQUIRED = ("pipelines", "peers", "headline", "headline-speed")


def render_readme(records: Dict[str, Record], text: str) -> str:
    t = Tables(records)
    missing = [name for name in MARKERS_REQUIRED if f"<!-- results:{name} -->" not in text]
    if missing:
        raise SystemExit(
            f"README.md lacks the markers of {', '.join(missing)} (<!-- results:NAME --> ... <!-- /results:NAME -->)"
        )
    return MARKER.sub(lambda m: f"{m.group(1)}{TABLES[m.group(2)](t)}\n{m.group(4)}", text)


def documents(standing: Dict[str, Record], archived: Dict[str, Record]) -> Dict[Path, str]:
    """RETURNS: Each rendered document's path and text: BENCHMARKS.md and its index from the standing records,
    the README's marked tables, DECISIONS.md and its index from the archived records (beside the standing ones
    they are compared with)."""
    page, index = BENCHMARKS_PAGE.render(standing)
    decisions, decisions_index = DECISIONS_PAGE.render({**standing, **archived})
    return {
        BENCHMARKS_PAGE.output: page,
        BENCHMARKS_PAGE.index: index,
        README: render_readme(standing, README.read_text(encoding="utf8")),
        DECISIONS_PAGE.output: decisions,
        DECISIONS_PAGE.index: decisions_index,
    }


def blocks(text: str) -> List[Tuple[str, str]]:
    """(nearest heading, block) for each blank-line-separated block of a Markdown text."""
    heading, out = "(top)", []
    for block in re.split(r"\n\s*\n", text):
        lines = block.strip().splitlines()
        if lines and lines[0].startswith("#"):
            heading = lines[0].lstrip("# ").strip()
        out.append((heading, block.strip()))
    return out


def differences(name: str, have: str, want: str) -> List[str]:
    """RETURNS: One line per table (or paragraph) of `have` that differs from the rendering `want`."""
    if have == want:
        return []
    got, expected = blocks(have), blocks(want)
    out = []
    for i, (heading, block) in enumerate(expected):
        other = got[i][1] if i < len(got) else ""
        if other != block:
            kind = "table" if any(line.startswith("|") for line in block.splitlines()) else "text"
            first = block.splitlines()[0] if block else ""
            out.append(f"{name}: the {kind} under '{heading}' differs from its data ({first[:80]})")
    if len(got) != len(expected):
        out.append(f"{name}: {len(got)} blocks, the rendering has {len(expected)}")
    return out or [f"{name}: differs from its rendering"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a document differs from its data"
    )
    args = parser.parse_args(argv)
    standing, archived = load_all(), load_archive()
    want = documents(standing, archived)
    if args.check:
        problems = []
        for path, text in want.items():
            have = path.read_text(encoding="utf8") if path.exists() else ""
            problems += differences(str(path.relative_to(ROOT)), have, text)
        for line in problems:
            print(line, file=sys.stderr)
        if not problems:
            print(
                f"{', '.join(str(p.relative_to(ROOT)) for p in want)} agree with the {len(standing)} records under "
                f"{RESULTS.relative_to(ROOT)} and the {len(archived)} under {ARCHIVE.relative_to(ROOT)}"
            )
        return 1 if problems else 0
    for path, text in want.items():
        path.write_text(text, encoding="utf8")
        print(f"rendered {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
