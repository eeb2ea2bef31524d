"""Checkpoints on disk: written atomically, loaded only when complete and verified.

A checkpoint is a folder `checkpoints/step-NNNNNNNNN` of the run's output directory. It is written
into a hidden temporary folder beside its final place; every file is flushed to disk, then
`MANIFEST.json` (the size and sha256 of every file) is written last, and the folder is renamed into
place. A folder without a manifest, or whose files do not match it, was cut short (or damaged since)
and is never loaded: `latest` goes back to the newest one that verifies. Files equal to the previous
checkpoint's (the lexicon, an unchanged `model-best`) are hard links to it, so a checkpoint costs
disk mostly for what changed.
"""

import fcntl
import json
import os
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..errors import FlatError
from .fingerprint import sha256_file

MANIFEST = "MANIFEST.json"
FORMAT = 1
PREFIX = "step-"
TEMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".old-"


class CheckpointError(FlatError):
    """A checkpoint cannot be written, verified or given back to a run."""


@dataclass
class Checkpoint:
    """A complete, verified checkpoint.

    path (Path): Its folder.
    step (int): The last step it holds.
    """

    path: Path
    step: int


class CheckpointStore:
    """The checkpoints of one run's output directory.

    path (Path): The `checkpoints` folder.
    keep (int): How many complete checkpoints to keep (the newest).
    """

    def __init__(self, path: Path, keep: int = 2) -> None:
        if keep < 1:
            raise CheckpointError(f"keep at least one checkpoint, not {keep}")
        self.path = path
        self.keep = keep

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder for one trainer: a second one on the same output stops here. The lock
        goes with the process, however it ends."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise CheckpointError(f"another trainer is writing to {self.path.parent}") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def remove_incomplete(self) -> List[Path]:
        """Delete the temporary and half-deleted folders a stopped run left (call with the lock held).

        RETURNS (List[Path]): The folders removed.
        """
        removed = [p for p in self._children() if p.name.startswith((TEMP_PREFIX, TRASH_PREFIX))]
        for path in removed:
            shutil.rmtree(path, ignore_errors=True)
        return removed

    def candidates(self) -> List[Tuple[int, Path]]:
        """RETURNS (List[Tuple[int, Path]]): Checkpoint folders by name, newest first, unverified."""
        found = []
        for path in self._children():
            if path.name.startswith(PREFIX) and path.name[len(PREFIX) :].isdigit():
                found.append((int(path.name[len(PREFIX) :]), path))
        return sorted(found, reverse=True)

    def latest(self, log: Callable[[str], None] = lambda _: None) -> Optional[Checkpoint]:
        """The newest checkpoint that is complete and matches its manifest.

        log (Callable[[str], None]): Told why each newer one was passed over.
        RETURNS (Optional[Checkpoint]): None when there is none.
        """
        for step, path in self.candidates():
            problem = verify(path)
            if problem is None:
                return Checkpoint(path, step)
            log(f"skipping checkpoint {path}: {problem}")
        return None

    def discard_newer(self, checkpoint: Optional[Checkpoint]) -> List[Path]:
        """Delete the checkpoints newer than the one a run goes on from (all, with None): they failed
        verification, and left in place they would count against `keep` (call with the lock held).

        RETURNS (List[Path]): The folders deleted.
        """
        newer = [path for step, path in self.candidates() if checkpoint is None or step > checkpoint.step]
        for path in newer:
            self._delete(path)
        return newer

    def write(self, step: int, fill: Callable[[Path], None]) -> Checkpoint:
        """Write a checkpoint atomically, then keep only the newest `keep`.

        step (int): The last step it holds (its name).
        fill (Callable[[Path], None]): Writes the checkpoint's files into the folder it is given.
        RETURNS (Checkpoint): The checkpoint written.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        temp = self.path / f"{TEMP_PREFIX}{PREFIX}{step:09d}-{uuid.uuid4().hex[:8]}"
        temp.mkdir()
        fill(temp)
        files = _describe(temp)
        previous = next((path for _, path in self.candidates() if (path / MANIFEST).exists()), None)
        if previous is not None:
            _link_unchanged(temp, previous, files)
        for relative in files:
            _fsync(temp / relative)
        for folder in sorted({(temp / r).parent for r in files} | {temp}, key=lambda p: -len(p.parts)):
            _fsync_dir(folder)
        _write_json_atomic(temp / MANIFEST, {"format": FORMAT, "step": step, "files": files})
        _fsync_dir(temp)
        final = self.path / f"{PREFIX}{step:09d}"
        if final.exists():
            # The same step again (a run resumed from it and checkpointing it once more): set the old aside.
            aside = self.path / f"{TRASH_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
            os.replace(final, aside)
            os.replace(temp, final)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(temp, final)
        _fsync_dir(self.path)
        self.prune()
        return Checkpoint(final, step)

    def prune(self) -> None:
        """Delete all but the newest `keep` checkpoints. Each goes out of its place by a rename first,
        so a deletion cut short leaves no half checkpoint under a checkpoint's name."""
        for _, path in self.candidates()[self.keep :]:
            self._delete(path)

    def _delete(self, path: Path) -> None:
        aside = self.path / f"{TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}"
        os.replace(path, aside)
        shutil.rmtree(aside, ignore_errors=True)

    def _children(self) -> List[Path]:
        return [p for p in self.path.iterdir() if p.is_dir()] if self.path.exists() else []


def verify(path: Path) -> Optional[str]:
    """Check a checkpoint folder against its manifest.

    RETURNS (Optional[str]): What is wrong, or None when every file is there with its size and sha256.
    """
    manifest_path = path / MANIFEST
    if not manifest_path.exists():
        return "no manifest (it was cut short while being written)"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf8"))
        files: Dict[str, Dict[str, Any]] = manifest["files"]
    except (ValueError, KeyError, TypeError) as err:
        return f"unreadable manifest ({err})"
    if manifest.get("format") != FORMAT:
        return f"format {manifest.get('format')}, this version reads {FORMAT}"
    for relative, expected in files.items():
        file = path / relative
        if not file.is_file():
            return f"{relative} is missing"
        if file.stat().st_size != expected["size"]:
            return f"{relative} has {file.stat().st_size} bytes, the manifest says {expected['size']}"
        if sha256_file(file) != expected["sha256"]:
            return f"{relative} does not match its sha256"
    return None


def _describe(folder: Path) -> Dict[str, Dict[str, Any]]:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {
        str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
        for p in files
        if p.name != MANIFEST
    }


def _link_unchanged(folder: Path, previous: Path, files: Dict[str, Dict[str, Any]]) -> None:
    """Replace files equal to the previous checkpoint's by hard links to them."""
    try:
        before = json.loads((previous / MANIFEST).read_text(encoding="utf8"))["files"]
    except (OSError, ValueError, KeyError):
        return
    for relative, described in files.items():
        source = previous / relative
        # The size is checked too, so a file truncated since is never linked to.
        if before.get(relative) != described or not source.is_file() or source.stat().st_size != described["size"]:
            continue
        link = folder / f"{relative}.link"
        try:
            os.link(source, link)
        except OSError:
            return  # no hard links on this file system: keep the copies
        os.replace(link, folder / relative)


def _write_json_atomic(path: Path, data: Any) -> None:
    temp = path.with_name(f"{path.name}.tmp")
    with temp.open("w", encoding="utf8") as file:
        json.dump(data, file, indent=1)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temp, path)


def _fsync(path: Path) -> None:
    with path.open("rb") as file:
        os.fsync(file.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
