"""FLAT+transformer against spaCy's transformer `ner`, both on the same transformer, trained in the same run.

Ours is configs/resume_trf.cfg (FLAT on the transformer's character features plus
the LAC character embeddings, the transformer fine-tuned jointly). The peer is what
`spacy init config --lang zh --pipeline ner --optimize accuracy --gpu` gives a spaCy
user (a transformer and the transition-based `ner` on its listener), with the same
model directory. Both train for the same number of epochs with `spacy train`, select
on dev, and are scored once on test (exact character spans); inference speed is
`nlp.pipe` on the test set, on CPU.

    python benchmarks/transformer.py weibo --epochs 3
    python benchmarks/transformer.py resume --epochs 3 --model ../shared/vectors/m3e-small
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import spacy
from spacy.tokens import DocBin
from thinc.api import Config

sys.path.insert(0, str(Path(__file__).parent))
from accuracy import run, splits
from common import ROOT, SHARED, machine

# Table 4 of Li et al. 2020: BERT-base (12 layers), not the small model used here.
PAPER_BERT = {
    "resume": {"FLAT+BERT": 95.86, "BERT+CRF": 95.53},
    "weibo": {"FLAT+BERT": 68.55, "BERT+CRF": 68.20},
    "msra": {"FLAT+BERT": 96.09, "BERT+CRF": 94.95},
}
# Optimizer steps per epoch at ~10 sentences a batch: evaluate about once an epoch.
EVAL_FREQUENCY = {"resume": 400, "weibo": 135, "msra": 4200}


def peer_config(model: str, epochs: int, eval_frequency: int) -> Config:
    """`spacy init config --lang zh --pipeline ner --optimize accuracy --gpu`, on `model`."""
    from spacy.cli.init_config import init_config

    config = init_config(lang="zh", pipeline=["ner"], optimize="accuracy", gpu=True)
    config["components"]["transformer"]["model"]["name"] = model
    config["training"]["max_epochs"] = epochs
    config["training"]["max_steps"] = 0
    config["training"]["eval_frequency"] = eval_frequency
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=sorted(PAPER_BERT))
    parser.add_argument("--model", default=str(SHARED / "vectors" / "m3e-small"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N docs of each split")
    args = parser.parse_args()
    model = str(Path(args.model).resolve())
    data = splits(args.dataset)
    eval_frequency = EVAL_FREQUENCY[args.dataset]
    rows: List[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.limit:
            data = sliced(data, args.limit, Path(tmp) / "data")
            eval_frequency = max(1, args.limit // 10)
        ours = run(
            ROOT / "configs" / "resume_trf.cfg",
            data,
            args.seed,
            args.epochs,
            {"paths.transformer": model, "training.eval_frequency": eval_frequency},
            Path(tmp) / "flat",
        )
        peer_path = Path(tmp) / "peer.cfg"
        peer_config(model, args.epochs, eval_frequency).to_disk(peer_path)
        peer = run(peer_path, data, args.seed, args.epochs, None, Path(tmp) / "peer")
        for label, r in (("FLAT + transformer (flat_ner)", ours), ("transformer + spaCy ner", peer)):
            rows.append(
                f"| {label} | {r['test_f']:.2f} | {r['dev_f']:.2f} | {r['train_s']:.0f} | {r['test_chars_per_s']:.0f} |"
            )
    print(f"Machine: {machine()}\n")
    print(f"Dataset: {args.dataset}, transformer {Path(model).name}, {args.epochs} epochs, seed {args.seed}\n")
    print("| model | test F1 | dev F1 | train s | test chars/s (CPU, nlp.pipe) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    for name, f1 in PAPER_BERT[args.dataset].items():
        print(f"| {name} (paper, BERT-base) | {f1:.2f} | | | |")


if __name__ == "__main__":
    main()
