"""What reading costs `annotate --engine ray`: its Ray Data tasks read
every input file twice, a file a task (`annotation/ray_reading.py`): once to count
the good records, once to cut them into the batches the actors annotate. Times
both passes' work on one core, without Ray, on MSRA test repeated to --chars
characters in a JSON-lines file (and a gzip copy), and sets it beside what one
actor annotates in the same time.

    python benchmarks/annotate_read.py --chars 5000000 --actor-rate 13800

It also writes the table's result record, annotation-read-cost (benchmarks/results.py;
`read_figures` builds its figures; --results DIR: elsewhere).
"""

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).parent))
from dataclasses import asdict

from common import load_average, machine, texts
from results import record, results_option

from spacy_flat.annotate.ray_reading import _count, _file_batches
from spacy_flat.annotate.records import RecordFormat


def timed(job: Callable[[], int], repeats: int) -> List[float]:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        job()
        seconds.append(time.perf_counter() - start)
    return seconds


def read_figures(passes: Dict[str, List[float]], chars: int, documents: int, actor_rate: float) -> Dict[str, Any]:
    """The figures of annotation-read-cost, as render.py's annotation-reading table reads them.

    passes: each pass's name -> its seconds a repeat; chars, documents: the input's size; actor_rate: the
    chars/s one actor annotates, against which a pass's share is taken.
    """
    rows = []
    for name, seconds in passes.items():
        rate = chars / statistics.median(seconds)
        rows.append(
            {
                "pass": name,
                "seconds": {
                    "median": round(statistics.median(seconds), 2),
                    "min": round(min(seconds), 2),
                    "max": round(max(seconds), 2),
                },
                "chars_per_s": round(rate),
                "share_pct": round(100 * actor_rate / rate, 2),
            }
        )
    rate = round(actor_rate) if float(actor_rate).is_integer() else actor_rate
    return {"rows": rows, "actor_rate": rate, "documents": documents, "chars": chars}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=20_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--actor-rate", type=float, default=13_800.0, help="chars/s one actor annotates")
    results_option(parser)
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 2)
    passes: Dict[str, List[float]] = {}
    print(f"Machine: {machine()}; before: {load_average()}\n")
    sentences = texts("msra", "test")
    with tempfile.TemporaryDirectory() as tmp:
        plain, packed = Path(tmp) / "in.jsonl", Path(tmp) / "in.jsonl.gz"
        chars = n = 0
        with open(plain, "w", encoding="utf8") as out, gzip.open(packed, "wt", encoding="utf8") as zipped:
            while chars < args.chars:
                for text in sentences:
                    line = json.dumps({"text": text, "source": "msra", "n": n}, ensure_ascii=False) + "\n"
                    out.write(line)
                    zipped.write(line)
                    chars += len(text)
                    n += 1
        print(f"{n:,} documents, {chars:,} characters ({plain.stat().st_size / 1e6:.0f} MB as JSON lines)\n")

        fmt = asdict(RecordFormat())

        def count(path: Path) -> int:
            return int(_count({"index": [0], "path": [str(path)], "name": [str(path)]}, fmt)["good"][0])

        def cut(path: Path) -> int:
            pending = list(range(n // args.shard_size + 1))
            file = {"index": [0], "path": [str(path)], "name": [str(path)], "start": [0], "good": [n]}
            blocks = _file_batches(file, fmt, args.shard_size, args.batch_size, pending)
            return sum(len(block["chunk"]) for block in blocks)

        print("| pass, one core | seconds, median (range) | characters/s | share of an actor's annotating time |")
        print("|---|---|---|---|")
        for name, job in [
            ("count (read, check)", lambda: count(plain)),
            ("cut (read, check, cut into batch rows)", lambda: cut(plain)),
            ("count, gzip", lambda: count(packed)),
            ("cut, gzip", lambda: cut(packed)),
        ]:
            seconds = timed(job, args.repeats)
            passes[name] = seconds
            median = statistics.median(seconds)
            rate = chars / median
            print(
                f"| {name} | {median:.2f} ({min(seconds):.2f}–{max(seconds):.2f}) | {rate:,.0f} | "
                f"{100 * args.actor_rate / rate:.2f}% |"
            )
    print(f"\nActor rate: {args.actor_rate:,.0f} chars/s (one actor, one thread); after: {load_average()}")
    title = "What reading twice costs annotate on Ray: both passes' work on one core, without Ray"
    figures = read_figures(passes, chars, n, args.actor_rate)
    setup = {"repeats": args.repeats, "shard_size": args.shard_size, "batch_size": args.batch_size}
    record(
        "annotation-read-cost",
        "annotation",
        title,
        figures,
        dataset="msra",
        setup=setup,
        load_before=load,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
