"""Command line: `python -m spacy_flat convert | evaluate | calibrate | annotate | schedule | verify-assets |
pretrain-vectors | train | silver`."""

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Union

from ..errors import FlatError
from .convert import SCHEMES, convert, parse_renames
from .project_assets import verify_assets
from .silver import add_commands as add_distillation_commands
from .train import add_commands as add_training_commands


def build_parser() -> argparse.ArgumentParser:
    """RETURNS (argparse.ArgumentParser): The parser of the sub-commands."""
    parser = argparse.ArgumentParser(prog="python -m spacy_flat")
    commands = parser.add_subparsers(dest="command", required=True)
    conv = commands.add_parser("convert", help="convert NER data (BMES/BIO/BIOES, Weibo, JSON lines) to a DocBin")
    conv.add_argument("input", type=Path)
    conv.add_argument("output", type=Path)
    conv.add_argument("--scheme", choices=SCHEMES, default=None, help="force the tag scheme")
    conv.add_argument("--format", choices=("auto", "conll", "jsonl"), default="auto")
    conv.add_argument("--dev-last", type=int, default=0, help="write the last N sentences to --dev-output")
    conv.add_argument("--dev-output", type=Path, default=None)
    conv.add_argument(
        "--rename-labels", default="", metavar="OLD=NEW,...", help="rename entity labels, e.g. NR=PER,NS=LOC,NT=ORG"
    )
    evaluate = commands.add_parser("evaluate", help="score a pipeline: JSON, Markdown and an HTML sample page")
    evaluate.add_argument("model")
    evaluate.add_argument("data", type=Path)
    evaluate.add_argument("output", type=Path)
    evaluate.add_argument("--gpu-id", type=int, default=-1)
    evaluate.add_argument("--samples", type=int, default=30)
    evaluate.add_argument(
        "--no-boundary-rules", action="store_true", help="decode without the entity-boundary rules learned in training"
    )
    schedule = commands.add_parser(
        "schedule", help="count a config's batches on your training data and set its warm-up and decay in epochs"
    )
    schedule.add_argument("config", type=Path)
    schedule.add_argument("train", type=Path, help="the training DocBin")
    schedule.add_argument("--epochs", type=int, default=0, help="epochs in the run (default: the config's max_epochs)")
    schedule.add_argument("--output", type=Path, default=None, help="write the config with the schedule set here")
    verify = commands.add_parser("verify-assets", help="check a project's assets against their md5 in project.yml")
    verify.add_argument("project", type=Path)
    verify.add_argument("prefix", help="check the assets whose dest starts with this, e.g. assets/resume/")
    calibrate = commands.add_parser(
        "calibrate", help="fit the temperature of the entity probabilities on dev and save it with the pipeline"
    )
    calibrate.add_argument("model")
    calibrate.add_argument("dev", type=Path)
    calibrate.add_argument("--output", type=Path, default=None, help="write the calibrated pipeline here")
    calibrate.add_argument("--test", type=Path, default=None, help="also report calibration on this DocBin")
    annotate = commands.add_parser(
        "annotate", help="run a pipeline over a corpus into resumable JSON-lines or Parquet shards of entities"
    )
    annotate.add_argument("model", help="pipeline path or package name")
    annotate.add_argument(
        "inputs", nargs="+", help="files, directories or globs: .txt, .jsonl, .csv (gz/xz/bz2), .parquet"
    )
    annotate.add_argument("--output", type=Path, required=True, help="directory for the shards and summary.json")
    annotate.add_argument("--text-field", default="text", help="JSON field or CSV column of the text")
    annotate.add_argument("--id-field", default=None, help="JSON field or CSV column of the id (default: file:line)")
    annotate.add_argument("--max-chars", type=int, default=1_000_000, help="skip (and report) longer texts")
    annotate.add_argument("--batch-size", type=int, default=64)
    annotate.add_argument("--n-process", type=int, default=1)
    annotate.add_argument("--shard-size", type=int, default=10_000)
    annotate.add_argument("--keep-text", action="store_true", help="write each document's text too")
    annotate.add_argument(
        "--output-format", choices=["jsonl", "parquet"], default="jsonl", help="shards' format (parquet: pyarrow)"
    )
    annotate.add_argument("--gpu-id", type=int, default=-1)
    annotate.add_argument("--no-progress", action="store_true")
    annotate.add_argument(
        "--engine", choices=["local", "ray"], default="local", help="ray: Ray Data actors (extra [ray])"
    )
    annotate.add_argument("--actors", type=int, default=2, help="--engine ray: actors, each loading the pipeline once")
    annotate.add_argument("--address", default=None, help="--engine ray: a Ray cluster to join (default: a local Ray)")
    annotate.add_argument(
        "--gpus-per-actor",
        default=None,
        help="--engine ray with --gpu-id: GPUs per actor (a fraction shares one); default: the cluster's GPUs shared",
    )
    pretrain = commands.add_parser(
        "pretrain-vectors", help="train character, bigram and word vectors (word2vec) from raw text; needs [pretrain]"
    )
    pretrain.add_argument(
        "inputs", type=Path, nargs="+", help="corpus files or directories (text, md, jsonl, json, csv, zip; xz/gz/bz2)"
    )
    pretrain.add_argument(
        "--output", type=Path, required=True, help="directory for the tables, the stages and report.json"
    )
    pretrain.add_argument(
        "--json-field",
        default="text",
        help="dotted path of the text in JSON records; comma-separated alternatives, first found wins",
    )
    pretrain.add_argument(
        "--csv-column", default="text", help="the text column of CSV files; comma-separated alternatives"
    )
    pretrain.add_argument(
        "--held-back", type=Path, nargs="*", default=[], help="dev and test sets (DocBin or text) to leave out"
    )
    pretrain.add_argument("--user-words", type=Path, nargs="*", default=[], help="word lists jieba segments with")
    pretrain.add_argument("--width", type=int, default=50)
    pretrain.add_argument("--epochs", type=int, default=5)
    pretrain.add_argument("--workers", type=int, default=2)
    pretrain.add_argument("--no-progress", action="store_true")
    add_training_commands(commands)
    add_distillation_commands(commands)
    return parser


