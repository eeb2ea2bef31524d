"""The position scores as one autograd function against the same computation in plain torch ops.

The peer is spacy-flat's first version of the position term (commit 3c1619a): the
same grouping and chunking, but with `torch.gather` and `index_copy_` under
autograd, which keep every chunk's heads x rows x triples block for backward.
Both run forward and backward on the lattice of ten MSRA test texts of each length
(jieba words included), paper-sized heads (8 x 20). Peak memory: one step in a fresh
process each; time: median of steps alternating between the two in one process.

    python benchmarks/position_scores.py
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

LENGTHS = [30, 50, 100, 300]


def plain_position_scores(qv, rk, pos):  # type: ignore[no-untyped-def]
    """The first version: the same chunks, with gather and index_copy_ under autograd."""
    from spacy_flat.nn.flat.position_scores import _block_index, _plan_chunks

    batch, heads, n, hw = qv.shape
    flat_q = qv.permute(2, 0, 1, 3).reshape(n * batch, heads, hw)
    flat_index = pos.index.transpose(0, 1).reshape(n * batch, n)
    out = qv.new_zeros(n * batch, heads, n)
    for u0, u1, rows in _plan_chunks(pos, heads):
        scores = flat_q.index_select(0, rows).transpose(0, 1) @ rk[:, :, u0:u1]
        idx = _block_index(flat_index, u0, u1, rows)
        out.index_copy_(0, rows, scores.gather(-1, idx[None].expand(heads, -1, -1)).transpose(0, 1))
    return out.view(n, batch, heads, n).permute(1, 2, 0, 3)


def lattice_inputs(length: int):  # type: ignore[no-untyped-def]
    """Queries, triple table, positions and output weights for ten MSRA texts of `length`."""
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from common import texts

    from spacy_flat.lattice.loaders import create_jieba_lexicon
    from spacy_flat.nn.flat.positions import relative_positions

    source = "".join(texts("msra", "test"))
    batch = [source[i * length : (i + 1) * length] for i in range(10)]
    lexicon = create_jieba_lexicon()()
    spans = [lexicon.matches(t) for t in batch]
    n = max(len(t) + len(s) for t, s in zip(batch, spans))
    heads = torch.zeros(10, n, dtype=torch.long)
    tails = torch.zeros(10, n, dtype=torch.long)
    mask = torch.zeros(10, n, dtype=torch.bool)
    for b, (text, words) in enumerate(zip(batch, spans)):
        h = list(range(len(text))) + [head for head, _, _ in words]
        t = list(range(len(text))) + [tail for _, tail, _ in words]
        heads[b, : len(h)], tails[b, : len(t)], mask[b, : len(h)] = torch.tensor(h), torch.tensor(t), True
    pos = relative_positions(heads, tails, mask)
    gen = torch.Generator().manual_seed(0)
    qv = torch.randn(10, 8, n, 20, generator=gen, requires_grad=True)
    rk = torch.randn(8, 20, pos.n_triples, generator=gen, requires_grad=True)
    weights = torch.randn(10, 8, n, n, generator=gen)
    return qv, rk, pos, weights


def step(impl: str, qv, rk, pos, weights) -> float:  # type: ignore[no-untyped-def]
    """One forward and backward; RETURNS its seconds."""
    from spacy_flat.nn.flat.position_scores import position_scores

    fn = position_scores if impl == "fused" else plain_position_scores
    start = time.perf_counter()
    (fn(qv, rk, pos) * weights).sum().backward()
    qv.grad = rk.grad = None
    return time.perf_counter() - start


def peak_memory(length: int, impl: str) -> float:
    """Peak MB of one step over the resident memory just before it (run in a fresh process)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from common import peak_rss_mb, reset_peak_rss

    inputs = lattice_inputs(length)
    base = reset_peak_rss()
    step(impl, *inputs)
    return peak_rss_mb() - base


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory", nargs=2, metavar=("LENGTH", "IMPL"))
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    if args.memory:
        print(json.dumps(peak_memory(int(args.memory[0]), args.memory[1])))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from common import machine

    print(f"Machine: {machine()}\n")
    print("| chars | tokens (chars + words) | plain torch MB | fused MB | plain s | fused s | plain/fused time |")
    print("|---|---|---|---|---|---|---|")
    for length in LENGTHS:
        memory = {}
        for impl in ("plain", "fused"):
            command = [sys.executable, __file__, "--memory", str(length), impl]
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            memory[impl] = json.loads(out.stdout.strip().splitlines()[-1])
        # Time side by side in this process, alternating which goes first.
        inputs = lattice_inputs(length)
        times: Dict[str, List[float]] = {"plain": [], "fused": []}
        for rep in range(args.repeats):
            for impl in ("plain", "fused") if rep % 2 else ("fused", "plain"):
                times[impl].append(step(impl, *inputs))
        plain, fused = statistics.median(times["plain"]), statistics.median(times["fused"])
        print(
            f"| {length} | {inputs[0].shape[2]} | {memory['plain']:.0f} | {memory['fused']:.0f} | "
            f"{plain:.4f} | {fused:.4f} | {plain / fused:.2f}× |",
            flush=True,
        )


if __name__ == "__main__":
    main()
