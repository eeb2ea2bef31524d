"""Students beside their teachers: test F1 (3 seeds, selected on dev), CPU speed and training time.

Rows: each teacher pipeline (trained beforehand, e.g. FLAT on m3e-small by `transformer.py`, or the
family by `accuracy.py --output`), their ensemble (posterior decoding of the mean marginals), and
students of one config trained on

- `gold`: the gold data alone (the student's architecture as a single model),
- `soft`: gold plus the teachers' soft targets (`[flat_distillation]`, weight α, temperature T): their
  per-character tag marginals,
- `topk`: as `soft` with the teachers' K best paths as targets (`targets = "top_k"`, `--top-k`),
- `silver`: gold plus soft targets (marginals), with silver sentences from raw text beside the gold.

Speed is `nlp.pipe` chars/s at batch 64 on one thread (the evaluation's timing); every run keeps its
checkpoints in OUTPUT, so the same command run again goes on from where it stopped. The students of one
command share a cache of the teachers' targets, so the teachers run once over the text, not once a student
(the first student of a run pays for them in its training time); the cache is kept in OUTPUT/teacher-targets
(--target-stores), so a resumed run, or seeds run as separate commands side by side, read the targets a
first run computed rather than run the teachers again.

    python benchmarks/distillation.py weibo --teachers training/trf/weibo0/model-best \\
        --student-config weibo_dcsan.cfg --epochs 10 --seeds 0 1 2 --output training/distill/weibo \\
        --raw ../shared/corpora/smp2020-ewect_usual_eval_labeled.json.xz --json-field content
    python benchmarks/distillation.py msra --teachers training/teach/msra_trf_gpu/flat0/model-best \\
        --student-config msra_dcsan.cfg --epochs 2 --seeds 0 1 2 --variants soft --gpu-id 0 --output ...

With --gpu-id the teachers and students run on that GPU, the speeds are the GPU's and the group's name ends
in gpu.

Each row is also written as a result record of question "accuracy" (benchmarks/results.py; --results DIR:
elsewhere), one record a row, so that each carries accuracy's figures (test_f1 {mean[, sd], per_seed},
dev_f1, and for students train_s and test_chars_per_s as accuracy.seeds_figures makes them). The records of
one run share `setup.distillation`, the run's name GROUP = DATASET-STUDENT_CONFIG-Nep-sSEEDS[-TAG], and are named
accuracy-distillation-GROUP-ROW, ROW one of teacher0, teacher1, ..., ensemble, gold, soft, topk, silver. Their setup:

    distillation  GROUP: a students table gathers the records that share it
    kind          "teacher", "ensemble" or "student" (the table's order: teachers, ensemble, students)
    row           the table's model cell ("teacher: PATH", "ensemble of 2 (mean marginals)", "student X.cfg: soft")
    variant       the student's: "gold", "soft", "topk" or "silver" (null for teachers and the ensemble)
    architecture, inputs, epochs   as accuracy.py's records (the student's config; "teacher" / "ensemble")
    overrides     (students, with --set) the config overrides, key -> value
    teachers, soft_weight, temperature, silver_ratio, top_k   the distillation's settings
    gold_record   (--gold-record, without the gold variant) the accuracy record that stands for the gold row
    reference_records   (--reference) accuracy records shown above the group, e.g. FLAT on m3e-small

`distillation_records` builds them from the measured numbers.
"""

import argparse
import json
import os
import statistics
import sys
from functools import partial
from pathlib import Path
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import spacy
import torch
from spacy.language import Language
from spacy.tokens import DocBin
from thinc.api import Config

sys.path.insert(0, str(Path(__file__).parent))
from accuracy import ARCHITECTURE_NAMES, PAPER, input_overrides, run, seeds_figures
from common import ROOT, load_average, machine, markdown_table, splits
from results import record, results_option, slug

from spacy_flat.cli.evaluate import evaluate
from spacy_flat.cli.schedule import count_batches, epoch_schedule, schedule_for
from spacy_flat.distillation.settings import DistillationSettings, SilverSettings
from spacy_flat.distillation.silver import SilverReport, silver_docs
from spacy_flat.distillation.student import attach_teachers
from spacy_flat.distillation.teachers import CachedTargets, EnsembleTeacher, PipelineTeacher, ensemble_entities
from spacy_flat.pipeline.scorer import score_char_entities
from spacy_flat.vectors.sentences import SentenceFilter, held_back_texts
from spacy_flat.vectors.sources import TextFields, read_texts

