"""Shared helpers for the benchmarks: data from ../shared, a default pipeline, timing."""

import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Callable, List, Optional

import spacy
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example
from thinc.api import Config

from spacy_flat.convert import convert

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


def train_split(name: str) -> str:
    """The training split's name: MSRA ships train and dev as one file."""
    return "train_dev" if name == "msra" else "train"


def texts(name: str, split: str) -> List[str]:
    nlp = spacy.blank("zh")
    return [d.text for d in DocBin().from_disk(corpus(name, split)).get_docs(nlp.vocab)]


def examples(nlp: Language, name: str, split: str) -> List[Example]:
    docs = DocBin().from_disk(corpus(name, split)).get_docs(nlp.vocab)
    return [Example(nlp.make_doc(d.text), d) for d in docs]


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
