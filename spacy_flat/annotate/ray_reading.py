"""Reading for `annotate --engine ray`, done by Ray Data tasks on the cluster, a
file a task, with the local engine's readers (`records.py`).

Two passes over the inputs. The first counts each file's good records and
gathers its bad-record reports; from the counts the driver knows where every
file starts in the run's record order, so the second pass can cut each file's
records into the very shards and `nlp.pipe` batches the local engine cuts,
without the driver ever holding a record. Reading is cheap beside annotating
(`benchmarks/archive/annotation-reading/`: millions of characters a second a core against
thousands), so reading twice costs little and spares the driver.

Ray Data's own `read_text` / `read_json` / `read_binary_files` are not used: they
know no line numbers, fail the whole dataset on one corrupt gzip member, and
decompress some suffixes with Arrow and not others, where our readers report a
bad file or line and go on. The files must be reachable at the same paths from
every node (a shared file system).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Set, Tuple

from ..errors import FlatError
from .records import MAX_LISTED, ReadReport, Record, RecordFormat, file_records
from .shards import chunks

# nlp.pipe batches a reading task yields at a time, so a large file streams.
YIELD_BATCHES = 4
# Ray Data merges what a task yields into blocks up to a target size, and a block
# goes to one actor: the target is set from the input's size so that each actor
# gets about this many blocks (a block is a task, and tiny ones cost their
# scheduling over and over), within these bounds.
BLOCKS_PER_ACTOR = 8
MIN_BLOCK_BYTES = 1024
MAX_BLOCK_BYTES = 8 * 1024 * 1024
# Actors per concurrent reading task (one reads and cuts ~5M characters/s, an actor annotates ~14k).
ACTORS_PER_READER = 256


def block_bytes(files: Sequence[Path], actors: int) -> int:
    """RETURNS (int): The block size that gives each actor some `BLOCKS_PER_ACTOR`
    blocks of the input (files as stored: compressed ones give smaller blocks)."""
    total = sum(path.stat().st_size for path in files)
    return max(MIN_BLOCK_BYTES, min(MAX_BLOCK_BYTES, total // max(1, actors * BLOCKS_PER_ACTOR)))


def count_files(ray: Any, files: Sequence[Path], fmt: RecordFormat) -> Tuple[List[int], ReadReport]:
    """First pass: each file's good records, and the bad ones reported as the local engine does.

    RETURNS (Tuple[List[int], ReadReport]): Good records per file, in `files` order,
        and the run's read report (problems in file order).
    """
    items = [{"index": k, "path": str(path.resolve()), "name": str(path)} for k, path in enumerate(files)]
    rows = (
        ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        .map_batches(_count, batch_size=1, fn_kwargs={"fmt": asdict(fmt)})
        .take_all()
    )
    rows.sort(key=lambda row: int(row["index"]))
    report = ReadReport()
    for row in rows:
        report.read += int(row["read"])
        report.skipped.update(json.loads(row["skipped"]))
        report.problems.extend(json.loads(row["problems"])[: MAX_LISTED - len(report.problems)])
    return [int(row["good"]) for row in rows], report


def batch_rows(
    ray: Any,
    files: Sequence[Path],
    good: List[int],
    fmt: RecordFormat,
    *,
    shard_size: int,
    batch_size: int,
    pending: Set[int],
    actors: int,
) -> Any:
    """Second pass: a Dataset of rows (`shard`, `key`, `chunk`: one `nlp.pipe` batch
    of records as JSON) for the records of the `pending` shards, in record order.

    actors (int): The actors to feed (a reading task keeps up with hundreds).
    """
    items = []
    start = 0
    for k, (path, n) in enumerate(zip(files, good)):
        shards = range(start // shard_size, (start + n - 1) // shard_size + 1) if n else range(0)
        if any(s in pending for s in shards):
            items.append({"index": k, "path": str(path.resolve()), "name": str(path), "start": start, "good": n})
        start += n
    kwargs = {"fmt": asdict(fmt), "shard_size": shard_size, "batch_size": batch_size, "pending": sorted(pending)}
    dataset = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
    # No CPU reserved: reading is a sliver of the work, and tasks that asked for a CPU could
    # never run beside actors that hold them all. Asking for other resources than the actors
    # also keeps Ray Data from fusing reading into the actors, where one file's batches
    # would all go to one actor.
    # One reading task at a time: it keeps up with some 350 actors, and in order (preserve_order)
    # a second task's whole output would wait in the object store for the first to finish.
    readers = ray.data.TaskPoolStrategy(size=max(1, math.ceil(actors / ACTORS_PER_READER)))
    return dataset.map_batches(_file_batches, batch_size=1, fn_kwargs=kwargs, num_cpus=0, compute=readers)


def _count(batch: Dict[str, Any], fmt: Dict[str, Any]) -> Dict[str, List[Any]]:
    out: Dict[str, List[Any]] = {"index": [], "good": [], "read": [], "skipped": [], "problems": []}
    for index, path, name in zip(batch["index"], batch["path"], batch["name"]):
        _require_file(Path(str(path)), str(name))
        report = ReadReport()
        good = sum(1 for _ in file_records(Path(str(path)), RecordFormat(**fmt), report, name=str(name)))
        out["index"].append(int(index))
        out["good"].append(good)
        out["read"].append(report.read)
        out["skipped"].append(json.dumps(dict(report.skipped), ensure_ascii=False))
        out["problems"].append(json.dumps(report.problems, ensure_ascii=False))
    return out


def _file_batches(
    batch: Dict[str, Any], fmt: Dict[str, Any], shard_size: int, batch_size: int, pending: List[int]
) -> Iterator[Dict[str, List[Any]]]:
    """One file's records of the pending shards as batch rows, a few batches a
    block as they are read (a large file never sits whole in a worker's memory)."""
    wanted, last = set(pending), max(pending)
    for index, path, name, start, good in zip(
        batch["index"], batch["path"], batch["name"], batch["start"], batch["good"]
    ):
        _require_file(Path(str(path)), str(name))
        read = file_records(Path(str(path)), RecordFormat(**fmt), ReadReport(), name=str(name))
        records = enumerate(read, start=int(start))
        rows: Dict[str, List[Any]] = {"shard": [], "key": [], "chunk": []}
        end = int(start)
        for shard, part in _by_shard(records, shard_size):
            end += len(part)
            if shard > last:  # past the last pending shard: the rest is not wanted
                end = int(start) + int(good)
                break
            if shard not in wanted:
                continue
            # Cut from this file's first record in the shard, as the local engine cuts it.
            for k, records_of_batch in enumerate(chunks(part, batch_size)):
                rows["shard"].append(shard)
                rows["key"].append(f"{shard}.{int(index)}.{k}")
                rows["chunk"].append(_chunk(records_of_batch))
                if len(rows["shard"]) == YIELD_BATCHES:
                    yield rows
                    rows = {"shard": [], "key": [], "chunk": []}
        if rows["shard"]:
            yield rows
        if end != int(start) + int(good):
            raise FlatError(
                f"{name} changed between the two reading passes: {good} good records, then {end - int(start)}"
            )


def _require_file(path: Path, name: str) -> None:
    """A file a worker cannot see fails the run, naming the node: on a cluster the
    inputs must be at the same paths on every node (a shared file system)."""
    if not path.is_file():
        import socket

        raise FlatError(f"{name}: no such file at {path} on the Ray node {socket.gethostname()}")


def _by_shard(records: Iterator[Tuple[int, Record]], shard_size: int) -> Iterator[Tuple[int, List[Record]]]:
    current = -1
    part: List[Record] = []
    for position, record in records:
        shard = position // shard_size
        if shard != current and part:
            yield current, part
            part = []
        current = shard
        part.append(record)
    if part:
        yield current, part


def _chunk(records: List[Record]) -> str:
    return json.dumps([[r.id, r.text, r.origin, r.fields] for r in records], ensure_ascii=False, default=str)
