"""Peak memory and time of annotating one long document, 1,000 to 200,000 characters.

flat_ner cuts long docs into windows (default 512 characters, cut at sentence
punctuation, 32 characters of shared context), so memory should stay flat and
time grow linearly. Each length runs in a fresh process; peak RSS is measured over
the loaded pipeline's resident memory just before the call.

    python benchmarks/long_docs.py

It also writes the table's result record, long-docs-windows (benchmarks/results.py; `long_docs_figures`
builds its figures; --results DIR: elsewhere).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

LENGTHS = [1_000, 5_000, 20_000, 50_000, 200_000]


def measure(length: int) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    import spacy
    from common import peak_rss_mb, reset_peak_rss, texts
    from spacy.training import Example

    source = "".join(texts("msra", "train_dev"))[:length]
    nlp = spacy.blank("zh")
    nlp.add_pipe("flat_ner")
    seed = [Example.from_dict(nlp.make_doc("张伟在北京。"), {"entities": [(0, 2, "PER"), (3, 5, "LOC")]})]
    nlp.initialize(lambda: seed)
    nlp("预热")  # builds the matcher; a small warm-up keeps the baseline below every measurement
    base = reset_peak_rss()
    start = time.perf_counter()
    doc = nlp(source)
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    return {"chars": len(doc.text), "seconds": seconds, "peak_mb": peak - base, "ents": len(doc.ents)}


def long_docs_figures(measured: List[Dict[str, float]]) -> Dict[str, Any]:
    """The figures of long-docs-windows, as render.py's long-docs table reads them.

    measured: one `measure` result a length ({"chars", "seconds", "peak_mb", ...}).
    """
    rows = [
        {
            "chars": int(r["chars"]),
            "seconds": round(r["seconds"], 1),
            "chars_per_s": round(r["chars"] / r["seconds"]),
            "peak_mb": round(r["peak_mb"]),
        }
        for r in measured
    ]
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one", type=int, metavar="LENGTH", help=argparse.SUPPRESS)
    sys.path.insert(0, str(Path(__file__).parent))
    from results import record, results_option

    results_option(parser)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one)))
        return
    load = round(os.getloadavg()[0], 2)
    from common import machine

    measured = []
    print(f"Machine: {machine()}\n")
    print("| characters | seconds | chars/s | peak MB over baseline |")
    print("|---|---|---|---|")
    for length in LENGTHS:
        out = subprocess.run([sys.executable, __file__, "--one", str(length)], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        measured.append(r)
        print(
            f"| {r['chars']:,} | {r['seconds']:.1f} | {r['chars'] / r['seconds']:,.0f} | {r['peak_mb']:.0f} |",
            flush=True,
        )

    if measured:
        title = "One long document through flat_ner in 512-character windows"
        figures = long_docs_figures(measured)
        record("long-docs-windows", "long-docs", title, figures, dataset="msra", load_before=load, out_dir=args.results)


if __name__ == "__main__":
    main()
