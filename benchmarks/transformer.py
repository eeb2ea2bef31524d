"""FLAT+transformer against spaCy's transformer `ner`, both on the same transformer, trained in the same run.

Ours is configs/resume_trf.cfg (FLAT on the transformer's character features plus
the LAC character embeddings, the transformer fine-tuned jointly). The peer is what
`spacy init config --lang zh --pipeline ner --optimize accuracy --gpu` gives a spaCy
user (a transformer and the transition-based `ner` on its listener), with the same
model directory. Both train for the same number of epochs with `spacy train`, select
on dev, and are scored once on test (exact character spans); inference speed is
`nlp.pipe` on the test set, on CPU.

What differs is only the model on top of the transformer. Both see the same batches
(~10 sentences) and the same schedule, scaled to the budget: one epoch of warm-up,
then linear decay to zero at the last step, the transformer at 2e-4 (FLAT's own
layers at 5x). spaCy's defaults (warm-up 250 steps, decay over 20,000, batches of
2,000 padded tokens) spend a short run entirely in warm-up: on Weibo at 3 epochs
the default peer never left F1 0.

    python benchmarks/transformer.py weibo --epochs 3
    python benchmarks/transformer.py weibo --epochs 3 --seeds 1 2 --skip-peer
    python benchmarks/transformer.py resume --epochs 6 --lexicon w2v --skip-peer
    python benchmarks/transformer.py resume --epochs 3 --model ../shared/vectors/m3e-small
    python benchmarks/transformer.py msra --epochs 1 --skip-peer --set training.eval_frequency=1839
    python benchmarks/transformer.py weibo --epochs 3 --seeds 0 1 2 --skip-peer --config resume_dcsan_trf.cfg
    python benchmarks/transformer.py resume --epochs 6 --skip-peer --gpu-id 0 --output training/trf/resume

Each run also writes accuracy result records as accuracy.py does (benchmarks/results.py; figures from
accuracy.seeds_figures): ours as accuracy-DATASET-ARCH-INPUTS-Nep-sSEEDS-TRANSFORMER, e.g.
accuracy-weibo-flat-defaults-3ep-s012-m3e-small, the peer as accuracy-DATASET-spacy-ner-TRANSFORMER-Nep-sSEEDS
(`record_names` makes the names and setups; --set keys under components. join the name, a GPU run's name
ends in -gpu; --results DIR: elsewhere).
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import spacy
from spacy.tokens import DocBin
from thinc.api import Config

from spacy_flat.cli.schedule import schedule_for

sys.path.insert(0, str(Path(__file__).parent))
from accuracy import ARCHITECTURE_NAMES, LEXICONS, run, seeds_figures
from common import ROOT, SEEDS_COLUMNS, SHARED, machine, markdown_table, paper_rows, seeds_row, splits, table_row
from results import record, results_option, slug

# Table 4 of Li et al. 2020: BERT-base (12 layers), not the small model used here.
PAPER_BERT = {
    "resume": {"FLAT+BERT": 95.86, "BERT+CRF": 95.53},
    "weibo": {"FLAT+BERT": 68.55, "BERT+CRF": 68.20},
    "msra": {"FLAT+BERT": 96.09, "BERT+CRF": 94.95},
}
OURS = "FLAT + transformer (flat_ner)"
PEER = "transformer + spaCy ner"
# One row per run.
COLUMNS = ("model", "seed", "test F1", "dev F1", "train s", "test chars/s (CPU, nlp.pipe)")
# The transformer's learning rate in both models (configs/resume_trf.cfg).
TRANSFORMER_RATE = 2e-4


def schedule(train: Path, epochs: int) -> Dict[str, object]:
    """The learning-rate schedule both models train with: flat_ner's batches counted
    on the corpus, one epoch of warm-up, decay to zero at the last step."""
    config = ROOT / "configs" / "resume_trf.cfg"
    return {**schedule_for(config, train, epochs), "training.optimizer.learn_rate.initial_rate": TRANSFORMER_RATE}


def peer_config(model: str, epochs: int) -> Config:
    """`spacy init config --lang zh --pipeline ner --optimize accuracy --gpu`, on `model`,
    with flat_ner's batcher (the schedule comes from `schedule`)."""
    from spacy.cli.init_config import init_config

    config = init_config(lang="zh", pipeline=["ner"], optimize="accuracy", gpu=True)
    config["components"]["transformer"]["model"]["name"] = model
    config["training"]["max_epochs"] = epochs
    config["training"]["max_steps"] = 0
    ours = Config().from_disk(ROOT / "configs" / "resume_trf.cfg", interpolate=False)
    config["training"]["batcher"] = ours["training"]["batcher"]
    return config


