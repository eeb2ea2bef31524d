"""Peak memory of one full prediction group: `nlp.pipe` over 80 texts of 300
characters cut from MSRA test (the device budget, `lattice.batching.DEVICE_PAIR_BUDGET`),
grouped for a device (one encoder call) and for a CPU (padding-capped groups), each
architecture from its config, initialized, not trained. On a GPU: CUDA memory above
the memory before (torch.cuda.max_memory_allocated); on a CPU: peak RSS, each in a
fresh process so the high-water mark is that run's alone.

    python benchmarks/group_memory.py --gpu-id 0
    python benchmarks/group_memory.py --architectures FLAT
"""

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import ROOT, load_average, machine
from family import ARCHITECTURES

TEXTS, LENGTH = 80, 300


def measure(arch: str, grouping: str, gpu_id: int) -> float:
    """Peak MB of one nlp.pipe call over the texts, in a fresh process."""
    code = f"""
import sys; sys.path.insert(0, 'benchmarks')
import spacy_flat.layers.flat_model as groups
from common import texts, reset_peak_rss, peak_rss_mb
from family import ARCHITECTURES, from_config, use_gpu
gpu = {gpu_id} >= 0
if gpu:
    use_gpu({gpu_id})
    import torch
nlp = from_config(ARCHITECTURES[{arch!r}].format("resume"), "resume")
source = "".join(texts("msra", "test"))
docs = [source[i * {LENGTH}:(i + 1) * {LENGTH}] for i in range({TEXTS})]
list(nlp.pipe(docs[:2]))
groups.groups_for_device = lambda ops: {grouping == "device"}
if gpu:
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated() / 2**20
else:
    base = reset_peak_rss()
list(nlp.pipe(docs, batch_size={TEXTS}))
if gpu:
    torch.cuda.synchronize(); print(torch.cuda.max_memory_allocated() / 2**20 - base)
else:
    print(peak_rss_mb() - base)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--architectures", nargs="+", choices=list(ARCHITECTURES), default=list(ARCHITECTURES))
    args = parser.parse_args()
    where = "CUDA memory" if args.gpu_id >= 0 else "peak RSS"
    print(f"Machine: {machine()}; {where}; before: {load_average()}\n")
    print(f"| architecture | {TEXTS} x {LENGTH} chars, device groups | CPU groups |")
    print("|---|---|---|")
    for arch in args.architectures:
        device, cpu = (measure(arch, grouping, args.gpu_id) for grouping in ("device", "CPU"))
        print(f"| {arch} | {device:,.0f} MB | {cpu:,.0f} MB |")
    print(f"\nAfter: {load_average()}")


if __name__ == "__main__":
    main()
