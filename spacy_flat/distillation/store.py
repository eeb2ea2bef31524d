"""A file that keeps the teachers' soft targets across runs and processes.

A transformer teacher is the slowest part of distillation: on one CPU thread its
pass over MSRA's training text takes longer than a student's epoch. The store lets
a run resumed from its checkpoints, the next seed, or a student trained beside it
in another process read the targets the teacher already computed.

SQLite (the standard library's) rather than a folder of arrays: it takes writers
from several processes at once, finds a segment's row by its key without loading
the rest, and a run killed mid-write leaves the rows committed before intact.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Tuple, Union

import numpy
import srsly

from ..errors import FlatError
from ..types import SoftTarget, TopPaths
from .settings import DistillationSettings

# Bump when the rows' layout changes: an older store is refused, not misread.
STORE_FORMAT = 1
# Seconds a writer waits for another process's transaction before it gives up.
BUSY_TIMEOUT = 600.0


def segment_key(text: str, start: int, context: str) -> bytes:
    """RETURNS (bytes): The digest a segment's targets are kept under: its text, and
    for a teacher that reads whole docs its offset and its doc's text."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (text, str(start), context):
        digest.update(part.encode("utf8"))
        digest.update(b"\0")
    return digest.digest()


def teacher_fingerprint(path: Union[str, Path]) -> str:
    """RETURNS (str): The digest of a saved teacher's files (as checkpoints digest the
    files their config names), so the targets of a teacher trained again at the same
    path are never reused; for a package name, the name and installed version."""
    from ..training.fingerprint import path_digest

    folder = Path(path)
    if folder.is_dir():
        return path_digest(str(folder.resolve())) or ""
    from spacy.util import get_package_version

    return f"package {path} {get_package_version(str(path))}"


def store_source(settings: DistillationSettings) -> str:
    """RETURNS (str): What a store's targets depend on, as JSON: each teacher's files (not
    where they lie), the component, the temperature and the paths per teacher."""
    return json.dumps(
        {
            "teachers": [teacher_fingerprint(path) for path in settings.teachers],
            "component": settings.component,
            "temperature": float(settings.temperature),
            "top_k": settings.teacher_top_k,
        },
        sort_keys=True,
    )


class TargetStore:
    """Soft targets kept in an SQLite file, each under its segment's key.

    path (Path): The file; made, with its folder, when missing.
    source (str): What the targets depend on (`store_source`). A file made for
        another source is refused, naming both.
    """

    def __init__(self, path: Union[str, Path], source: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT)
            # WAL: readers in other processes are not blocked while one writes. NORMAL: no disk sync at
            # each batch's commit; a crash of the process loses nothing, a power cut at most the last rows.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._db:
                self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
                self._db.execute("CREATE TABLE IF NOT EXISTS targets (key BLOB PRIMARY KEY, value BLOB NOT NULL)")
                self._db.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('format', ?), ('source', ?)", (str(STORE_FORMAT), source)
                )
            meta = dict(self._db.execute("SELECT name, value FROM meta"))
        except sqlite3.DatabaseError as err:
            raise FlatError(f"{self.path}: not a store of soft targets ({err})") from None
        if meta.get("format") != str(STORE_FORMAT):
            stored = meta.get("format")
            raise FlatError(f"{self.path}: targets stored in format {stored}, this version reads {STORE_FORMAT}")
        if meta.get("source") != source:
            raise FlatError(
                f"{self.path}: holds the soft targets of other teachers or settings\n"
                f"  stored: {meta.get('source')}\n  wanted: {source}\n"
                "give another file, or delete this one to compute them again"
            )
        self.source = source

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM targets").fetchone()[0])

    def get(self, keys: Iterable[bytes]) -> Dict[bytes, SoftTarget]:
        """RETURNS: The stored targets of those keys that are in the file."""
        found: Dict[bytes, SoftTarget] = {}
        wanted = list(dict.fromkeys(keys))
        # SQLite takes at most 999 parameters in one statement in older builds.
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, value in self._db.execute(f"SELECT key, value FROM targets WHERE key IN ({marks})", chunk):
                found[bytes(key)] = _loads(value)
        return found

    def put(self, targets: Mapping[bytes, SoftTarget]) -> None:
        """Keep targets, in one transaction; a key another process stored first keeps its row."""
        rows: List[Tuple[bytes, bytes]] = [(key, _dumps(target)) for key, target in targets.items()]
        with self._db:
            self._db.executemany("INSERT OR IGNORE INTO targets VALUES (?, ?)", rows)

    def close(self) -> None:
        self._db.close()


def _dumps(target: SoftTarget) -> bytes:
    if isinstance(target, TopPaths):
        return srsly.msgpack_dumps({"paths": target.paths, "probabilities": target.probabilities})
    return srsly.msgpack_dumps({"marginals": numpy.asarray(target, dtype="float16")})


def _loads(value: bytes) -> SoftTarget:
    row = srsly.msgpack_loads(value)
    if "paths" in row:
        return TopPaths(row["paths"], row["probabilities"])
    return row["marginals"]
