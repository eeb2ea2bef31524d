"""Students beside their teachers: test F1 (3 seeds, selected on dev), CPU speed and training time.

Rows: each teacher pipeline (trained beforehand, e.g. FLAT on m3e-small by `transformer.py`, or the
family by `accuracy.py --output`), their ensemble (posterior decoding of the mean marginals), and
students of one config trained on

- `gold`: the gold data alone (the student's architecture as a single model),
- `soft`: gold plus the teachers' soft targets (`[flat_distillation]`, weight α, temperature T),
- `silver`: gold plus soft targets, with silver sentences from raw text (`silver`) beside the gold.

Speed is `nlp.pipe` chars/s at batch 64 on one thread (the evaluation's timing); every run keeps its
checkpoints in OUTPUT, so the same command run again goes on from where it stopped.

    python benchmarks/distillation.py weibo --teachers training/trf/weibo0/model-best \\
        --student-config weibo_dcsan.cfg --epochs 10 --seeds 0 1 2 --output training/distill/weibo \\
        --raw ../shared/corpora/smp2020-ewect_usual_eval_labeled.json.xz --json-field content
"""

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import spacy
import torch
from spacy.tokens import DocBin
from thinc.api import Config

sys.path.insert(0, str(Path(__file__).parent))
from accuracy import PAPER, input_overrides, run
from common import ROOT, load_average, machine, markdown_table, splits

from spacy_flat.cli.evaluate import evaluate
from spacy_flat.cli.schedule import schedule_for
from spacy_flat.distillation.settings import DistillationSettings, SilverSettings
from spacy_flat.distillation.silver import SilverReport, silver_docs
from spacy_flat.distillation.student import attach_teachers
from spacy_flat.distillation.teachers import EnsembleTeacher, PipelineTeacher, ensemble_entities
from spacy_flat.pipeline.scorer import score_char_entities
from spacy_flat.pretraining.sentences import SentenceFilter, held_back_texts
from spacy_flat.pretraining.sources import TextFields, read_texts

VARIANTS = ("gold", "soft", "silver")
COLUMNS = ("model", "test F1 (mean ± sd)", "dev F1", "runs", "chars/s, batch 64, 1 thread", "train s (median)")


def student_config(
    base: Path, variant: str, settings: DistillationSettings, silver: Optional[Path], ratio: float, out: Path
) -> Path:
    """The student's config for a variant: the base config with `[flat_distillation]` (soft, silver)
    and the gold-and-silver reader (silver)."""
    config = Config().from_disk(base, interpolate=False)
    if variant != "gold":
        config["flat_distillation"] = {
            "teachers": settings.teachers,
            "soft_weight": settings.soft_weight,
            "temperature": settings.temperature,
        }
    if variant == "silver":
        assert silver is not None
        config["corpora"]["train"] = {
            "@readers": "spacy-flat.gold_and_silver.v1",
            "gold": "${paths.train}",
            "silver": str(silver),
            "silver_ratio": ratio,
        }
    path = out / f"{variant}.cfg"
    path.parent.mkdir(parents=True, exist_ok=True)
    config.to_disk(path)
    return path


