"""Render BENCHMARKS.md and the README's result tables from the records under benchmarks/results/.

    python benchmarks/render.py            # rewrite BENCHMARKS.md and the README's marked blocks
    python benchmarks/render.py --check    # exit 1, naming each table that differs from its data

BENCHMARKS.md is the template `benchmarks/results/BENCHMARKS.template.md` with its placeholders filled:
`{{table:NAME}}` is a table built by `TABLES[NAME]` and followed by where its figures come from (command,
date, commit, machine, threads, load); `{{v:ID:path}}` is one figure of record ID (`figures.test_f1.mean`;
`:.1f` after the path sets the format) and `{{f1:ID}}` a record's test F1 as mean ± sd. In README.md each
block between `<!-- results:NAME -->` and `<!-- /results:NAME -->` is `TABLES[NAME]`, without provenance.
"""

import argparse
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import RESULTS, ROOT, load_all

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


def f1(rec: Record, bold: bool = False, seeds: bool = False) -> str:
    test = rec["figures"]["test_f1"]
    mean = f"**{test['mean']:.2f}**" if bold else f"{test['mean']:.2f}"
    out = f"{mean} ± {test['sd']:.2f}" if "sd" in test else mean
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


def accuracy_by_dataset(t: Tables, dataset: str) -> str:
    chosen = [rid for rid, rec in t.records.items() if rec["question"] == "accuracy" and rec.get("dataset") == dataset]

    def order(rid: str) -> Tuple:
        s = t.records[rid]["setup"]
        inputs = s.get("inputs", "")
        kind, arch = KIND_ORDER.get(s.get("kind"), 9), ARCH_ORDER.get(s.get("architecture"), 9)
        return (kind, s.get("epochs") or 0, inputs.count("+"), len(inputs), arch, rid)

    rows = []
    for rid in sorted(chosen, key=order):
        rec = t.get(rid)
        s, fig = rec["setup"], rec["figures"]
        model = s["architecture"] + (f" + {s['transformer']}" if s.get("transformer") else "")
        if s.get("pipeline"):
            model = f"the `{s['pipeline']}` pipeline ({s['architecture']})"
        if s.get("kind") == "variant":
            model = rec["title"].split(", ")[1]
        per_seed = ", ".join(f"{x:.2f}" for x in fig["test_f1"].get("per_seed", [])) or "–"
        dev = fig.get("dev_f1", {}).get("mean")
        rows.append(
            [
                model,
                s.get("inputs", ""),
                str(s.get("epochs", "")),
                f1(rec),
                ", ".join(map(str, rec["seeds"])),
                per_seed,
                num(dev, 2) if dev is not None else "–",
                train_seconds(rec),
                rec["date"],
            ]
        )
    columns = ["model", "inputs", "epochs", "test F1", "seeds", "test F1 per seed", "dev F1", "train s", "date"]
    return table(columns, rows)


def papers(t: Tables) -> str:
    rec = t.get("reference-papers")
    rows = []
    for name, cells in rec["figures"].items():
        rows.append([name, *(f"{cells[d]:.2f}" for d in DATASETS), cells.get("setting", "")])
    return table(["published", "Resume", "Weibo", "MSRA", "setting"], rows)


# The headline: the family at the longest budget measured over three seeds, per cell.
HEADLINE: List[Tuple[str, Dict[str, str]]] = [
    (
        "FLAT, embedded defaults",
        {
            "resume": "accuracy-resume-flat-defaults-5ep-s012",
            "weibo": "accuracy-weibo-flat-defaults-10ep-s012",
            "msra": "accuracy-msra-flat-defaults-2ep-s012-gpu",
        },
    ),
    (
        "DC-SAN, embedded defaults",
        {
            "resume": "accuracy-resume-dcsan-defaults-5ep-s012",
            "weibo": "accuracy-weibo-dcsan-defaults-10ep-s012",
            "msra": "accuracy-msra-dcsan-defaults-2ep-s012-gpu",
        },
    ),
    (
        "FLAT, pretrained inputs",
        {
            "resume": "accuracy-resume-flat-wiki-words+own-bigrams-raw-10ep-s012",
            "weibo": "accuracy-weibo-flat-wiki-words+own-bigrams-raw-10ep-s012",
            "msra": "accuracy-msra-flat-wiki-words+own-bigrams-10ep-s012",
        },
    ),
    (
        "DC-SAN, pretrained inputs",
        {
            "resume": "accuracy-resume-dcsan-wiki-words+own-bigrams-raw-10ep-s012",
            "weibo": "accuracy-weibo-dcsan-wiki-words+own-bigrams-raw-10ep-s012",
            "msra": "accuracy-msra-dcsan-wiki-words+own-bigrams-10ep-s012",
        },
    ),
    (
        "Lattice LSTM, embedded defaults",
        {
            "resume": "accuracy-resume-lattice-lstm-defaults-30ep-s012",
            "weibo": "accuracy-weibo-lattice-lstm-defaults-30ep-s012",
            "msra": "accuracy-msra-lattice-lstm-defaults-2ep-s012",
        },
    ),
    (
        "FLAT + m3e-small (4-layer transformer)",
        {
            "resume": "accuracy-resume-flat-defaults-6ep-s012-m3e-small-gpu",
            "weibo": "accuracy-weibo-flat-defaults-3ep-s012-m3e-small",
            "msra": "accuracy-msra-flat-defaults-1ep-s012-m3e-small-gpu",
        },
    ),
    ("DC-SAN + m3e-small", {"weibo": "accuracy-weibo-dcsan-defaults-3ep-s012-m3e-small"}),
]
HEADLINE_PAPERS = ("FLAT", "TENER", "Lattice LSTM", "FLAT+BERT", "DC-SAN+BERT")


