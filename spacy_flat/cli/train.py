"""`train`: spacy train with checkpoints that a stopped run goes on from."""

from pathlib import Path
from typing import Annotated, Any, Dict, List

import typer
from click import ClickException
from spacy.cli._util import Arg, Opt, parse_config_overrides

from ..errors import FlatError
from .app import flat_cli


@flat_cli.command("train", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train_cli(
    ctx: typer.Context,  # its args: the config overrides
    config: Annotated[Path, Arg()],
    output: Annotated[Path, Opt("--output", help="model-last, model-best and checkpoints/")],
    gpu_id: Annotated[int, Opt("--gpu-id")] = -1,
    checkpoint_steps: Annotated[
        int, Opt("--checkpoint-steps", help="checkpoint every N steps (default: at each evaluation)")
    ] = 0,
    checkpoint_minutes: Annotated[
        float, Opt("--checkpoint-minutes", help="also every M minutes (0: never; default 30)")
    ] = 30.0,
    keep: Annotated[int, Opt("--keep", help="newest checkpoints kept (default 2)")] = 2,
) -> None:
    """spacy train with checkpoints: run the same command again to go on from the newest one

    Config overrides follow as for spacy train, e.g. --paths.train corpus/train.spacy.
    """
    from ..training.loop import CheckpointSettings, train

    settings = CheckpointSettings(steps=checkpoint_steps, minutes=checkpoint_minutes, keep=keep)
    train(config, output, overrides=config_overrides(ctx.args), use_gpu=gpu_id, settings=settings)


def config_overrides(args: List[str]) -> Dict[str, Any]:
    """RETURNS (Dict[str, Any]): spacy train's overrides (`--section.key value`), parsed as it parses them."""
    try:
        return parse_config_overrides(list(args))
    except ClickException as err:
        raise FlatError(f"config overrides: {err.format_message()}") from None