def _pretrain(args: argparse.Namespace) -> None:
    from ..vectors.sources import TextFields
    from ..vectors.tables import PretrainSettings, describe_report, pretrain_vectors

    try:
        import gensim  # noqa: F401
    except ImportError:
        raise FlatError("pretrain-vectors needs gensim: pip install 'spacy-flat[pretrain]'") from None
    settings = PretrainSettings(
        width=args.width,
        epochs=args.epochs,
        workers=args.workers,
        fields=TextFields(json_field=args.json_field, csv_column=args.csv_column),
    )
    report = pretrain_vectors(
        args.inputs,
        args.output,
        settings,
        held_back=args.held_back,
        user_words=args.user_words,
        progress=not args.no_progress,
    )
    print("\n".join(describe_report(report)))


def _annotate(args: argparse.Namespace) -> None:
    import spacy

    from ..annotate.local import AnnotateSettings, annotate
    from ..annotate.records import RecordFormat

    if args.gpu_id >= 0 and args.engine == "local":
        spacy.require_gpu(args.gpu_id)
    fmt = RecordFormat(text_field=args.text_field, id_field=args.id_field, max_chars=args.max_chars)
    settings = AnnotateSettings(
        batch_size=args.batch_size,
        n_process=args.n_process,
        shard_size=args.shard_size,
        keep_text=args.keep_text,
        progress=not args.no_progress,
        output_format=args.output_format,
    )
    if args.engine == "ray":
        from ..annotate.ray_engine import annotate_with_ray

        gpus: Union[float, str] = 0.0
        if args.gpus_per_actor is not None and args.gpu_id < 0:
            raise FlatError("--gpus-per-actor needs --gpu-id (GPU actors)")
        if args.gpu_id >= 0:
            gpus = _gpus_per_actor(args.gpus_per_actor)
        summary = annotate_with_ray(
            args.model, args.inputs, args.output, fmt, settings, actors=args.actors, address=args.address, num_gpus=gpus
        )
    else:
        summary = annotate(args.model, args.inputs, args.output, fmt, settings)
    print(
        f"read {summary['read']:,} documents, annotated {summary['annotated']:,} "
        f"({summary['shards_written']} shards written, {summary['shards_reused']} complete from before), "
        f"skipped {summary['skipped']:,}: "
        + (", ".join(f"{n:,} {why}" for why, n in summary["skipped_by_reason"].items()) or "none")
        + f"; {summary['characters_per_second']:,.0f} characters/s"
    )
    for problem in summary["problems"][:20]:
        print(f"  {problem}")