def headline(t: Tables) -> str:
    rows = []
    for label, cells in HEADLINE:
        row = [label]
        for d in DATASETS:
            if d not in cells:
                row.append("–")
                continue
            rec = t.get(cells[d])
            n = len(rec["seeds"])
            row.append(
                f"{f1(rec)} ({rec['setup']['epochs']} ep{'' if n == 3 else f', {n} seed' + ('s' if n > 1 else '')})"
            )
        rows.append(row)
    paper = t.get("reference-papers")["figures"]
    for name in HEADLINE_PAPERS:
        rows.append([f"{name}, published", *(f"{paper[name][d]:.2f}" for d in DATASETS)])
    return table(["test F1 (mean ± sd, 3 seeds)", "Resume", "Weibo", "MSRA"], rows)


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


CHOICES = [
    (
        "`resume` pipeline",
        "Chinese résumés: NAME, ORG, TITLE, EDU, CONT, LOC, PRO, RACE",
        "`spacy project run all .`",
        [("Resume", "accuracy-resume-main-job")],
    ),
    (
        "`news` pipeline",
        "general text, news and reports: PER, LOC, ORG",
        "`spacy project run news .`",
        [("MSRA", "accuracy-msra-news-pipeline")],
    ),
    (
        "`weibo` pipeline",
        "social media: PER, ORG, LOC, GPE, each named or nominal",
        "`spacy project run all . --vars.dataset weibo`",
        [("Weibo", "accuracy-weibo-flat-defaults-10ep-s012")],
    ),
    (
        "FLAT (the default)",
        "the paper's model; ahead at the shortest budgets and on a transformer",
        "`configs/<dataset>.cfg`",
        [
            ("Weibo", "accuracy-weibo-flat-wiki-words+own-bigrams-raw-10ep-s012"),
            ("MSRA", "accuracy-msra-flat-wiki-words+own-bigrams-10ep-s012"),
        ],
    ),
    (
        "DC-SAN",
        "the most accurate without a transformer, above all on social media; the fastest",
        "`configs/<dataset>_dcsan.cfg`",
        [
            ("Weibo", "accuracy-weibo-dcsan-wiki-words+own-bigrams-raw-10ep-s012"),
            ("MSRA", "accuracy-msra-dcsan-wiki-words+own-bigrams-10ep-s012"),
        ],
    ),
    (
        "TENER",
        "no lexicon at all: text no word list covers, or none may be shipped",
        "`configs/<dataset>_tener.cfg`",
        [
            ("Weibo", "accuracy-weibo-tener-own-bigrams-raw-10ep-s012"),
            ("MSRA", "accuracy-msra-tener-own-bigrams-1ep-s012"),
        ],
    ),
    (
        "Lattice LSTM",
        "the recurrent baseline of the FLAT paper",
        "`configs/<dataset>_lattice_lstm.cfg`",
        [
            ("Resume", "accuracy-resume-lattice-lstm-defaults-30ep-s012"),
            ("Weibo", "accuracy-weibo-lattice-lstm-defaults-30ep-s012"),
        ],
    ),
    (
        "FLAT or DC-SAN on a transformer",
        "the best accuracy, at a transformer's cost",
        "`configs/resume_trf.cfg`, `resume_dcsan_trf.cfg`",
        [("Weibo", "accuracy-weibo-flat-defaults-3ep-s012-m3e-small")],
    ),
]


