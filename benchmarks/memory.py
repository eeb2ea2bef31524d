"""Peak memory of a FLAT training step (batch 10) and of inference, against text length.

Each measurement runs in a fresh process (glibc's mmap threshold fixed, see CHILD_ENV) and reports its
peak RSS over its resident memory just before the step (the kernel's peak is reset there). The peer, run side
by side, is the literal position term of eq. 11: R_ij gathered per pair and
projected by W_kR per pair (O(n^2 d^2) work, an n x n x d tensor), which is what
the original code does.

    python benchmarks/memory.py              # prints a Markdown table

It also writes the table's result record, memory-training-step-by-length (benchmarks/results.py;
`memory_figures` builds its figures; --results DIR: elsewhere).
"""

import argparse
import json
import math
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

Cells = Dict[Tuple[str, str], Optional[Dict[str, float]]]

# The original code's peak at 300 characters, batch 10: its authors' figure, set beside ours.
ORIGINAL_CODE_GB = 8.4
NOTES = (
    "Texts up to 512 characters are one window, so the windowed columns equal the whole-text ones there; "
    "the literal term at 1,000 characters would need tens of GB and was not run. The original code's "
    "8.4 GB at 300 characters, batch 10, is its authors' figure. Each cell runs with glibc's mmap threshold "
    "fixed at 128 KB (MALLOC_MMAP_THRESHOLD_), so its peak is what was live at once."
)

LENGTHS = [50, 100, 200, 300, 1000]
# glibc raises its mmap threshold after the first large block freed, so later blocks of the same size come from
# the heap and stay resident when freed: a cell's peak RSS then depends on which tensors happened to be freed
# first (this code read 145 and 175 MB at 200 characters in two runs; 113 and 115 with the threshold fixed).
# A fixed threshold turns the adjustment off: every block over 128 KB is mapped and unmapped, and the peak is
# what was live at once.
CHILD_ENV = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
LITERAL_MAX = 300  # the literal term at 1000 characters would need tens of GB


def literal_attention_forward(self, x, rel, pos, attend, n_queries=None):  # type: ignore[no-untyped-def]
    """FlatAttention.forward with eq. 11's position term built pair by pair (the first `n_queries`
    rows only, as the real one computes them in the last layer)."""
    import torch

    batch, n, width = x.shape
    heads, hw = self.n_heads, self.head_width
    n_q = n if n_queries is None else n_queries
    if n_q < n:
        pos, attend = pos.queries(n_q), attend[:, :n_q]
    if isinstance(rel, torch.nn.Module):  # prediction on a CPU hands the fusion module over
        rel = rel(pos)
    q = self.w_q(x[:, :n_q]).view(batch, n_q, heads, hw).transpose(1, 2)
    k = self.w_k(x).view(batch, n, heads, hw).transpose(1, 2)
    val = self.w_v(x).view(batch, n, heads, hw).transpose(1, 2)
    r_pairs = rel[pos.index]  # B n_q n d: R_ij for every pair
    rk_pairs = self.w_kr(r_pairs).view(batch, n_q, n, heads, hw)  # R_ij W_kR, O(n^2 d^2)
    scores = torch.matmul(q + self.u[None, :, None, :], k.transpose(-1, -2))
    scores = scores + torch.einsum("bhid,bijhd->bhij", q + self.v[None, :, None, :], rk_pairs)
    scores = scores * self.scale
    scores = scores.masked_fill(~attend[:, None], torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1)
    return self.w_o(torch.matmul(probs, val).transpose(1, 2).reshape(batch, n_q, width))


def measure(length: int, mode: str, impl: str) -> Dict[str, float]:
    import torch
    from spacy.training import Example

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import spacy
    from common import peak_rss_mb, reset_peak_rss, texts

    from spacy_flat.nn.flat.encoder import FlatAttention

    torch.manual_seed(0)
    if impl == "literal":
        FlatAttention.forward = literal_attention_forward
    source = "".join(texts("msra", "test"))
    batch = [source[i * length : (i + 1) * length] for i in range(10)]
    nlp = spacy.blank("zh")
    # "flat": one window per text (the raw cost); "windowed": the default 512-character windows.
    ner = nlp.add_pipe("flat_ner", config={} if impl == "windowed" else {"window_size": 0})
    seed = [Example.from_dict(nlp.make_doc("张伟在北京。"), {"entities": [(0, 2, "PER"), (3, 5, "LOC")]})]
    nlp.initialize(lambda: seed)
    optimizer = nlp.resume_training()
    warm = [Example.from_dict(nlp.make_doc(t[:10]), {"entities": []}) for t in batch]
    nlp.update(warm, sgd=optimizer)
    list(nlp.pipe([t[:10] for t in batch]))
    base = reset_peak_rss()
    n_words = sum(len(ner.lexicon.matches(t)) for t in batch)
    if mode == "train":
        egs = [Example.from_dict(nlp.make_doc(t), {"entities": []}) for t in batch]
        nlp.update(egs, sgd=optimizer)
    else:
        list(nlp.pipe(batch, batch_size=10))
    peak = peak_rss_mb()
    return {"peak_mb": peak - base, "words_per_text": n_words / len(batch)}


