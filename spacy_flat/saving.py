"""Saving and loading `flat_ner`: its settings, its resources (lexicon and
character rows) and its model weights, in spaCy's bytes and disk layouts."""

from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional

import srsly
from spacy.util import from_bytes, from_disk, to_bytes, to_disk
from thinc.api import Model

from .errors import PipelineFileError
from .resources import PARTS, FlatResources, Part


class SavedWithResources:
    """What `FlatNER` saves and loads; the component provides the attributes below."""

    name: str
    cfg: Dict[str, Any]
    model: Model
    resources: Optional[FlatResources]

    def _require_resources(self) -> FlatResources:
        raise NotImplementedError

    def _configure(self) -> None:
        raise NotImplementedError

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        serializers: Dict[str, Callable[[], Any]] = {
            "cfg": lambda: srsly.json_dumps(self.cfg),
            **self._require_resources().part_writers(),
            "model": self.model.to_bytes,
        }
        return to_bytes(serializers, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "SavedWithResources":
        parts: Dict[str, Part] = {}
        deserializers: Dict[str, Callable[[bytes], Any]] = {
            "cfg": lambda b: self._load_cfg(srsly.json_loads(b)),
            **{name: partial(_read_into, parts, name) for name in PARTS},
            "model": lambda b: self._load_model(parts, lambda: self.model.from_bytes(b)),
        }
        from_bytes(bytes_data, deserializers, exclude)
        return self

    def to_disk(self, path: Path, *, exclude: Iterable[str] = tuple()) -> None:
        writers = self._require_resources().part_writers()
        serializers: Dict[str, Callable[[Path], Any]] = {
            "cfg.json": lambda p: srsly.write_json(p, self.cfg),
            **{f"{name}.msgpack": partial(_write_file, write) for name, write in writers.items()},
            "model": lambda p: self.model.to_disk(p),
        }
        to_disk(path, serializers, exclude)

    def from_disk(self, path: Path, *, exclude: Iterable[str] = tuple()) -> "SavedWithResources":
        def read(name: str) -> Path:
            file_path = Path(path) / name
            if not file_path.exists():
                raise PipelineFileError(f"The saved '{self.name}' component lacks {file_path}")
            return file_path

        parts: Dict[str, Part] = {}
        deserializers: Dict[str, Callable[[Path], Any]] = {
            "cfg.json": lambda p: self._load_cfg(srsly.read_json(read("cfg.json"))),
            **{
                f"{name}.msgpack": partial(
                    lambda name, p: _read_into(parts, name, read(f"{name}.msgpack").read_bytes(), str(p)), name
                )
                for name in PARTS
            },
            "model": lambda p: self._load_model(parts, lambda: self.model.from_disk(read("model"))),
        }
        from_disk(path, deserializers, exclude)
        return self

    def _load_cfg(self, cfg: Dict[str, Any]) -> None:
        # Pipelines saved by 0.1.0 also stored the resources' sizes, now derived from them.
        for derived in ("n_chars", "vector_width"):
            cfg.pop(derived, None)
        self.cfg.update(cfg)

    def _load_model(self, parts: Dict[str, Part], load: Callable[[], Any]) -> None:
        """Set the loaded resources, shape the model from them, then load its weights."""
        self.resources = FlatResources.from_parts(parts, self.resources, self.name)
        self._configure()
        try:
            load()
        except PipelineFileError:
            raise
        except Exception as err:
            raise PipelineFileError(f"The saved '{self.name}' model weights could not be loaded: {err}") from err


def _read_into(parts: Dict[str, Part], name: str, data: bytes, source: str = "<bytes>") -> None:
    parts[name] = FlatResources.read_part(name, data, source)


def _write_file(write: Callable[[], bytes], path: Path) -> None:
    Path(path).write_bytes(write())
