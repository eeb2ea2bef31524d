"""Peak memory and time of annotating one long document, 1,000 to 200,000 characters.

flat_ner cuts long docs into windows (default 512 characters, cut at sentence
punctuation, 32 characters of shared context), so memory should stay flat and
time grow linearly. Each length runs in a fresh process; peak RSS is measured over
the loaded pipeline's resident memory just before the call.

    python benchmarks/long_docs.py
"""

import json
import subprocess
import sys
import time
from pathlib import Path

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


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(measure(int(sys.argv[2]))))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from common import machine

    print(f"Machine: {machine()}\n")
    print("| characters | seconds | chars/s | peak MB over baseline |")
    print("|---|---|---|---|")
    for length in LENGTHS:
        out = subprocess.run([sys.executable, __file__, "--one", str(length)], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"| {r['chars']:,} | {r['seconds']:.1f} | {r['chars'] / r['seconds']:,.0f} | {r['peak_mb']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