def memory_figures(measured: Dict[int, Cells]) -> Dict[str, Any]:
    """The figures of memory-training-step-by-length, as render.py's memory-by-length table reads them.

    measured: length -> {(mode, impl): {"peak_mb", "words_per_text"} or None where not run}, mode "train" or
    "infer", impl "flat" (whole texts), "windowed" or "literal". A failed run's peak (NaN) is kept as null.
    """

    def mb(cell: Optional[Dict[str, float]]) -> Optional[int]:
        if cell is None or math.isnan(cell["peak_mb"]):
            return None
        return round(cell["peak_mb"])

    def ratio(ours: Optional[Dict[str, float]], literal: Optional[Dict[str, float]]) -> Optional[float]:
        if mb(ours) is None or mb(literal) is None:
            return None
        return round(literal["peak_mb"] / max(ours["peak_mb"], 1), 1)  # type: ignore[index]

    rows = []
    for length, cells in measured.items():
        row: Dict[str, Any] = {"chars": length, "words_per_text": round(cells[("train", "flat")]["words_per_text"])}  # type: ignore[index]
        for mode in ("train", "infer"):
            row[f"{mode}_mb"] = mb(cells[(mode, "flat")])
            row[f"{mode}_windows_mb"] = mb(cells[(mode, "windowed")])
            row[f"{mode}_literal_mb"] = mb(cells[(mode, "literal")])
            row[f"{mode}_ratio"] = ratio(cells[(mode, "flat")], cells[(mode, "literal")])
        rows.append(row)
    return {"rows": rows, "original_code_gb": ORIGINAL_CODE_GB}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one", nargs=3, metavar=("LENGTH", "MODE", "IMPL"))
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from results import record, results_option

    results_option(parser)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args.one[2])))
        return
    load = round(os.getloadavg()[0], 2)
    from common import machine

    rows: List[str] = []
    measured: Dict[int, Cells] = {}
    for length in LENGTHS:
        cells = {}
        for mode in ("train", "infer"):
            for impl in ("flat", "windowed", "literal"):
                if (impl == "literal" and length > LITERAL_MAX) or (impl == "windowed" and length <= 512):
                    cells[(mode, impl)] = None
                    continue
                out = subprocess.run(
                    [sys.executable, __file__, "--one", str(length), mode, impl],
                    capture_output=True,
                    text=True,
                    env=CHILD_ENV,
                )
                if out.returncode != 0:
                    cells[(mode, impl)] = {"peak_mb": float("nan"), "words_per_text": 0.0}
                    print(out.stderr[-2000:], file=sys.stderr)
                else:
                    cells[(mode, impl)] = json.loads(out.stdout.strip().splitlines()[-1])
        measured[length] = cells
        ours_t, lit_t = cells[("train", "flat")], cells[("train", "literal")]
        ours_i, lit_i = cells[("infer", "flat")], cells[("infer", "literal")]
        win_t, win_i = cells[("train", "windowed")], cells[("infer", "windowed")]

        def fmt(c):  # type: ignore[no-untyped-def]
            return "-" if c is None else f"{c['peak_mb']:.0f}"

        def ratio(a, b):  # type: ignore[no-untyped-def]
            return "-" if b is None else f"{b['peak_mb'] / max(a['peak_mb'], 1):.1f}x"

        rows.append(
            f"| {length} | {ours_t['words_per_text']:.0f} | {fmt(ours_t)} | {fmt(win_t)} | {fmt(lit_t)} | "
            f"{ratio(ours_t, lit_t)} | {fmt(ours_i)} | {fmt(win_i)} | {fmt(lit_i)} | {ratio(ours_i, lit_i)} |"
        )
        print(rows[-1], flush=True)
    print(f"\nMachine: {machine()}\n")
    print(
        "| chars | lattice words/text | train MB, whole texts | train MB, 512-char windows | train MB, literal eq. 11 |"
        " literal/ours | inference MB, whole texts | inference MB, windows | inference MB, literal | literal/ours |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    title = (
        "Peak memory of a training step (batch 10) and of inference against text length, "
        "against the literal position term of eq. 11"
    )
    record(
        "memory-training-step-by-length",
        "memory",
        title,
        memory_figures(measured),
        dataset="msra",
        load_before=load,
        notes=NOTES,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
