"""Command line: `python -m spacy_flat convert INPUT OUTPUT.spacy`."""

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from .convert import SCHEMES, convert
from .errors import FlatError


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacy_flat")
    commands = parser.add_subparsers(dest="command", required=True)
    conv = commands.add_parser("convert", help="convert NER data to a spaCy DocBin")
    conv.add_argument("input", type=Path)
    conv.add_argument("output", type=Path)
    conv.add_argument("--scheme", choices=SCHEMES, default=None, help="force the tag scheme")
    conv.add_argument("--format", choices=("auto", "conll", "jsonl"), default="auto")
    conv.add_argument("--dev-last", type=int, default=0, help="write the last N sentences to --dev-output")
    conv.add_argument("--dev-output", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        convert(
            args.input,
            args.output,
            scheme=args.scheme,
            file_format=args.format,
            dev_last=args.dev_last,
            dev_output=args.dev_output,
        )
    except (FlatError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