VARIANTS = ("gold", "soft", "topk", "silver")
# The table's words for each variant's training data.
VARIANT_ROWS = {
    "gold": "gold",
    "soft": "gold + soft targets (marginals)",
    "topk": "gold + soft targets (top-{k} paths)",
    "silver": "gold + soft targets + silver",
}
COLUMNS = ("model", "test F1 (mean ± sd)", "dev F1", "runs", "chars/s, batch 64, 1 thread", "train s (median)")


def student_config(
    base: Path,
    variant: str,
    settings: DistillationSettings,
    silver: Optional[Path],
    ratio: float,
    out: Path,
    stores: Optional[Path] = None,
) -> Path:
    """The student's config for a variant: the base config with `[flat_distillation]` (soft, silver)
    and the gold-and-silver reader (silver). stores: the folder of the teachers' target stores, one file
    for each kind of target (the soft and silver students share the marginals); None: in memory only."""
    config = Config().from_disk(base, interpolate=False)
    if variant != "gold":
        targets = "top_k" if variant == "topk" else "marginals"
        config["flat_distillation"] = {
            "teachers": settings.teachers,
            "soft_weight": settings.soft_weight,
            "temperature": settings.temperature,
            "targets": targets,
            "top_k": settings.top_k,
        }
        if stores is not None:
            kind = f"top{settings.top_k}" if targets == "top_k" else "marginals"
            config["flat_distillation"]["target_store"] = str(stores / f"{kind}.sqlite")
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
    settings = SilverSettings(
        min_probability=args.min_probability,
        max_sentences=args.max_silver,
        max_with_entities=args.max_silver_entities,
        empty_share=args.empty_share,
    )
    docs = DocBin(store_user_data=True)
    for doc in silver_docs(teacher, texts, sentence_filter, settings, report):  # type: ignore[arg-type]
        docs.add(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    docs.to_disk(path)
    summary = report.summary(sentence_filter)
    (out / "silver.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf8")
    print(f"silver: {json.dumps({k: v for k, v in summary.items() if k != 'problems'}, ensure_ascii=False)}")
    return path


def silver_schedule(base: Path, train: Path, silver: Path, ratio: float, epochs: int) -> Dict[str, int]:
    """The schedule of a student whose epoch is the gold corpus plus `ratio` silver sentences per gold one
    (`spacy-flat.gold_and_silver.v1`): counted on the gold batches and on the share of the silver
    batches an epoch reads, so the rate decays to zero at the end of the student's own last epoch.

    The epoch's steps are rounded up to a multiple of the evaluations per epoch the config makes on
    gold alone, so it is evaluated as often: left to `epoch_schedule`, an epoch of a prime number of
    steps would be evaluated at every step.
    """
    gold_docs = len(DocBin().from_disk(train))
    silver_docs = len(DocBin().from_disk(silver))
    used = min(silver_docs, round(ratio * gold_docs))
    silver_batches = count_batches(base, silver) * used / max(1, silver_docs) if used else 0
    gold_steps = count_batches(base, train)
    eval_frequency = int(Config().from_disk(base)["training"]["eval_frequency"])
    evaluations = max(1, round(gold_steps / min(eval_frequency, gold_steps)))
    steps = -(-(gold_steps + round(silver_batches)) // evaluations) * evaluations
    return epoch_schedule(steps, epochs, steps // evaluations)


Row = Tuple[str, List[int], Dict[str, Any], Dict[str, Any]]


def distillation_records(
    dataset: str,
    student_config: str,
    epochs: int,
    seeds: Sequence[int],
    settings: Dict[str, Any],
    teachers: List[Dict[str, Any]],
    ensemble_f1: Optional[float],
    students: Dict[str, List[dict]],
    inputs: Sequence[str] = (),
    raw: bool = False,
    gold_record: Optional[str] = None,
    reference_records: Sequence[str] = (),
    tag: str = "",
    overrides: Optional[Dict[str, Any]] = None,
) -> List[Row]:
    """(id, seeds, setup, figures) of each row's record (the shape in this module's docstring).

    teachers: {"path", "test_f", "dev_f", "chars_per_s"} each; ensemble_f1: the ensemble's test F1 (None
    with one teacher); students: variant -> accuracy.run's results over the seeds; settings: teachers,
    soft_weight, temperature, silver_ratio, top_k; gold_record: an accuracy record of the student's config,
    inputs and epochs that stands for the gold row when the run has none; reference_records: accuracy
    records shown above the group (e.g. FLAT on m3e-small); tag: ends the group's name, so runs of the
    same student with other teachers or settings keep records of their own; overrides: the student config's
    --set overrides (key -> value), kept in the students' setup so the table says how they differ from the config.
    """
    stem = Path(student_config).stem
    arch = slug(stem.split("_", 1)[1]) if "_" in stem else "flat"
    group = slug(dataset, stem, f"{epochs}ep", "s" + "".join(map(str, seeds)), tag)
    # As accuracy.py's records name them: "wiki-words + own-bigrams-raw".
    label = " + ".join(inputs) + ("-raw" if raw else "") if inputs else "embedded defaults"
    common = {"distillation": group, "epochs": epochs, **settings}
    if gold_record:
        common["gold_record"] = gold_record
    if reference_records:
        common["reference_records"] = list(reference_records)
    out: List[Row] = []
    for k, t in enumerate(teachers):
        figures = {
            "test_f1": {"mean": round(t["test_f"], 2)},
            "dev_f1": {"mean": round(t["dev_f"], 2)},
            "test_chars_per_s": {"median": round(t["chars_per_s"])},
        }
        setup = {**common, "kind": "teacher", "row": f"teacher: {t['path']}", "variant": None}
        out.append((f"accuracy-distillation-{group}-teacher{k}", [], {**setup, "architecture": "teacher"}, figures))
    if ensemble_f1 is not None:
        row = f"ensemble of {len(teachers)} (mean marginals)"
        setup = {**common, "kind": "ensemble", "row": row, "variant": None, "architecture": "ensemble"}
        figures = {"test_f1": {"mean": round(ensemble_f1, 2)}}
        out.append((f"accuracy-distillation-{group}-ensemble", [], setup, figures))
    for variant, results in students.items():
        setup = {
            **common,
            "kind": "student",
            "row": f"student {Path(student_config).name}: {VARIANT_ROWS[variant].format(k=settings.get('top_k', 3))}",
            "variant": variant,
            "architecture": ARCHITECTURE_NAMES.get(arch, arch),
            "inputs": label,
        }
        if overrides:
            setup["overrides"] = dict(overrides)
        out.append((f"accuracy-distillation-{group}-{variant}", list(seeds), setup, seeds_figures(results)))
    return out


def teacher_rows(
    members: List[PipelineTeacher],
    paths: List[str],
    data: Dict[str, Path],
    out: Path,
    measured: Optional[Dict[str, Any]] = None,
    gpu_id: int = -1,
) -> List[List[str]]:
    """The teachers' and the ensemble's table rows; their figures go into `measured` ("teachers", "ensemble")."""
    measured = {} if measured is None else measured
    measured.setdefault("teachers", [])
    rows = []
    for k, path in enumerate(paths):
        scores = evaluate(path, data["test"], out / f"teacher{k}-metrics", gpu_id=gpu_id)
        dev = json.loads((Path(path) / "meta.json").read_text())["performance"].get("ents_f", 0.0)
        speed = scores["speed"]["chars_per_second"]
        measured["teachers"].append(
            {"path": path, "test_f": 100 * scores["ents_f"], "dev_f": 100 * dev, "chars_per_s": speed}
        )
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
        measured["ensemble"] = 100 * f1
        rows.append([f"ensemble of {len(members)} (mean marginals)", f"{100 * f1:.2f}", "", "1", "", ""])
    return rows


def share_teachers(nlp: Language, settings: DistillationSettings, caches: Dict[Hashable, CachedTargets]) -> None:
    """Set the teachers on a student, sharing one cache of their targets with every student of the run that
    has the same teachers and target settings: the teachers run once over the gold (and silver) text, not
    once a seed and variant. Their targets do not depend on the student, so sharing changes no figure."""
    settings_source = settings.target_source
    caches[settings_source] = attach_teachers(nlp, settings, caches.get(settings_source))


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
    parser.add_argument(
        "--raw-tables", action="store_true", help="with --inputs: word and bigram tables raw (accuracy.py's --raw)"
    )
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--soft-weight", type=float, default=0.5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=3, help="paths each teacher gives in the topk variant")
    parser.add_argument("--raw", type=Path, nargs="*", default=[], help="raw text for silver sentences")
    parser.add_argument("--json-field", default="text")
    parser.add_argument("--csv-column", default="text")
    parser.add_argument("--min-probability", type=float, default=0.9)
    parser.add_argument("--max-silver", type=int, default=0, help="at most this many silver sentences (0: all)")
    parser.add_argument(
        "--max-silver-entities", type=int, default=0, help="at most this many silver sentences with entities (0: all)"
    )
    parser.add_argument(
        "--empty-share", type=float, default=SilverSettings().empty_share, help="share of sure empty sentences kept"
    )
    parser.add_argument("--silver-ratio", type=float, default=1.0)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument(
        "--target-stores",
        default=None,
        help="a folder of the teachers' targets, kept for a resumed run and for students run in other processes "
        "(default: OUTPUT/teacher-targets; '': in memory only)",
    )
    parser.add_argument(
        "--gold-record", default=None, help="without the gold variant: the accuracy record that stands for its row"
    )
    parser.add_argument("--reference", nargs="*", default=[], help="accuracy records shown above the group")
    parser.add_argument("--notes", default="", help="said in every record, e.g. the commands that trained the teachers")
    parser.add_argument("--tag", default="", help="ends the group's name (other teachers or settings, same student)")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=JSON", help="more config overrides")
    parser.add_argument(
        "--gpu-id", type=int, default=-1, help="teachers and students on this GPU (speeds: the GPU's; names end in gpu)"
    )
    results_option(parser)
    args = parser.parse_args()
    load = round(os.getloadavg()[0], 2)
    torch.set_num_threads(1)
    if args.gpu_id >= 0:
        # Before any pipeline loads, so the teachers' weights go to the GPU too.
        spacy.require_gpu(args.gpu_id)
    data = splits(args.dataset)
    base = ROOT / "configs" / (args.student_config or f"{args.dataset}.cfg")
    settings = DistillationSettings(
        list(args.teachers), soft_weight=args.soft_weight, temperature=args.temperature, top_k=args.top_k
    )
    members = [PipelineTeacher.from_disk(path, temperature=args.temperature) for path in args.teachers]
    teacher = members[0] if len(members) == 1 else EnsembleTeacher(members)
    measured: Dict[str, Any] = {}
    students: Dict[str, List[dict]] = {}
    caches: Dict[Hashable, CachedTargets] = {}
    rows = teacher_rows(members, list(args.teachers), data, args.output, measured, args.gpu_id)
    silver = make_silver(teacher, data, args, args.output) if "silver" in args.variants else None
    overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    extra = {
        **schedule_for(base, data["train"], args.epochs),
        **input_overrides(args.inputs, ROOT / "training" / "pretrain" / "full", unit=not args.raw_tables),
        **overrides,
    }
    stores = args.output / "teacher-targets" if args.target_stores is None else args.target_stores
    store_dir = Path(stores) if stores else None
    for variant in args.variants:
        config = student_config(base, variant, settings, silver, args.silver_ratio, args.output / "configs", store_dir)
        schedule = {}
        if variant == "silver" and silver is not None:
            schedule = silver_schedule(base, data["train"], silver, args.silver_ratio, args.epochs)
        # The config's [flat_distillation] block is what the checkpoints fingerprint; the teachers attached
        # here must be the same ones, so they are read back from it.
        variant_settings = DistillationSettings.from_config(
            dict(Config().from_disk(config, interpolate=False).get("flat_distillation", {})), str(config)
        )
        prepare = None if variant == "gold" else partial(share_teachers, settings=variant_settings, caches=caches)
        results = [
            run(
                config,
                data,
                s,
                args.epochs,
                {**extra, **schedule},
                args.output / variant / f"seed{s}",
                args.gpu_id,
                resumable=True,
                prepare=prepare,
            )
            for s in args.seeds
        ]
        rows.append(seeds_row(f"student {base.name}: {VARIANT_ROWS[variant].format(k=args.top_k)}", results))
        students[variant] = results
    print(f"Machine: {machine()}; {load_average()}\n")
    print(
        f"Dataset: {args.dataset}, students {args.epochs} epochs, seeds {args.seeds}, soft weight "
        f"{args.soft_weight}, temperature {args.temperature}, silver ratio {args.silver_ratio}\n"
    )
    print(markdown_table(COLUMNS, rows))
    settings_figures = {
        "teachers": list(args.teachers),
        "soft_weight": args.soft_weight,
        "temperature": args.temperature,
        "silver_ratio": args.silver_ratio,
        "top_k": args.top_k,
    }
    made = distillation_records(
        args.dataset,
        base.name,
        args.epochs,
        args.seeds,
        settings_figures,
        measured["teachers"],
        measured.get("ensemble"),
        students,
        args.inputs,
        args.raw_tables,
        args.gold_record,
        args.reference,
        slug(args.tag, "gpu" if args.gpu_id >= 0 else ""),
        overrides,
    )
    for rid, seeds, setup, figures in made:
        title = f"{args.dataset.capitalize() if args.dataset != 'msra' else 'MSRA'}, distillation: {setup['row']}"
        record(
            rid,
            "accuracy",
            title,
            figures,
            dataset=args.dataset,
            seeds=seeds,
            setup=setup,
            load_before=load,
            gpu_id=args.gpu_id,
            notes=args.notes,
            out_dir=args.results,
        )


if __name__ == "__main__":
    main()
