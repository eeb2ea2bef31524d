"""The command group `flat`, added to spaCy's CLI: `python -m spacy flat …` (loaded through the
`spacy_cli` entry point) and `python -m spacy_flat …` run the same commands. Each command is
defined beside the code it runs; `cli/main.py` imports them all."""

import sys
from typing import Any, List, Optional

import typer
from spacy.cli._util import app
from typer.core import TyperCommand, TyperGroup

from ..errors import FlatError

HELP = """spacy-flat: FLAT Chinese NER. Convert corpora, count schedules, train with checkpoints,
evaluate, calibrate, annotate corpora and pretrain vectors."""


class FlatGroup(TyperGroup):
    """Lists its commands by name; prints a `FlatError` or `OSError` of any command as one line on
    stderr and exits 1."""

    def list_commands(self, ctx: Any) -> List[str]:
        return sorted(super().list_commands(ctx))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (FlatError, OSError) as err:
            print(f"error: {err}", file=sys.stderr)
            raise typer.Exit(1) from None


class ListOptions(TyperCommand):
    """A command whose list options take every value after them, as argparse's `nargs="*"` did:
    `--held-back dev.spacy test.spacy` reads as `--held-back dev.spacy --held-back test.spacy`."""

    def parse_args(self, ctx: Any, args: List[str]) -> List[str]:
        lists = {name for param in self.params if getattr(param, "multiple", False) for name in param.opts}
        spread: List[str] = []
        option: Optional[str] = None
        for i, arg in enumerate(args):
            if arg == "--":
                spread += args[i:]
                break
            if arg.startswith("-"):
                option = arg if arg in lists else None
                if option is None:
                    spread.append(arg)
            elif option is not None:
                spread += [option, arg]
            else:
                spread.append(arg)
        return super().parse_args(ctx, spread)


flat_cli = typer.Typer(
    name="flat", help=HELP, no_args_is_help=True, cls=FlatGroup, rich_markup_mode=None, add_completion=False
)
app.add_typer(flat_cli)
