"""Grouping for the device against grouping for the CPU, on a GPU: nlp.pipe
characters per second with prediction groups as large as the device budget allows
(`layers.flat_model.group_lengths`, what a GPU gets) and with the CPU's padding-capped
groups, interleaved in rounds, the same model and docs; and whether both write the
same entities.

    python benchmarks/device_groups.py --gpu-id 0 --batch-sizes 64 256
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import spacy
import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import load_average, machine, texts
from family import ARCHITECTURES, from_config, use_gpu
from speed import entities

import spacy_flat.layers.flat_model as groups_module

GROUPINGS = {"device": groups_module.groups_for_device, "CPU": lambda ops: False}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu-id", type=int, required=True)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--datasets", nargs="+", choices=("resume", "msra"), default=["resume", "msra"])
    parser.add_argument("--architectures", nargs="+", choices=list(ARCHITECTURES), default=["FLAT", "DC-SAN"])
    args = parser.parse_args()
    use_gpu(args.gpu_id)
    print(f"Machine: {machine()}; GPU {torch.cuda.get_device_name(args.gpu_id)}; before: {load_average()}\n")
    print("| test set | architecture | batch | chars/s, device groups | chars/s, CPU groups | ratio | same entities |")
    print("|---|---|---|---|---|---|---|")
    for dataset in args.datasets:
        docs = texts(dataset, "test")[: args.docs]
        chars = sum(len(t) for t in docs)
        for arch in args.architectures:
            nlp: spacy.language.Language = from_config(ARCHITECTURES[arch].format("resume"), "resume")
            for size in args.batch_sizes:
                rates: Dict[str, List[float]] = {name: [] for name in GROUPINGS}
                found = {}
                for _ in range(args.repeats + 1):  # the first round is an untimed warm-up
                    for name, choose in GROUPINGS.items():
                        groups_module.groups_for_device = choose  # type: ignore[assignment]
                        start = time.perf_counter()
                        found[name] = entities(nlp.pipe(docs, batch_size=size))
                        rates[name].append(chars / (time.perf_counter() - start))
                groups_module.groups_for_device = GROUPINGS["device"]  # type: ignore[assignment]
                device, cpu = (statistics.median(rates[name][1:]) for name in GROUPINGS)
                same = found["device"] == found["CPU"]
                print(f"| {dataset} | {arch} | {size} | {device:,.0f} | {cpu:,.0f} | {device / cpu:.2f}x | {same} |")
    print(f"\nAfter: {load_average()}")


if __name__ == "__main__":
    main()
