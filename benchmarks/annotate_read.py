"""How fast the driver of `annotate --engine ray` reads (issue 19): the Ray engine
reads and checks every record on the driver, then hands shards to the actors, so
the driver's read rate bounds how many actors one run can feed. Times, on MSRA
test repeated to --chars characters in a JSON-lines file (and a gzip copy):
reading alone, and reading plus cutting the shards into the object-store blocks
the actors take (without Ray itself, whose `ray.put` is a memory copy).

    python benchmarks/annotate_read.py --chars 20000000 --actor-rate 13800
"""

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List

sys.path.insert(0, str(Path(__file__).parent))
from common import load_average, machine, texts

from spacy_flat.annotation.ray_engine import _shard_blocks
from spacy_flat.annotation.records import ReadReport, RecordFormat, read_records, require_pyarrow
from spacy_flat.annotation.shards import chunks


def timed(job: Callable[[], int], repeats: int) -> List[float]:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        job()
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=20_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shard-size", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--actor-rate", type=float, default=13_800.0, help="chars/s one actor annotates")
    args = parser.parse_args()
    print(f"Machine: {machine()}; before: {load_average()}\n")
    pa = require_pyarrow()
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

        def read(path: Path) -> int:
            return sum(1 for _ in read_records([path], RecordFormat(), ReadReport()))

        def read_and_cut(path: Path) -> int:
            shards = chunks(read_records([path], RecordFormat(), ReadReport()), args.shard_size)
            return sum(len(b) for k, shard in enumerate(shards) for b in _shard_blocks(pa, k, shard, args.batch_size))

        print("| driver step | seconds, median (range) | characters/s | actors it feeds at the actor rate |")
        print("|---|---|---|---|")
        for name, job in [
            ("read JSON lines", lambda: read(plain)),
            ("read JSON lines + cut shards into blocks", lambda: read_and_cut(plain)),
            ("read gzip JSON lines + cut shards into blocks", lambda: read_and_cut(packed)),
        ]:
            seconds = timed(job, args.repeats)
            median = statistics.median(seconds)
            rate = chars / median
            print(
                f"| {name} | {median:.2f} ({min(seconds):.2f}–{max(seconds):.2f}) | {rate:,.0f} | "
                f"{rate / args.actor_rate:,.0f} |"
            )
    print(f"\nActor rate: {args.actor_rate:,.0f} chars/s (one actor, one thread); after: {load_average()}")


if __name__ == "__main__":
    main()