def make_silver(teacher: object, data: Dict[str, Path], args: argparse.Namespace, out: Path) -> Path:
    """Silver sentences from the raw text, made once (a file already there is reused)."""
    path = out / "silver.spacy"
    if path.exists():
        return path
    report = SilverReport()
    sentence_filter = SentenceFilter(held_back_texts([str(data["dev"]), str(data["test"])]))
    texts = (text for text, _ in read_texts(args.raw, TextFields(args.json_field, args.csv_column), report.sources))
    settings = SilverSettings(min_probability=args.min_probability, max_sentences=args.max_silver)
    docs = DocBin(store_user_data=True)
    for doc in silver_docs(teacher, texts, sentence_filter, settings, report):  # type: ignore[arg-type]
        docs.add(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    docs.to_disk(path)
    summary = report.summary(sentence_filter)
    (out / "silver.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf8")
    print(f"silver: {json.dumps({k: v for k, v in summary.items() if k != 'problems'}, ensure_ascii=False)}")
    return path


def teacher_rows(members: List[PipelineTeacher], paths: List[str], data: Dict[str, Path], out: Path) -> List[List[str]]:
    rows = []
    for k, path in enumerate(paths):
        scores = evaluate(path, data["test"], out / f"teacher{k}-metrics")
        dev = json.loads((Path(path) / "meta.json").read_text())["performance"].get("ents_f", 0.0)
        speed = scores["speed"]["chars_per_second"]
        rows.append([f"teacher: {path}", f"{100 * scores['ents_f']:.2f}", f"{100 * dev:.2f}", "1", f"{speed:,.0f}", ""])
    if len(members) > 1:
        ensemble = EnsembleTeacher(members)
        reference = members[0].component
        nlp = members[0].nlp
        examples = [eg for eg in spacy.training.Corpus(data["test"])(nlp)]
        predicted = ensemble_entities(ensemble, reference, [eg.predicted for eg in examples])
        for eg, spans in zip(examples, predicted):
            eg.predicted.ents = [
                eg.predicted.char_span(s, e, label=label, alignment_mode="expand") for s, e, label, _ in spans
            ]
        f1 = score_char_entities(examples)["ents_f"]
        rows.append([f"ensemble of {len(members)} (mean marginals)", f"{100 * f1:.2f}", "", "1", "", ""])
    return rows


def seeds_row(label: str, results: List[dict]) -> List[str]:
    tests = [r["test_f"] for r in results]
    spread = statistics.stdev(tests) if len(tests) > 1 else 0.0
    return [
        label,
        f"{statistics.mean(tests):.2f} ± {spread:.2f}",
        f"{statistics.mean(r['dev_f'] for r in results):.2f}",
        str(len(results)),
        f"{statistics.median(r['test_chars_per_s'] for r in results):,.0f}",
        f"{statistics.median(r['train_s'] for r in results):.0f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", choices=sorted(PAPER))
    parser.add_argument("--teachers", nargs="+", required=True, help="trained teacher pipelines; several: an ensemble")
    parser.add_argument("--student-config", default=None, help="a config in configs/ (default: DATASET.cfg)")
    parser.add_argument("--inputs", nargs="*", default=[], help="the student's pretrained inputs, as accuracy.py's")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--soft-weight", type=float, default=0.5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--raw", type=Path, nargs="*", default=[], help="raw text for silver sentences")
    parser.add_argument("--json-field", default="text")
    parser.add_argument("--csv-column", default="text")
    parser.add_argument("--min-probability", type=float, default=0.9)
    parser.add_argument("--max-silver", type=int, default=0, help="at most this many silver sentences (0: all)")
    parser.add_argument("--silver-ratio", type=float, default=1.0)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=JSON", help="more config overrides")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = splits(args.dataset)
    base = ROOT / "configs" / (args.student_config or f"{args.dataset}.cfg")
    settings = DistillationSettings(list(args.teachers), soft_weight=args.soft_weight, temperature=args.temperature)
    members = [PipelineTeacher.from_disk(path, temperature=args.temperature) for path in args.teachers]
    teacher = members[0] if len(members) == 1 else EnsembleTeacher(members)
    rows = teacher_rows(members, list(args.teachers), data, args.output)
    silver = make_silver(teacher, data, args, args.output) if "silver" in args.variants else None
    extra = {
        **schedule_for(base, data["train"], args.epochs),
        **input_overrides(args.inputs, ROOT / "training" / "pretrain" / "full"),
        **{k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)},
    }
    for variant in args.variants:
        config = student_config(base, variant, settings, silver, args.silver_ratio, args.output / "configs")
        prepare = None if variant == "gold" else (lambda nlp: attach_teachers(nlp, settings) and None)
        results = [
            run(
                config, data, s, args.epochs, extra, args.output / variant / f"seed{s}", resumable=True, prepare=prepare
            )
            for s in args.seeds
        ]
        rows.append(seeds_row(f"student {base.name}: {variant}", results))
    print(f"Machine: {machine()}; {load_average()}\n")
    print(
        f"Dataset: {args.dataset}, students {args.epochs} epochs, seeds {args.seeds}, soft weight "
        f"{args.soft_weight}, temperature {args.temperature}, silver ratio {args.silver_ratio}\n"
    )
    print(markdown_table(COLUMNS, rows))


if __name__ == "__main__":
    main()
