"""Saving and loading `flat_ner`: what it learned (labels, transformer width,
boundary rules), its resources (lexicon, character rows, bigram table) and its
model weights, in spaCy's bytes and disk layouts.

Loading collects the parts first and applies them together at the end, so
`exclude` works for every part, and the settings a pipeline's config gives
(windows, alignment, boundary constraints) are never overwritten by saved ones.
"""

import warnings
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional

import srsly
from spacy.util import from_bytes, from_disk, to_bytes, to_disk
from thinc.api import Model

from ..errors import PipelineFileError
from ..lattice.resources import OPTIONAL_PARTS, PARTS, FlatResources, Part


class BoundaryRulesMissing(UserWarning):
    """A loaded pipeline asks for boundary rules it never learned."""


# What `cfg` holds that training learned; everything else in it comes from the config.
LEARNED = ("labels", "feature_width", "boundaries", "word_types", "temperature")


class SavedWithResources:
    """What `FlatNER` saves and loads; the component provides the attributes below."""

    name: str
    cfg: Dict[str, Any]
    model: Model
    resources: Optional[FlatResources]

    @property
    def is_initialized(self) -> bool:
        raise NotImplementedError

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
        loaded = _Loaded()
        deserializers: Dict[str, Callable[[bytes], Any]] = {
            "cfg": lambda b: loaded.cfg.update(srsly.json_loads(b)),
            **{name: partial(loaded.read_part, name) for name in PARTS},
            "model": lambda b: setattr(loaded, "weights", lambda: self.model.from_bytes(b)),
        }
        from_bytes(bytes_data, deserializers, exclude)
        self._apply(loaded)
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

        def read_part(name: str, _: Path) -> None:
            file_path = Path(path) / f"{name}.msgpack"
            if name in OPTIONAL_PARTS and not file_path.exists():
                return
            loaded.read_part(name, read(file_path.name).read_bytes(), str(file_path))

        loaded = _Loaded()
        deserializers: Dict[str, Callable[[Path], Any]] = {
            "cfg.json": lambda p: loaded.cfg.update(srsly.read_json(read("cfg.json"))),
            **{f"{name}.msgpack": partial(read_part, name) for name in PARTS},
            "model": lambda p: setattr(loaded, "weights", lambda: self.model.from_disk(read("model"))),
        }
        from_disk(path, deserializers, exclude)
        self._apply(loaded)
        return self

    def _apply(self, loaded: "_Loaded") -> None:
        """Take the learned state, set the resources, shape the model, load its weights."""
        for key in LEARNED:
            if key in loaded.cfg:
                self.cfg[key] = loaded.cfg[key]
        if loaded.cfg and self.cfg.get("constrain_boundaries") and self.cfg.get("boundaries") is None:
            warnings.warn(
                f"'{self.name}' was saved without entity-boundary rules (before spacy-flat 0.2.0, or trained "
                "with constrain_boundaries = false), so it decodes without them; train it again to learn them",
                BoundaryRulesMissing,
                stacklevel=3,
            )
        if loaded.parts or self.resources is not None:
            self.resources = FlatResources.from_parts(loaded.parts, self.resources, self.name)
        if loaded.weights is None:
            # Weights kept (or not yet there): reshape only a model never shaped.
            if self.resources is not None and not self.is_initialized:
                self._configure()
            return
        if self.resources is None:
            raise PipelineFileError(f"The saved '{self.name}' component has no lexicon or character vocabulary")
        self._configure()
        try:
            loaded.weights()
        except PipelineFileError:
            raise
        except Exception as err:
            raise PipelineFileError(f"The saved '{self.name}' model weights could not be loaded: {err}") from err


class _Loaded:
    """The parts read so far, applied together once every part is read."""

    def __init__(self) -> None:
        self.cfg: Dict[str, Any] = {}
        self.parts: Dict[str, Part] = {}
        self.weights: Optional[Callable[[], Any]] = None

    def read_part(self, name: str, data: bytes, source: str = "<bytes>") -> None:
        self.parts[name] = FlatResources.read_part(name, data, source)


def _write_file(write: Callable[[], bytes], path: Path) -> None:
    Path(path).write_bytes(write())
