"""Shared helpers for the benchmarks: data from ../shared, a default pipeline, timing, result tables."""

import itertools
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import spacy
import srsly
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example
from thinc.api import Config

from spacy_flat.cli.convert import convert

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CACHE = ROOT / "corpus" / "bench"


def corpus(name: str, split: str) -> Path:
    """A DocBin of a shared corpus split, converted once into corpus/bench (ignored by git)."""
    files = (
        {("resume", s): SHARED / "data/resume" / f"{s}.char.bmes" for s in ("train", "dev", "test")}
        | {("weibo", s): SHARED / "data/weibo" / f"weiboNER_2nd_conll.{s}" for s in ("train", "dev", "test")}
        | {
            ("msra", "test"): SHARED / "data/msra/test.char.bmes",
            ("msra", "train_dev"): SHARED / "data/msra/train_dev.char.bmes",
        }
    )
    out = CACHE / f"{name}-{split}.spacy"
    if not out.exists():
        with open("/dev/null", "w") as sink:
            convert(files[(name, split)], out, log=sink)
    return out


def splits(name: str) -> Dict[str, Path]:
    """The train, dev and test DocBins of a shared corpus. MSRA's dev is the tail of
    its training file, cut as project.yml's convert-msra cuts it."""
    if name != "msra":
        return {split: corpus(name, split) for split in ("train", "dev", "test")}
    out = CACHE / "msra"
    if not (out / "train.spacy").exists():
        dev_sentences = int(srsly.read_yaml(ROOT / "project.yml")["vars"]["msra_dev_sentences"])
        with open("/dev/null", "w") as sink:
            train_dev = SHARED / "data/msra/train_dev.char.bmes"
            convert(train_dev, out / "train.spacy", dev_last=dev_sentences, dev_output=out / "dev.spacy", log=sink)
            convert(SHARED / "data/msra/test.char.bmes", out / "test.spacy", log=sink)
    return {split: out / f"{split}.spacy" for split in ("train", "dev", "test")}


def train_split(name: str) -> str:
    """The training split's name: MSRA ships train and dev as one file."""
    return "train_dev" if name == "msra" else "train"


def texts(name: str, split: str) -> List[str]:
    nlp = spacy.blank("zh")
    return [d.text for d in DocBin().from_disk(corpus(name, split)).get_docs(nlp.vocab)]


def examples(nlp: Language, name: str, split: str, step: int = 1, limit: Optional[int] = None) -> List[Example]:
    """Examples of a split: every `step`-th doc, the first `limit` of them (all: None).
    Only the docs chosen are made into examples (MSRA's 46,364 take 17 s)."""
    docs = DocBin().from_disk(corpus(name, split)).get_docs(nlp.vocab)
    chosen = itertools.islice(docs, 0, None if limit is None else limit * step, step)
    return [Example(nlp.make_doc(d.text), d) for d in chosen]


def n_docs(name: str, split: str) -> int:
    """The docs in a split, without making examples of them."""
    return len(DocBin().from_disk(corpus(name, split)))


def spacy_ner_config(max_epochs: Optional[int] = None) -> Config:
    """The peer: `spacy init config --lang zh --pipeline ner --optimize accuracy`, no static vectors."""
    from spacy.cli.init_config import init_config

    config = init_config(lang="zh", pipeline=["ner"], optimize="accuracy", gpu=False)
    config["paths"]["vectors"] = None
    config["initialize"]["vectors"] = None
    embed = config["components"]["tok2vec"]["model"]["embed"]
    if "include_static_vectors" in embed:
        embed["include_static_vectors"] = False
    if max_epochs is not None:
        config["training"]["max_epochs"] = max_epochs
    return config


def reset_peak_rss() -> float:
    """Reset this process's peak resident memory (Linux: clear_refs 5) and
    RETURNS (float): the current resident MB, the baseline for `peak_rss_mb`."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    """RETURNS (float): Peak resident MB since the last `reset_peak_rss`."""
    return _status_mb("VmHWM")


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise OSError(f"/proc/self/status has no {field}")


def median_time(fn: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# A 1-minute load average above this, per core, means something else runs: timings would not hold.
BUSY_LOAD_PER_CORE = 0.3


def load_average() -> str:
    """RETURNS (str): The 1, 5 and 15-minute load averages, for every timing table."""
    import os

    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def require_quiet(allow_busy: bool) -> None:
    """Refuse to time on a busy machine (load average over BUSY_LOAD_PER_CORE a core), unless allowed."""
    import os

    one = os.getloadavg()[0]
    limit = BUSY_LOAD_PER_CORE * (os.cpu_count() or 1)
    if one > limit:
        message = f"the machine is busy ({load_average()}, over {limit:.1f}): timings would measure the other jobs"
        if not allow_busy:
            raise SystemExit(f"error: {message}; wait, or pass --allow-busy to time anyway (the tables say so)")
        print(f"WARNING: {message}\n", file=sys.stderr, flush=True)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = subprocess.run(
            ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True
        ).stdout.strip()
        cpu = model or cpu
    except OSError:
        pass
    import os

    import torch

    versions = f"torch {torch.__version__}, spaCy {spacy.__version__}"
    return f"{cpu}, {os.cpu_count()} cores, {versions}, {time.strftime('%Y-%m-%d')}"


# Columns of a result over seeds (`seeds_row`).
SEEDS_COLUMNS = ("model", "test F1 (mean ± sd)", "dev F1", "runs", "train s (median)")


def seeds_row(label: str, results: List[dict]) -> List[str]:
    """Runs of one model over seeds: test F1 as mean ± sample sd, mean dev F1, runs, median training seconds.

    results (List[dict]): Each with `test_f`, `dev_f` (percent) and `train_s`.
    """
    tests = [r["test_f"] for r in results]
    spread = statistics.stdev(tests) if len(tests) > 1 else 0.0
    dev = statistics.mean(r["dev_f"] for r in results)
    secs = statistics.median(r["train_s"] for r in results)
    return [label, f"{statistics.mean(tests):.2f} ± {spread:.2f}", f"{dev:.2f}", str(len(results)), f"{secs:.0f}"]


def paper_rows(paper: Dict[str, float], columns: int, f1_column: int, note: str = "paper") -> List[List[str]]:
    """Published test F1 as table rows: `name (note)`, the F1 in `f1_column`, the other cells empty."""
    rows = []
    for name, f1 in paper.items():
        row = [f"{name} ({note})"] + [""] * (columns - 1)
        row[f1_column] = f"{f1:.2f}"
        rows.append(row)
    return rows


def table_row(cells: Sequence[str]) -> str:
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """RETURNS (str): A Markdown table, ready to paste into BENCHMARKS.md."""
    return "\n".join([table_row(columns), "|" + "---|" * len(columns), *(table_row(row) for row in rows)])
