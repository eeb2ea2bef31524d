"""Peak memory of a FLAT training step (batch 10) and of inference, against text length.

Each measurement runs in a fresh process and reports its peak RSS over its resident
memory just before the step (the kernel's peak is reset there). The peer, run side
by side, is the literal position term of eq. 11: R_ij gathered per pair and
projected by W_kR per pair (O(n^2 d^2) work, an n x n x d tensor), which is what
the original code does.

    python benchmarks/memory.py              # prints a Markdown table
"""

import argparse
import json
import subprocess
import sys
from typing import Dict, List

LENGTHS = [50, 100, 200, 300, 1000]
LITERAL_MAX = 300  # the literal term at 1000 characters would need tens of GB


def literal_attention_forward(self, x, rel, pos, attend):  # type: ignore[no-untyped-def]
    """FlatAttention.forward with eq. 11's position term built pair by pair."""
    import torch

    batch, n, width = x.shape
    heads, hw = self.n_heads, self.head_width
    q = self.w_q(x).view(batch, n, heads, hw).transpose(1, 2)
    k = self.w_k(x).view(batch, n, heads, hw).transpose(1, 2)
    val = self.w_v(x).view(batch, n, heads, hw).transpose(1, 2)
    r_pairs = rel[pos.index]  # B n n d: R_ij for every pair
    rk_pairs = self.w_kr(r_pairs).view(batch, n, n, heads, hw)  # R_ij W_kR, O(n^2 d^2)
    scores = torch.matmul(q + self.u[None, :, None, :], k.transpose(-1, -2))
    scores = scores + torch.einsum("bhid,bijhd->bhij", q + self.v[None, :, None, :], rk_pairs)
    scores = scores * self.scale
    scores = scores.masked_fill(~attend[:, None], torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1)
    return self.w_o(torch.matmul(probs, val).transpose(1, 2).reshape(batch, n, width))


def measure(length: int, mode: str, impl: str) -> Dict[str, float]:
    import torch
    from spacy.training import Example

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import spacy
    from common import peak_rss_mb, reset_peak_rss, texts

    from spacy_flat.nn.flat_layer import FlatAttention

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one", nargs=3, metavar=("LENGTH", "MODE", "IMPL"))
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args.one[2])))
        return
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from common import machine

    rows: List[str] = []
    for length in LENGTHS:
        cells = {}
        for mode in ("train", "infer"):
            for impl in ("flat", "windowed", "literal"):
                if (impl == "literal" and length > LITERAL_MAX) or (impl == "windowed" and length <= 512):
                    cells[(mode, impl)] = None
                    continue
                out = subprocess.run(
                    [sys.executable, __file__, "--one", str(length), mode, impl], capture_output=True, text=True
                )
                if out.returncode != 0:
                    cells[(mode, impl)] = {"peak_mb": float("nan"), "words_per_text": 0.0}
                    print(out.stderr[-2000:], file=sys.stderr)
                else:
                    cells[(mode, impl)] = json.loads(out.stdout.strip().splitlines()[-1])
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


if __name__ == "__main__":
    main()
