"""`annotate --engine ray`: the same run as `local.py` on Ray Data, so the work
spreads over the actors of a local Ray or of a cluster (`--address`).

Records are read by Ray Data tasks on the cluster, a file a task, with the same
readers as the local engine (ids, bad-record reports and counts are the local
engine's), and cut into the shards and `nlp.pipe` batches the local engine cuts
(`ray_reading.py`); `map_batches` over an actor pool, in which each actor loads
the pipeline once (`ray_actor.py`), annotates one batch a row.
The driver writes the shards in input order (Ray Data keeps the order when
asked), so the two engines' outputs are equal line for line. A killed actor is
restarted and its batch retried; a document that kills its worker again and
again is skipped and reported (`ray_actor.AttemptLedger`); a stopped run
resumes shard by shard as the local one does.

Ray is an optional extra: `pip install spacy-flat[ray]`.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import FlatError
from .local import AnnotateSettings, _bar
from .ray_actor import Annotator, AttemptLedger
from .ray_reading import batch_rows, block_bytes, count_files
from .records import RecordFormat, input_files
from .shards import check_manifest, shard_path, write_shard, write_summary

if TYPE_CHECKING:
    import ray.data


def require_ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the extra
        raise FlatError("--engine ray needs Ray: pip install spacy-flat[ray]") from None
    return ray


def annotate_dataset(
    dataset: ray.data.Dataset,
    pipeline: str,
    *,
    batch_size: int = 64,
    actors: int = 2,
    num_gpus: float = 0.0,
    keep_text: bool = False,
    chunked: bool = False,
) -> ray.data.Dataset:
    """Annotate a Ray `Dataset` of rows with `id`, `text`, `fields` (a JSON object
    of the other fields) and `shard` (any int), for users who already have one.

    pipeline (str): A pipeline path or package name each actor loads.
    actors (int): Size of the actor pool.
    num_gpus (float): GPUs per actor (0: CPU actors; fractions share a GPU).
    chunked (bool): Rows are whole batches (`shard`, `key`, `chunk`), as `annotate_with_ray` makes them.
    RETURNS (ray.data.Dataset): A row per input row with `shard`, `line` (the
        output record as JSON, or "" if skipped) and `skipped` (why, or ""); chunked:
        `lines` and `skipped` as JSON lists, and `chars`. In the input's order when
        the context preserves order.
    """
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # Outlives the workers: which batch a worker died in, and which document it held. On the
    # driver's node, whose loss ends the run anyway.
    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    ledger = ray.remote(num_cpus=0, scheduling_strategy=here)(AttemptLedger).remote()
    return dataset.map_batches(
        Annotator,
        fn_constructor_kwargs={
            "pipeline": pipeline,
            "batch_size": batch_size,
            "keep_text": keep_text,
            "ledger": ledger,
            "gpu": num_gpus > 0,
            "chunked": chunked,
        },
        batch_size=1 if chunked else batch_size,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_gpus=num_gpus,
    )


def annotate_with_ray(
    pipeline: str,
    inputs: Sequence[str],
    output: Path,
    fmt: Optional[RecordFormat] = None,
    settings: Optional[AnnotateSettings] = None,
    *,
    actors: int = 2,
    address: Optional[str] = None,
    num_gpus: Union[float, str] = 0.0,
) -> Dict[str, Any]:
    """`local.annotate` on Ray: the same shards, summary and resumption.

    address (Optional[str]): A Ray cluster to join; None starts a local Ray for the run.
    num_gpus (Union[float, str]): GPUs per actor: 0 for CPU actors, a number, or
        "auto": the cluster's GPUs shared among the actors (a fraction each when
        there are fewer GPUs than actors, at most one).
    RETURNS (Dict[str, Any]): The summary, also written to `output/summary.json`.
    """
    ray = require_ray()
    fmt = fmt or RecordFormat()
    settings = settings or AnnotateSettings()
    files = input_files(inputs)
    output.mkdir(parents=True, exist_ok=True)
    check_manifest(output, files, fmt, settings.shape(), str(pipeline))
    counts = {"annotated": 0, "characters": 0, "shards_written": 0, "shards_reused": 0}
    start = time.perf_counter()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    before = (context.execution_options.preserve_order, context.enable_progress_bars, context.target_max_block_size)
    try:
        gpus = gpus_per_actor(ray, num_gpus, actors)
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False
        context.target_max_block_size = block_bytes(files, actors)
        # Read by Ray Data tasks, a file each: first the counts, then the pending shards' batches.
        good, report = count_files(ray, files, fmt)
        total, size = sum(good), settings.shard_size
        sizes = {s: min(size, total - s * size) for s in range(math.ceil(total / size))}
        for index in list(sizes):
            if shard_path(output, index, settings.output_format).exists():
                counts["shards_reused"] += 1
                del sizes[index]
        bar = _bar(settings.progress)
        if sizes:
            pending = set(sizes)
            rows = batch_rows(
                ray, files, good, fmt, shard_size=size, batch_size=settings.batch_size, pending=pending, actors=actors
            )
            done = annotate_dataset(
                rows,
                str(pipeline),
                batch_size=settings.batch_size,
                actors=actors,
                num_gpus=gpus,
                keep_text=settings.keep_text,
                chunked=True,
            )
            for index, lines, skipped, chars in _shards(done.iter_rows(), sizes):
                for origin, reason, detail in skipped:
                    report.skip(origin, reason, detail)
                write_shard(output, index, lines, settings.output_format)
                counts["annotated"] += len(lines)
                counts["characters"] += chars
                counts["shards_written"] += 1
                bar.update(sizes[index])
                bar.set_postfix_str(f"{counts['characters'] / max(1e-9, time.perf_counter() - start):,.0f} chars/s")
        bar.close()
    finally:
        # The Data context outlives Ray's shutdown (a process-wide default): leave it as it was.
        preserve, bars, target = before
        context.execution_options.preserve_order = preserve
        context.enable_progress_bars = bars
        context.target_max_block_size = target
        if started_here:
            ray.shutdown()
    seconds = time.perf_counter() - start
    return write_summary(output, report, counts, seconds, engine="ray", actors=actors, gpus_per_actor=gpus)


def gpus_per_actor(ray: Any, asked: Union[float, str], actors: int) -> float:
    """RETURNS (float): GPUs to reserve per actor; "auto" shares the cluster's GPUs:
    1/k of one GPU each, with k the fewest actors a GPU must hold (a fractional
    request has to fit on one GPU, so 3 actors on 2 GPUs take half a GPU each)."""
    if asked == "auto":
        total = int(ray.cluster_resources().get("GPU", 0.0))
        if total <= 0:
            raise FlatError("a GPU was asked for, but the Ray cluster has none")
        return math.floor(10_000 / math.ceil(actors / total)) / 10_000
    return float(asked)


def _shards(rows: Iterable[Dict[str, Any]], sizes: Dict[int, int]) -> Iterator[Tuple[int, List[str], List[Any], int]]:
    """Group the ordered output rows back into shards; each shard is yielded once
    all its records are there (annotated or skipped). A row count that does not
    match is an error, never a silently short shard."""
    expected = iter(sizes.items())
    index: Optional[int]
    index, size = next(expected, (None, 0))
    lines: List[str] = []
    skipped: List[Any] = []
    chars = 0
    for row in rows:
        if row["shard"] != index:
            raise FlatError(f"Ray returned a row of shard {row['shard']} while shard {index} was incomplete")
        lines.extend(json.loads(row["lines"]))
        skipped.extend(json.loads(row["skipped"]))
        chars += int(row["chars"])
        if index is not None and len(lines) + len(skipped) == size:
            yield index, lines, skipped, chars
            index, size = next(expected, (None, 0))
            lines, skipped, chars = [], [], 0
    if index is not None:
        raise FlatError(f"Ray returned {len(lines) + len(skipped)} of shard {index}'s {size} records")
