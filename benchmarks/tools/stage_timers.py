"""Replaying the encoder and timing each inference stage: the tools of `benchmarks/tools/stages.py`.

`EncoderReplay` records the torch encoder's emissions on a first pass and hands
them back on later passes, so a pass costs everything `nlp.pipe` does for the
component except the encoder forward. `StageTimers` wraps named functions of a
package (each binding of them: `from x import f` copies) and sums their time.
"""

import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import torch

# (label, module under the package, attribute path); a label indented by two
# spaces runs inside the row above it. Missing targets (renamed in another
# commit) are left out.
STAGES: List[Tuple[str, str, str]] = [
    ("segments (windows)", "lattice.windows", "Segmenter.segments"),
    ("lattice and features", "lattice.features", "featurize"),
    ("  lattice matching", "lattice.flat_lattice", "build_lattice"),
    ("  lattice matching", "lattice.flat_lattice", "batch_words"),
    ("arrays to torch", "layers.torch_tagger", "_convert_inputs"),
    ("arrays to torch", "layers.torch_tagger", "_convert_inputs"),
    ("encoder (replayed)", "nn.tagger", "LatticeTagger.forward"),
    ("boundary masks", "decoding.boundaries", "BoundaryRules.forbidden"),
    ("Viterbi", "layers.tagger_handle", "TorchTagger.decode"),
    ("Viterbi", "layers.tagger_handle", "TorchTagger.best_paths"),
    ("entity spans from tags", "decoding.tags", "TagSet.decode"),
    ("entity spans from tags", "crf.host_runs", "TagRuns.runs"),
    ("entity probabilities", "layers.tagger_handle", "TorchTagger.run_probabilities"),
    ("entity probabilities", "layers.tagger_handle", "TorchTagger.span_probabilities"),
    ("merging windows", "lattice.windows", "Segmenter.merge"),
    ("writing doc.ents and scores", "pipeline.confidence", "write_entities"),
]


class EncoderReplay:
    """Emissions of the torch encoder, by its input batch, for replaying.

    classes (Sequence[type]): The encoder classes whose `forward` is replaced.
    """

    def __init__(self, classes: Sequence[type]) -> None:
        self.classes = list(dict.fromkeys(classes))
        self.cache: Dict[Tuple[bytes, Tuple[int, ...]], torch.Tensor] = {}

    @staticmethod
    def _key(kwargs: Dict[str, Any]) -> Tuple[bytes, Tuple[int, ...]]:
        return kwargs["char_rows"].cpu().numpy().tobytes(), tuple(kwargs["token_mask"].shape)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Run the encoder and keep what it returns."""

        def wrap(original: Callable) -> Callable:
            def forward(module: torch.nn.Module, **kwargs: Any) -> torch.Tensor:
                out = original(module, **kwargs)
                self.cache[self._key(kwargs)] = out.detach()
                return out

            return forward

        with self._patched(wrap):
            yield

    @contextmanager
    def replaying(self) -> Iterator[None]:
        """Return the recorded emissions instead of running the encoder."""

        def wrap(original: Callable) -> Callable:
            def forward(module: torch.nn.Module, **kwargs: Any) -> torch.Tensor:
                return self.cache[self._key(kwargs)]

            return forward

        with self._patched(wrap):
            yield

    @contextmanager
    def _patched(self, wrap: Callable[[Callable], Callable]) -> Iterator[None]:
        originals = [cls.__dict__["forward"] for cls in self.classes]
        for cls, original in zip(self.classes, originals):
            cls.forward = wrap(original)  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for cls, original in zip(self.classes, originals):
                cls.forward = original  # type: ignore[attr-defined]


class StageTimers:
    """Seconds spent in each of `STAGES` of one package while active."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.seconds: Dict[str, float] = {}
        self._undo: List[Callable[[], None]] = []

    @contextmanager
    def active(self, tagger_layer: Any) -> Iterator[None]:
        """Time the stages; `tagger_layer` (the thinc layer) holds the array hand-over in its attrs."""
        for label, module_name, path in STAGES:
            module = sys.modules.get(f"{self.package}.{module_name}")
            owner, _, attr = path.rpartition(".")
            target: Any = module
            for part in owner.split(".") if owner else []:
                target = getattr(target, part, None)
            original = getattr(target, attr, None) if target is not None else None
            if original is None:
                continue
            timed = self._timed(label, original)
            if owner:
                self._set(target, attr, timed, original)
            else:
                for bound in list(sys.modules.values()):
                    ours = bound is not None and bound.__name__.startswith(self.package)
                    if ours and bound.__dict__.get(attr) is original:
                        self._set(bound, attr, timed, original)
            if tagger_layer.attrs.get("convert_inputs") is original:
                self._set_attr(tagger_layer.attrs, "convert_inputs", timed, original)
        try:
            yield
        finally:
            while self._undo:
                self._undo.pop()()

    def _set_attr(self, attrs: Dict[str, Any], key: str, value: Any, original: Any) -> None:
        attrs[key] = value
        self._undo.append(lambda: attrs.__setitem__(key, original))

    def _set(self, owner: Any, attr: str, value: Any, original: Any) -> None:
        setattr(owner, attr, value)
        self._undo.append(lambda: setattr(owner, attr, original))

    def _timed(self, label: str, function: Callable) -> Callable:
        seconds = self.seconds
        seconds.setdefault(label, 0.0)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[label] += time.perf_counter() - start

        return timed
