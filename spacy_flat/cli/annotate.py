"""`annotate`: a pipeline over a corpus, into resumable shards of entities (`spacy_flat.annotate`)."""

from enum import Enum
from pathlib import Path
from typing import Annotated, List, Optional, Union

from spacy.cli._util import Arg, Opt

from ..errors import FlatError
from .app import flat_cli


class OutputFormat(str, Enum):
    jsonl = "jsonl"
    parquet = "parquet"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


@flat_cli.command("annotate")
def annotate_cli(
    model: Annotated[str, Arg(help="pipeline path or package name")],
    inputs: Annotated[List[str], Arg(help="files, directories or globs: .txt, .jsonl, .csv (gz/xz/bz2), .parquet")],
    output: Annotated[Path, Opt("--output", help="directory for the shards and summary.json")],
    text_field: Annotated[str, Opt("--text-field", help="JSON field or CSV column of the text")] = "text",
    id_field: Annotated[
        Optional[str], Opt("--id-field", help="JSON field or CSV column of the id (default: file:line)")
    ] = None,
    max_chars: Annotated[int, Opt("--max-chars", help="skip (and report) longer texts")] = 1_000_000,
    batch_size: Annotated[int, Opt("--batch-size")] = 64,
    n_process: Annotated[int, Opt("--n-process")] = 1,
    shard_size: Annotated[int, Opt("--shard-size")] = 10_000,
    keep_text: Annotated[bool, Opt("--keep-text", help="write each document's text too")] = False,
    output_format: Annotated[
        OutputFormat, Opt("--output-format", help="shards' format (parquet: pyarrow)")
    ] = OutputFormat.jsonl,
    gpu_id: Annotated[int, Opt("--gpu-id")] = -1,
    no_progress: Annotated[bool, Opt("--no-progress")] = False,
    engine: Annotated[Engine, Opt("--engine", help="ray: Ray Data actors (extra [ray])")] = Engine.local,
    actors: Annotated[int, Opt("--actors", help="--engine ray: actors, each loading the pipeline once")] = 2,
    address: Annotated[
        Optional[str], Opt("--address", help="--engine ray: a Ray cluster to join (default: a local Ray)")
    ] = None,
    gpus_per_actor: Annotated[
        Optional[str],
        Opt(
            "--gpus-per-actor",
            help="--engine ray with --gpu-id: GPUs per actor (a fraction shares one); "
            "default: the cluster's GPUs shared",
        ),
    ] = None,
) -> None:
    """run a pipeline over a corpus into resumable JSON-lines or Parquet shards of entities"""
    import spacy

    from ..annotate.local import AnnotateSettings, annotate
    from ..annotate.records import RecordFormat

    if gpu_id >= 0 and engine == Engine.local:
        spacy.require_gpu(gpu_id)
    fmt = RecordFormat(text_field=text_field, id_field=id_field, max_chars=max_chars)
    settings = AnnotateSettings(
        batch_size=batch_size,
        n_process=n_process,
        shard_size=shard_size,
        keep_text=keep_text,
        progress=not no_progress,
        output_format=output_format.value,
    )
    if engine == Engine.ray:
        from ..annotate.ray_engine import annotate_with_ray

        gpus: Union[float, str] = 0.0
        if gpus_per_actor is not None and gpu_id < 0:
            raise FlatError("--gpus-per-actor needs --gpu-id (GPU actors)")
        if gpu_id >= 0:
            gpus = _gpus_per_actor(gpus_per_actor)
        summary = annotate_with_ray(model, inputs, output, fmt, settings, actors=actors, address=address, num_gpus=gpus)
    else:
        summary = annotate(model, inputs, output, fmt, settings)
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
