"""What makes a run the same run: its config, its data and the versions of the libraries it runs on.

A checkpoint records the run's fingerprint; resuming compares it with the new command's and refuses a
difference, naming it, except for the settings in `ALLOWED_ON_RESUME`:

- `training.max_steps`, `training.max_epochs`: extending a run ("train longer") or ending it sooner is
  what resuming is for; the steps already taken are the same either way.
- `training.patience`, `training.eval_frequency`: when to evaluate and when to stop; they change no
  weight (a changed frequency evaluates other steps from the checkpoint on).
- `training.logger`: where the log goes.
- `training.optimizer.learn_rate`: the schedule. The project's configs decay the rate to zero at
  `total_steps`, so training longer needs a later end; the resumed run follows the new schedule from
  the checkpoint's step on (it is then no longer the same as one run from the start, which is said).

The `[paths]` section and the corpora's `path` settings are left out of the comparison: the data is
compared by the sha256 of the files' content, so moving the files is allowed and changing them is not.
Other settings that name a file or a folder (word vectors, a bigram table, a lexicon) are compared the
same way: the checkpoint keeps the digest of what they name, so the same file under another path is
the same run, and another file under the same path is not.

"""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from spacy.util import load_model_from_config, resolve_dot_names
from thinc.api import Config

from ..errors import FlatError
from ..files import file_digest

ALLOWED_ON_RESUME = (
    "training.max_steps",
    "training.max_epochs",
    "training.patience",
    "training.eval_frequency",
    "training.logger",
    "training.optimizer.learn_rate",
)
# Changes that are allowed but make the resumed run differ from one uninterrupted run.
CHANGES_THE_RUN = ("training.optimizer.learn_rate",)


class ResumeRefusedError(FlatError):
    """A checkpoint belongs to a different run: another config, other data or other library versions."""


@dataclass
class Fingerprint:
    """config (Dict[str, Any]): The interpolated config, flattened to dotted keys.
    data (Dict[str, Dict[str, str]]): "train"/"dev" -> file path -> sha256.
    versions (Dict[str, str]): Library -> version.
    files (Dict[str, str]): Config key -> sha256 of the file or folder its value names.
    """

    config: Dict[str, Any]
    data: Dict[str, Dict[str, str]]
    versions: Dict[str, str] = field(default_factory=dict)
    files: Dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {"config": self.config, "data": self.data, "versions": self.versions, "files": self.files}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Fingerprint":
        # Checkpoints written before file settings were digested have no "files".
        return cls(data["config"], data["data"], data["versions"], data.get("files", {}))


def versions() -> Dict[str, str]:
    """RETURNS (Dict[str, str]): The versions a checkpoint must be resumed with."""
    import spacy
    import thinc
    import torch

    from ..about import __version__

    return {
        "spacy-flat": __version__,
        "spacy": spacy.__version__,
        "thinc": thinc.__version__,
        "torch": torch.__version__,
    }


def fingerprint(config: Config) -> Fingerprint:
    """config (Config): The run's config, overrides applied, not interpolated.
    RETURNS (Fingerprint): The run's fingerprint; reads and hashes the training and dev files.
    """
    # Filled with spaCy's defaults, as `init_nlp` fills it (building the components, not initializing them).
    interpolated = load_model_from_config(config, auto_fill=True).config.interpolate()
    training = interpolated["training"]
    corpora = {"train": training["train_corpus"], "dev": training["dev_corpus"]}
    readers = resolve_dot_names(interpolated, list(corpora.values()))
    data = {split: _hash_corpus(reader) for split, reader in zip(corpora, readers)}
    # Where the data lies is left out: its content is compared (a reader's `path`, or a pooled reader's
    # `paths`). Those keys exactly: `gold_preproc`, say, is a setting like any other.
    left_out = {f"{dot_name}.path" for dot_name in corpora.values()}
    pooled = tuple(f"{dot_name}.paths." for dot_name in corpora.values())
    flat = {
        key: value
        for key, value in _flatten(interpolated)
        if not key.startswith(("paths.", *pooled)) and key not in left_out
    }
    files = {key: digest for key, value in flat.items() if (digest := path_digest(value)) is not None}
    return Fingerprint(flat, data, versions(), files)


