"""`pretrain-vectors`: character, bigram and word tables (word2vec) from raw text (`spacy_flat.vectors`)."""

from pathlib import Path
from typing import Annotated, List, Optional

from spacy.cli._util import Arg, Opt

from ..errors import FlatError
from .app import ListOptions, flat_cli


@flat_cli.command("pretrain-vectors", cls=ListOptions)
def pretrain_vectors_cli(
    inputs: Annotated[List[Path], Arg(help="corpus files or directories (text, md, jsonl, json, csv, zip; xz/gz/bz2)")],
    output: Annotated[Path, Opt("--output", help="directory for the tables, the stages and report.json")],
    json_field: Annotated[
        str,
        Opt(
            "--json-field",
            help="dotted path of the text in JSON records; comma-separated alternatives, first found wins",
        ),
    ] = "text",
    csv_column: Annotated[
        str, Opt("--csv-column", help="the text column of CSV files; comma-separated alternatives")
    ] = "text",
    held_back: Annotated[
        Optional[List[Path]], Opt("--held-back", help="dev and test sets (DocBin or text) to leave out")
    ] = None,
    user_words: Annotated[Optional[List[Path]], Opt("--user-words", help="word lists jieba segments with")] = None,
    width: Annotated[int, Opt("--width")] = 50,
    epochs: Annotated[int, Opt("--epochs")] = 5,
    workers: Annotated[int, Opt("--workers")] = 2,
    no_progress: Annotated[bool, Opt("--no-progress")] = False,
) -> None:
    """train character, bigram and word vectors (word2vec) from raw text; needs [pretrain]"""
    from ..vectors.sources import TextFields
    from ..vectors.tables import PretrainSettings, describe_report, pretrain_vectors

    try:
        import gensim  # noqa: F401
    except ImportError:
        raise FlatError("pretrain-vectors needs gensim: pip install 'spacy-flat[pretrain]'") from None
    settings = PretrainSettings(
        width=width, epochs=epochs, workers=workers, fields=TextFields(json_field=json_field, csv_column=csv_column)
    )
    report = pretrain_vectors(
        inputs, output, settings, held_back=held_back or [], user_words=user_words or [], progress=not no_progress
    )
    print("\n".join(describe_report(report)))