def _gpus_per_actor(value: Optional[str]) -> Union[float, str]:
    if value in (None, "auto"):
        return "auto"
    try:
        gpus = float(str(value))
    except ValueError:
        raise FlatError(f"--gpus-per-actor takes a number or auto, got {value!r}") from None
    if gpus <= 0 or (gpus > 1 and not gpus.is_integer()):
        raise FlatError(f"--gpus-per-actor: a fraction of one GPU (0 to 1) or a whole number, got {value}")
    return gpus


def _schedule(config: Path, train: Path, epochs: int, output: Optional[Path]) -> None:
    from spacy.util import load_config

    from .schedule import EVAL, MAX_STEPS, PER_EPOCH, TOTAL, WARMUP, apply_overrides, schedule_for

    if not config.exists():
        raise FlatError(f"{config}: no such config")
    cfg = load_config(config)
    epochs = epochs or int(cfg["training"]["max_epochs"])
    overrides = schedule_for(cfg, train, epochs)
    print(
        f"{overrides[MAX_STEPS] // epochs} batches per epoch of {train} with the batcher of {config}; {epochs} epochs"
    )
    if PER_EPOCH in overrides:
        print(
            f"the rate decays after every {overrides[PER_EPOCH]} steps, evaluate every {overrides[EVAL]}; "
            f"the run stops at step {overrides[MAX_STEPS]}, after evaluating it"
        )
    else:
        print(
            f"warm-up {overrides[WARMUP]} steps, rate zero at step {overrides[TOTAL]}, evaluate every "
            f"{overrides[EVAL]}; the run stops at that step, after evaluating it"
        )
    if output is None:
        print(" ".join(f"--{key} {value}" for key, value in overrides.items()))
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        apply_overrides(cfg, overrides).to_disk(output)
        print(f"wrote {output}")


def main(argv: Optional[List[str]] = None) -> int:
    """Run one sub-command, printing a `FlatError` or `OSError` as one line on stderr.

    argv (Optional[List[str]]): The arguments; None for `sys.argv[1:]`.
    RETURNS (int): The exit status, 0 or 1.
    """
    parser = build_parser()
    # `train` and `distill` take spacy train's config overrides (--section.key value) after their own options.
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_overrides", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if getattr(args, "run", None) is not None:
            args.run(args, extra)
        elif args.command == "convert":
            convert(
                args.input,
                args.output,
                scheme=args.scheme,
                file_format=args.format,
                dev_last=args.dev_last,
                dev_output=args.dev_output,
                rename=parse_renames(args.rename_labels),
            )
        elif args.command == "schedule":
            _schedule(args.config, args.train, args.epochs, args.output)
        elif args.command == "verify-assets":
            for path in verify_assets(args.project, args.prefix):
                print(f"md5 ok: {path}")
        elif args.command == "pretrain-vectors":
            _pretrain(args)
        elif args.command == "annotate":
            _annotate(args)
        elif args.command == "calibrate":
            from .calibrate import calibrate

            temperature, report = calibrate(args.model, args.dev, args.output, args.test)
            print(f"temperature {temperature:.3f}")
            for split in ("dev", "test"):
                if split in report:
                    ece = report[split]["before"]["ece"], report[split]["after"]["ece"]
                    print(f"{split}: expected calibration error {ece[0]:.4f} before, {ece[1]:.4f} after")
        else:
            from .evaluate import evaluate  # imports the pipeline machinery only when needed

            scores = evaluate(
                args.model,
                args.data,
                args.output,
                n_samples=args.samples,
                gpu_id=args.gpu_id,
                boundary_rules=not args.no_boundary_rules,
            )
            print((args.output / "scores.md").read_text(encoding="utf8"))
            if scores["ents_f"] is None:
                print("error: the data holds no entities to score", file=sys.stderr)
                return 1
    except (FlatError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