def sliced(data: Dict[str, Path], limit: int, out: Path) -> Dict[str, Path]:
    """The first `limit` docs of each split (for a quick check of the script)."""
    nlp = spacy.blank("zh")
    out.mkdir(parents=True, exist_ok=True)
    result = {}
    for split, path in data.items():
        docs = list(DocBin().from_disk(path).get_docs(nlp.vocab))[:limit]
        DocBin(docs=docs).to_disk(out / f"{split}.spacy")
        result[split] = out / f"{split}.spacy"
    return result


def record_names(
    dataset: str,
    config: str,
    lexicon: Optional[str],
    epochs: int,
    seeds: Sequence[int],
    transformer: str,
    sets: List[str],
    gpu: bool = False,
) -> Dict[str, Tuple[str, str, Dict[str, Any]]]:
    """The accuracy records' (id, title, setup) for ours ("ours") and the peer ("peer"); trained on a GPU,
    their ids end in "gpu" as accuracy.py's do."""
    stem = Path(config).stem.removesuffix("_trf")
    arch = slug(stem.split("_", 1)[1]) if "_" in stem else "flat"
    architecture = ARCHITECTURE_NAMES.get(arch, arch)
    inputs = lexicon or "defaults"
    label = "embedded defaults" if inputs == "defaults" else inputs
    settings = [
        f"{k.rsplit('.', 1)[-1]}={v}" for k, v in (i.split("=", 1) for i in sets) if k.startswith("components.")
    ]
    name = {"msra": "MSRA"}.get(dataset, dataset.capitalize())
    span = f"{epochs} epoch" + ("s" if epochs != 1 else "")
    runs = "s" + "".join(map(str, seeds))
    device = "gpu" if gpu else ""
    ours = {
        "architecture": architecture,
        "inputs": label,
        "epochs": epochs,
        "transformer": transformer,
        "kind": "variant" if settings else "transformer",
        "config": f"configs/{Path(config).name}",
    }
    title = f"{name}, {architecture} + {transformer}, {label}, {span}" + "".join(f", {x}" for x in settings)
    peer = {"architecture": "spaCy ner", "inputs": "no vectors", "epochs": epochs, "transformer": transformer}
    return {
        "ours": (
            slug("accuracy", dataset, arch, inputs, f"{epochs}ep", runs, *settings, transformer, device),
            title,
            ours,
        ),
        "peer": (
            slug("accuracy", dataset, "spacy-ner", transformer, f"{epochs}ep", runs, device),
            f"{name}, spaCy's ner on {transformer}, {span}",
            {**peer, "kind": "peer"},
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=sorted(PAPER_BERT))
    parser.add_argument("--model", default=str(SHARED / "vectors" / "m3e-small"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--lexicon", choices=sorted(LEXICONS), help="flat_ner's lexicon instead of jieba's")
    parser.add_argument(
        "--config", default="resume_trf.cfg", help="ours, under configs/: resume_dcsan_trf.cfg for DC-SAN+BERT"
    )
    parser.add_argument("--skip-peer", action="store_true", help="train only flat_ner (more seeds of a measured row)")
    parser.add_argument("--peer-only", action="store_true", help="train only spaCy's ner on the transformer")
    parser.add_argument("--gpu-id", type=int, default=-1, help="train and evaluate on this GPU")
    parser.add_argument("--limit", type=int, default=0, help="use only the first N docs of each split")
    parser.add_argument(
        "--set", nargs="+", default=[], metavar="KEY=JSON", help="config overrides for both models, after the schedule"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="keep flat_ner's runs in OUTPUT/flatSEED, with checkpoints (trained pipelines to evaluate or reuse; "
        "the same command run again goes on from where a stopped run stood); default: a temporary folder, spacy train",
    )
    results_option(parser)
    args = parser.parse_args()
    if args.peer_only and args.skip_peer:
        parser.error("--peer-only and --skip-peer leave nothing to train")
    load = round(os.getloadavg()[0], 2)
    model = str(Path(args.model).resolve())
    data = splits(args.dataset)
    rows: List[List[str]] = []
    ours_label = OURS if args.config == "resume_trf.cfg" else f"{args.config} + transformer (flat_ner)"
    results: Dict[str, List[dict]] = {ours_label: [], PEER: []}
    with tempfile.TemporaryDirectory() as tmp:
        if args.limit:
            data = sliced(data, args.limit, Path(tmp) / "data")
        shared = schedule(data["train"], args.epochs)
        shared.update({key: json.loads(value) for key, value in (item.split("=", 1) for item in args.set)})
        peer_path = Path(tmp) / "peer.cfg"
        peer_config(model, args.epochs).to_disk(peer_path)
        for seed in args.seeds:
            runs = []
            if not args.peer_only:
                ours = run(
                    ROOT / "configs" / args.config,
                    data,
                    seed,
                    args.epochs,
                    {"paths.transformer": model, **shared, **(LEXICONS[args.lexicon] if args.lexicon else {})},
                    (args.output or Path(tmp)) / f"flat{seed}",
                    args.gpu_id,
                    resumable=args.output is not None,
                )
                runs.append((ours_label, ours))
            if not args.skip_peer:
                runs.append(
                    (PEER, run(peer_path, data, seed, args.epochs, shared, Path(tmp) / f"peer{seed}", args.gpu_id))
                )
            for label, r in runs:
                results[label].append(r)
                row = [label, str(seed), f"{r['test_f']:.2f}", f"{r['dev_f']:.2f}", f"{r['train_s']:.0f}"]
                rows.append([*row, f"{r['test_chars_per_s']:.0f}"])
                print("RESULT " + table_row(rows[-1]), flush=True)
    print(f"Machine: {machine()}\n")
    lexicon = f"{args.lexicon} lexicon" if args.lexicon else "jieba lexicon"
    print(f"Dataset: {args.dataset}, transformer {Path(model).name}, {lexicon}, ", end="")
    print(f"{args.epochs} epochs, seeds {args.seeds}\n")
    paper = paper_rows(PAPER_BERT[args.dataset], len(COLUMNS), 2, note="paper, BERT-base")
    print(markdown_table(COLUMNS, rows + paper))
    summaries = [seeds_row(label, done) for label, done in results.items() if len(done) > 1]
    if summaries:
        print("\n" + markdown_table(SEEDS_COLUMNS, summaries))
    names = record_names(
        args.dataset, args.config, args.lexicon, args.epochs, args.seeds, Path(model).name, args.set, args.gpu_id >= 0
    )
    common = {
        "dataset": args.dataset,
        "seeds": args.seeds,
        "load_before": load,
        "gpu_id": args.gpu_id,
        "out_dir": args.results,
    }
    for key, done in (("ours", results[ours_label]), ("peer", results[PEER])):
        if done:
            rid, title, setup = names[key]
            record(rid, "accuracy", title, seeds_figures(done), setup=setup, **common)


if __name__ == "__main__":
    main()