def choose(t: Tables) -> str:
    rows = []
    for name, use, run, cells in CHOICES:
        scores = []
        for dataset, rid in cells:
            rec = t.get(rid)
            n = len(rec["seeds"])
            seeds = "" if n == 3 else f", {n} seed" + ("s" if n > 1 else "")
            scores.append(f"{dataset} {f1(rec)} ({rec['setup']['epochs']} ep{seeds})")
        rows.append([name, use, run, "; ".join(scores)])
    return table(["pipeline or architecture", "for", "run", "test F1"], rows)


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
    (
        "+ typed word lists (MSRA: without our bigrams)",
        {
            "resume": "accuracy-resume-flat-wiki-words+own-bigrams+gazetteers-raw-5ep-s012",
            "weibo": "accuracy-weibo-flat-wiki-words+own-bigrams+gazetteers-raw-10ep-s012",
            "msra": "accuracy-msra-flat-wiki-words+gazetteers-1ep-s012-eval-frequency-2760",
        },
    ),
    (
        "+ our word vectors beside the wiki ones",
        {
            "resume": "accuracy-resume-flat-wiki-words+own-words+own-bigrams+gazetteers-raw-5ep-s012",
            "weibo": "accuracy-weibo-flat-wiki-words+own-words+own-bigrams+gazetteers-raw-10ep-s012",
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
    """Each stage's share of nlp.pipe's profiled time on a GPU (benchmarks/profile_inference.py), a column
    for each decoding and batch size; a sentence saying how to measure it while there is no record."""
    if GPU_PROFILE not in t.records:
        return (
            f"No GPU profile is recorded yet: `bash benchmarks/device_lane.sh profile` on a GPU machine writes "
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
    note = f"\n\nNot measured yet: `{missing[0]}` (`bash benchmarks/device_lane.sh training`)." if missing else ""
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


def pipe_memory(t: Tables) -> str:
    fig = t.get("memory-pipe-batch64")["figures"]
    return table(
        ["test set (400 docs)", "nlp.pipe at batch 64: peak above the loaded pipeline"],
        [[DATASET_NAMES[r["dataset"]], f"{num(r['peak_mb'])} MB"] for r in fig["rows"]],
    )


def long_docs(t: Tables) -> str:
    fig = t.get("long-docs-windows")["figures"]
    rows = [[num(r["chars"]), f"{r['seconds']:.1f}", num(r["chars_per_s"]), num(r["peak_mb"])] for r in fig["rows"]]
    return table(["characters", "seconds", "chars/s", "peak MB over the loaded pipeline"], rows)


def long_docs_transformer(t: Tables) -> str:
    fig = t.get("long-docs-transformer-200k")["figures"]
    rows = [[r["run"], f"{r['seconds']:g}", f"{r['peak_rss_gb']:.1f} GB"] for r in fig["rows"]]
    return table(["200,200 characters, one thread", "seconds", "peak RSS"], rows)


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


CURVE_EPOCHS = (1, 2, 3, 5, 10, 20, 30, 50, 75, 100)


def dev_curves(t: Tables) -> str:
    """Dev F1 against epochs of the runs whose records keep their curve (resumable runs): the
    mean over the seeds of the evaluation at each whole epoch (where every seed has one), and
    the mean of each seed's best with the epochs they came at."""
    chosen = [
        rid
        for rid, rec in t.records.items()
        if rec["question"] == "accuracy" and rec["figures"].get("dev_curve") and (rec["setup"].get("epochs") or 0) >= 5
    ]
    marks = [e for e in CURVE_EPOCHS if any(t.records[r]["setup"]["epochs"] >= e for r in chosen)]
    rows = []
    for rid in sorted(
        chosen, key=lambda r: (DATASETS.index(t.records[r]["dataset"]), t.records[r]["setup"]["epochs"], r)
    ):
        rec = t.get(rid)
        curves = rec["figures"]["dev_curve"]
        bests = [max(curve, key=lambda point: point[1]) for curve in curves]
        seeds = rec["seeds"][: len(curves)]
        # Titles tell apart runs of the same architecture, inputs and budget (another batcher, say).
        row = [f"{rec['title']}, seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"]
        row += [num(at, 1) if at is not None else "" for at in (_mean_at_epoch(curves, e) for e in marks)]
        epochs = ", ".join(f"{round(epoch, 1):g}" for epoch, _ in bests)
        row.append(f"{statistics.mean(best for _, best in bests):.1f} ({epochs})")
        rows.append(row)
    return table(["dev F1 after epoch"] + [str(e) for e in marks] + ["best (epochs)"], rows)


def _mean_at_epoch(curves: List[List[List[float]]], epoch: int) -> Optional[float]:
    """The seeds' mean dev F1 at a whole epoch, where every seed was evaluated there."""
    found = [_at_epoch(curve, epoch) for curve in curves]
    return None if None in found else statistics.mean(x for x in found if x is not None)


def _curve_figures(rec: Record) -> List[float]:
    """The numbers the dev-curves table computes from a record: its means at whole epochs and of the best."""
    curves = rec["figures"].get("dev_curve") or []
    if not curves:
        return []
    means = [_mean_at_epoch(curves, e) for e in CURVE_EPOCHS]
    best = statistics.mean(max(point[1] for point in curve) for curve in curves)
    return [x for x in means if x is not None] + [best] + [point[0] for curve in curves for point in curve]


def _at_epoch(curve: List[List[float]], epoch: int) -> Optional[float]:
    """The dev F1 evaluated nearest a whole epoch, within a twentieth of one (a run
    whose batcher splits an epoch unevenly evaluates a step or two off it)."""
    epoch_at, score = min(curve, key=lambda point: abs(point[0] - epoch))
    return score if abs(epoch_at - epoch) <= 0.05 else None


def derived_numbers(records: Dict[str, Record]) -> List[float]:
    """The figures the tables compute rather than read (the dev-curves table's means), for the check
    that every number of a table comes from the records."""
    out = []
    for rec in records.values():
        if rec["question"] == "accuracy":
            out += _curve_figures(rec)
    return out


# Tables that gather figures shown again, with their provenance, further down.
SUMMARIES = ("headline", "headline-speed")

TABLES: Dict[str, Callable[[Tables], str]] = {
    "headline": headline,
    "headline-speed": headline_speed,
    "choose": choose,
    "papers": papers,
    "accuracy-resume": lambda t: accuracy_by_dataset(t, "resume"),
    "accuracy-weibo": lambda t: accuracy_by_dataset(t, "weibo"),
    "accuracy-msra": lambda t: accuracy_by_dataset(t, "msra"),
    "pretrained-inputs": pretrained_inputs,
    "dev-curves": dev_curves,
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
    "pipe-memory": pipe_memory,
    "long-docs": long_docs,
    "long-docs-transformer": long_docs_transformer,
    "annotation": annotation,
    "annotation-reading": annotation_reading,
    "checkpoints": checkpoints,
    "pretraining": pretraining,
}


# ---- provenance and placeholders ----


def provenance(t: Tables, ids: Sequence[str]) -> str:
    """Where a table's figures come from: the machine once, then one line per run (the records that one
    command wrote at one time share its line)."""
    machines = {t.records[i]["machine"] for i in ids if t.records[i]["question"] != "reference"}
    same = len(machines) == 1
    lines: List[str] = [f"Machine: {next(iter(machines))}."] if same else []
    runs: Dict[Tuple[str, ...], List[str]] = {}
    slots: Dict[Tuple[str, ...], int] = {}
    for rid in ids:
        rec = t.records[rid]
        if rec["question"] == "reference":
            lines.append(f"- {rec['title']}: {rec['source']}.")
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


def lookup(rec: Record, path: str) -> Any:
    value: Any = rec
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def fill(template: str, t: Tables) -> str:
    def table_block(match: "re.Match[str]") -> str:
        t.used = []  # each table cites the records it read itself
        name = match.group(1)
        body = TABLES[name](t)
        if name in SUMMARIES:
            cited = ", ".join(f"`{rid}`" for rid in t.used if t.records[rid]["question"] != "reference")
            return f"{body}\n\nFrom the records {cited}; their commands are under the tables below."
        cited = provenance(t, list(t.used))
        return f"{body}\n\n{cited}" if cited else body

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


def render_benchmarks(records: Dict[str, Record]) -> str:
    return fill(TEMPLATE.read_text(encoding="utf8"), Tables(records))


MARKER = re.compile(r"(<!-- results:([a-z0-9-]+) -->\n)(.*?)(<!-- /results:\2 -->)", re.S)
MARKERS_REQUIRED = ("choose", "headline", "headline-speed")


def render_readme(records: Dict[str, Record], text: str) -> str:
    t = Tables(records)
    missing = [name for name in MARKERS_REQUIRED if f"<!-- results:{name} -->" not in text]
    if missing:
        raise SystemExit(
            f"README.md lacks the markers of {', '.join(missing)} (<!-- results:NAME --> ... <!-- /results:NAME -->)"
        )
    return MARKER.sub(lambda m: f"{m.group(1)}{TABLES[m.group(2)](t)}\n{m.group(4)}", text)


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
    records = load_all()
    want = {BENCHMARKS: render_benchmarks(records), README: render_readme(records, README.read_text(encoding="utf8"))}
    if args.check:
        problems = []
        for path, text in want.items():
            problems += differences(path.name, path.read_text(encoding="utf8"), text)
        for line in problems:
            print(line, file=sys.stderr)
        if not problems:
            print(
                f"BENCHMARKS.md and README.md agree with the {len(records)} records under {RESULTS.relative_to(ROOT)}"
            )
        return 1 if problems else 0
    for path, text in want.items():
        path.write_text(text, encoding="utf8")
        print(f"rendered {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