def compare(saved: Fingerprint, current: Fingerprint) -> Tuple[List[str], List[str]]:
    """saved (Fingerprint): The checkpoint's.
    current (Fingerprint): This command's.
    RETURNS (Tuple[List[str], List[str]]): The refused differences, and the allowed ones (both worded
        "key changed: old -> new").
    """
    refused: List[str] = []
    allowed: List[str] = []
    for name in sorted(set(saved.versions) | set(current.versions)):
        old, new = saved.versions.get(name), current.versions.get(name)
        if old != new:
            refused.append(f"{name} version changed: {old} -> {new}")
    for key in sorted(set(saved.config) | set(current.config)):
        old, new = saved.config.get(key, "(absent)"), current.config.get(key, "(absent)")
        old_digest = saved.files.get(key) or (path_digest(old) if old != new else None)
        new_digest = current.files.get(key)
        if old != new and old_digest is not None and old_digest == new_digest:
            allowed.append(f"{key} moved: {old!r} -> {new!r} (the same content)")
        elif old != new:
            change = f"{key} changed: {old!r} -> {new!r}"
            (allowed if key.startswith(ALLOWED_ON_RESUME) else refused).append(change)
        elif old_digest is not None and new_digest is not None and old_digest != new_digest:
            refused.append(f"{key}: the content of {new} changed (sha256 {_short(old_digest)} -> {_short(new_digest)})")
    for split in ("train", "dev"):
        old_files, new_files = saved.data.get(split, {}), current.data.get(split, {})
        if sorted(old_files.values()) == sorted(new_files.values()):
            continue  # the same content, wherever it lies now
        for path in sorted(set(old_files) | set(new_files)):
            old_hash, new_hash = old_files.get(path), new_files.get(path)
            if old_hash != new_hash:
                refused.append(f"corpus {split} file changed: {path} (sha256 {_short(old_hash)} -> {_short(new_hash)})")
    return refused, allowed


def check_resumable(saved: Fingerprint, current: Fingerprint, checkpoint: Path) -> List[str]:
    """Raise `ResumeRefusedError` naming every refused difference.

    RETURNS (List[str]): The allowed differences, to report.
    """
    refused, allowed = compare(saved, current)
    if refused:
        raise ResumeRefusedError(
            f"cannot resume from {checkpoint}: it belongs to a different run. "
            + "; ".join(refused)
            + ". Resume with the run's own config and data, or start a new run in another --output directory"
            " (or remove the checkpoints directory)."
        )
    return allowed


def _flatten(config: Dict[str, Any], prefix: str = "") -> Iterator[Tuple[str, Any]]:
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _hash_corpus(reader: Any) -> Dict[str, str]:
    """The sha256 of each file a corpus reads: a `spacy.Corpus`'s `path` or a pooled corpus's `paths`, each
    a file or a folder of .spacy files."""
    from spacy.training.corpus import FILE_TYPE, walk_corpus

    pooled = getattr(reader, "paths", None)
    found = list(pooled.values()) if isinstance(pooled, dict) else [getattr(reader, "path", None)]
    paths: List[Path] = [Path(path) for path in found if path is not None]
    if len(paths) != len(found):
        raise ResumeRefusedError(
            f"cannot fingerprint the corpus reader {type(reader).__name__}: resuming needs readers with a `path`"
        )
    files = sorted(file for path in paths for file in walk_corpus(path, FILE_TYPE))
    return {str(Path(file).resolve()): sha256_file(Path(file)) for file in files}


def path_digest(value: Any) -> Optional[str]:
    """The sha256 of what a config value names, if it names an existing file or folder: a value
    with a folder separator or a file suffix (so "zh" or "pytorch" never match a folder of that
    name). A folder's digest covers its files' relative paths and contents.

    RETURNS (Optional[str]): The hex digest, or None when the value names nothing on disk.
    """
    if not isinstance(value, str) or not value or ("/" not in value and not Path(value).suffix):
        return None
    path = Path(value)
    if path.is_file():
        return sha256_file(path)
    if not path.is_dir():
        return None
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(path).as_posix()}\0{sha256_file(file)}\n".encode())
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    """RETURNS (str): The hex sha256 of a file's content."""
    return file_digest(path, "sha256")


def _short(digest: Any) -> str:
    return "(none)" if digest is None else f"{digest[:12]}…"
