"""`python -m spacy_flat train | distill`: spacy train with checkpoints that a
stopped run goes on from, and the same for a student that learns from teachers."""

import argparse
from pathlib import Path
from typing import Any, Dict, List, Sequence

from ..errors import FlatError

# Where `distill` keeps the teachers' targets unless told otherwise: a resumed run reads them there.
TARGET_STORE = "teacher-targets.sqlite"


def add_commands(commands: Any) -> None:
    """Add `train` and `distill` to the sub-command parsers."""
    train = commands.add_parser(
        "train",
        help="spacy train with checkpoints: run the same command again to go on from the newest one",
        description="Config overrides follow as for spacy train, e.g. --paths.train corpus/train.spacy.",
    )
    _run_arguments(train)
    train.set_defaults(run=run_train, takes_overrides=True)
    distill = commands.add_parser(
        "distill",
        help="train a student on gold data and its teachers' soft targets (the config's [flat_distillation]), "
        "with checkpoints",
        description="Config overrides follow as for spacy train. Silver sentences from `silver` join the gold "
        "through the reader spacy-flat.gold_and_silver.v1.",
    )
    _run_arguments(distill)
    distill.add_argument(
        "--teacher",
        action="append",
        default=None,
        help="a teacher pipeline (repeat for an ensemble); replaces the config's [flat_distillation] teachers",
    )
    distill.add_argument("--soft-weight", type=float, default=None, help="α, the soft loss's share on gold docs")
    distill.add_argument("--temperature", type=float, default=None, help="divides both CRFs' potentials")
    distill.add_argument(
        "--targets",
        choices=["marginals", "top_k"],
        default=None,
        help="the soft targets: tag marginals, or each teacher's top_k best paths",
    )
    distill.add_argument("--top-k", type=int, default=None, help="best paths per teacher with --targets top_k")
    distill.add_argument("--silver", type=Path, default=None, help="silver sentences (from `silver`) beside the gold")
    distill.add_argument("--silver-ratio", type=float, default=1.0, help="silver sentences per gold one")
    distill.add_argument(
        "--target-store",
        default=None,
        help=f"an SQLite file that keeps the teachers' soft targets for a resumed run or other students "
        f"(default: the config's target_store, else OUTPUT/{TARGET_STORE}; '' keeps them in memory only)",
    )
    distill.set_defaults(run=run_distill, takes_overrides=True)


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", type=Path)
    parser.add_argument("--output", type=Path, required=True, help="model-last, model-best and checkpoints/")
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument(
        "--checkpoint-steps", type=int, default=0, help="checkpoint every N steps (default: at each evaluation)"
    )
    parser.add_argument(
        "--checkpoint-minutes", type=float, default=30.0, help="also every M minutes (0: never; default 30)"
    )
    parser.add_argument("--keep", type=int, default=2, help="newest checkpoints kept (default 2)")


def _overrides(extra: Sequence[str]) -> Dict[str, Any]:
    from click import ClickException
    from spacy.cli._util import parse_config_overrides

    try:
        return parse_config_overrides(list(extra))
    except ClickException as err:
        raise FlatError(f"config overrides: {err.format_message()}") from None


def run_train(args: argparse.Namespace, extra: Sequence[str]) -> None:
    """Train (or go on training) as `spacy train` would."""
    from ..training.loop import CheckpointSettings, train

    settings = CheckpointSettings(steps=args.checkpoint_steps, minutes=args.checkpoint_minutes, keep=args.keep)
    train(args.config, args.output, overrides=_overrides(extra), use_gpu=args.gpu_id, settings=settings)


def run_distill(args: argparse.Namespace, extra: Sequence[str]) -> None:
    """Train a student with its teachers set on it. The options complete the config's
    [flat_distillation] block (and, with --silver, its training corpus) into `OUTPUT/distill.cfg`,
    the config the run trains with, so the same command run again goes on from its checkpoints."""
    from spacy.util import load_config

    from ..distillation.settings import DistillationSettings
    from ..distillation.student import attach_teachers
    from ..training.loop import CheckpointSettings, train

    overrides = _overrides(extra)
    config_path = student_config(args)
    config = load_config(config_path, overrides=overrides, interpolate=True)
    settings = DistillationSettings.from_config(dict(config["flat_distillation"]), str(args.config))
    caches: List[Any] = []

    def prepare(nlp: Any) -> None:
        try:
            cache = attach_teachers(nlp, settings)
        except ValueError as err:
            raise FlatError(f"{args.config}: {err}") from None
        caches.append(cache)
        names = ", ".join(settings.teachers)
        print(f"ℹ Teachers: {names} (soft weight {settings.soft_weight}, temperature {settings.temperature})")
        kept = "in memory"
        if cache.store is not None:
            kept = f"kept in {cache.store.path} ({len(cache.store):,} segments there)"
        print(f"ℹ Soft targets: {settings.describe()}, computed once per segment, {kept}")

    checkpoints = CheckpointSettings(steps=args.checkpoint_steps, minutes=args.checkpoint_minutes, keep=args.keep)
    train(config_path, args.output, overrides=overrides, use_gpu=args.gpu_id, settings=checkpoints, prepare=prepare)
    for cache in caches:
        # What the teachers cost this run: a resumed run should read what an earlier one computed.
        print(
            f"ℹ Soft targets of {cache.computed + cache.loaded:,} segments: {cache.computed:,} computed by the "
            f"teachers, {cache.loaded:,} read from the store; {cache.reused:,} more uses served from memory"
        )


def student_config(args: argparse.Namespace) -> Path:
    """Write `OUTPUT/distill.cfg`: the student's config with the command's teachers, weight,
    temperature, soft targets, target store and silver corpus. RETURNS (Path): Its path."""
    from thinc.api import Config

    if not args.config.exists():
        raise FlatError(f"{args.config}: no such config")
    config = Config().from_disk(args.config, interpolate=False)
    block = dict(config.get("flat_distillation", {}))
    if args.teacher:
        block["teachers"] = list(args.teacher)
    for key in ("soft_weight", "temperature", "targets", "top_k"):
        if getattr(args, key) is not None:
            block[key] = getattr(args, key)
    if args.target_store is not None:
        block["target_store"] = args.target_store
    elif "target_store" not in block:
        block["target_store"] = str(args.output / TARGET_STORE)
    config["flat_distillation"] = block
    if args.silver is not None:
        train = config["corpora"]["train"]
        config["corpora"]["train"] = {
            "@readers": "spacy-flat.gold_and_silver.v1",
            "gold": train.get("path", "${paths.train}"),
            "silver": str(args.silver),
            "silver_ratio": args.silver_ratio,
            "max_length": train.get("max_length", 0),
        }
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / "distill.cfg"
    config.to_disk(path)
    return path
