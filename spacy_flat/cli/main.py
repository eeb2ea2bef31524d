"""The command line: `python -m spacy flat COMMAND …` (spaCy's CLI, through the `spacy_cli` entry point
that names `flat_cli` here) and `python -m spacy_flat COMMAND …` (`main`). The commands: convert,
schedule, train, evaluate, calibrate, model-card, annotate, pretrain-vectors, verify-assets."""

from typing import List, Optional

import typer

from . import annotate, calibrate, convert, evaluate, model_card, pretrain_vectors, project_assets, schedule, train
from .app import flat_cli

# Each module registers its commands on `flat_cli` when imported.
COMMANDS = (convert, schedule, train, evaluate, calibrate, model_card, annotate, pretrain_vectors, project_assets)
PROG = "python -m spacy_flat"


def main(argv: Optional[List[str]] = None) -> int:
    """Run one command as `python -m spacy_flat` does; a `FlatError` or `OSError` is one line on stderr.

    argv (Optional[List[str]]): The arguments; None for `sys.argv[1:]`.
    RETURNS (int): The exit status: 0, 1 for an error, 2 for a usage error.
    """
    command = typer.main.get_command(flat_cli)
    try:
        command.main(args=argv, prog_name=PROG)  # standalone: click shows usage errors, then exits
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    return 0
