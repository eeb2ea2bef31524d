"""The one handle the component uses to reach the model of any architecture: device, shapes,
CRF loss, and prediction (the tag scores of a batch of segments and the entity runs decoded from
them, on the model's device or on the host)."""

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union, cast

import numpy
import torch
from thinc.api import Model, PyTorchGradScaler, torch2xp
from thinc.types import Floats3d

from ..crf.host_runs import Runs, tag_runs
from ..crf.model import ConstrainedCRF
from ..decoding.boundaries import BoundaryRules
from ..decoding.tags import TagSet
from ..lattice.resources import FlatResources
from ..lattice.windows import Segment
from ..nn.tagger import LatticeTagger
from ..nn.transfer import to_device
from .arrays import host_emissions, xp_to_torch
from .device_decoder import HostRuns, decode_on_device
from .shim import InPlacePyTorchShim

# A loss's input: the emissions of the rows that have targets, their mask, and their row numbers.
CrfInput = Tuple[torch.Tensor, torch.Tensor, List[int]]


@dataclass
class Tagged:
    """A batch of segments as the model predicts it: tag scores and the entity runs read from them.

    lengths (List[int]): Characters per segment.
    runs (Runs): (row, first, end, label) arrays, an entry per entity run, segment offsets.
    probabilities (Optional[numpy.ndarray]): (runs,) each run's probability at `temperature`;
        None if not asked for.
    temperature (float): What the CRF's potentials were divided by for `probabilities`.
    scores (Optional[Floats3d]): The emissions on the host, forbidden tags masked, to score the
        runs at another temperature; None where the batch was decoded on the model's device.
    paths (Optional[numpy.ndarray]): (segments, width) Viterbi tag ids, with `scores`.
    """

    lengths: List[int]
    runs: Runs
    probabilities: Optional[numpy.ndarray]
    temperature: float = 1.0
    scores: Optional[Floats3d] = None
    paths: Optional[numpy.ndarray] = None


class TorchTagger:
    """The torch side of a FLAT model, for the component: it never touches
    tensors or shims itself.

    model (Model): A model of any registered architecture, with a "tagger" ref.
    """

    def __init__(self, model: Model) -> None:
        self.model = model
        self._layer = model.get_ref("tagger")

    @property
    def module(self) -> LatticeTagger:
        """RETURNS (LatticeTagger): The torch module."""
        return cast(LatticeTagger, self._layer.shims[0]._model)

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    @property
    def int8_inference(self) -> bool:
        """RETURNS (bool): Whether prediction on a CPU runs an int8 copy of the module."""
        return self._shim.int8_inference

    @int8_inference.setter
    def int8_inference(self, value: bool) -> None:
        self._shim.int8_inference = value

    @property
    def grad_scaler(self) -> PyTorchGradScaler:
        """RETURNS (PyTorchGradScaler): The gradient scaler of mixed-precision training."""
        return self._shim._grad_scaler

    @grad_scaler.setter
    def grad_scaler(self, scaler: PyTorchGradScaler) -> None:
        self._shim._grad_scaler = scaler

    @property
    def _shim(self) -> InPlacePyTorchShim:
        return cast(InPlacePyTorchShim, self._layer.shims[0])

    @property
    def is_configured(self) -> bool:
        return self.module.crf is not None

    def configure(self, resources: FlatResources, tag_set: TagSet, feature_width: int, n_word_types: int = 0) -> None:
        """Set the shapes that depend on data, before weights are set or loaded.

        n_word_types (int): The lexicon's word types when the model was trained
            (types added later have no learned embedding).
        """
        self.module.configure(
            feature_width=feature_width,
            n_chars=resources.n_chars,
            vector_width=resources.vector_width,
            n_tags=len(tag_set),
            transitions=tag_set.allowed_transitions(),
            starts=tag_set.allowed_starts(),
            ends=tag_set.allowed_ends(),
            bigram_table_width=resources.bigrams.vector_width if resources.bigrams is not None else 0,
            n_word_types=n_word_types,
        )

    def check_char_width(self, table: numpy.ndarray, component: str) -> None:
        char_width = self.module.embeddings.char_width
        if table.shape[1] != char_width:
            raise ValueError(
                f"Character vectors have width {table.shape[1]} but the model's char_width is "
                f"{char_width}; set [components.{component}.model] char_width = {table.shape[1]}"
            )

    def set_char_vectors(self, table: numpy.ndarray) -> None:
        """Initialize the character embeddings from a (rows, char_width) table."""
        self.module.embeddings.set_char_vectors(torch.from_numpy(numpy.ascontiguousarray(table, dtype="float32")))

    def loss(
        self, scores: Floats3d, gold: Sequence[Sequence[int]], *, read: bool = True
    ) -> Tuple[Union[float, torch.Tensor], Floats3d]:
        """CRF negative log-likelihood, averaged over the non-empty rows, and its
        gradient (zero for empty rows and rows without gold).

        The CRF's own parameter gradients accumulate in the torch module and are
        applied by the next `finish_update`.

        read (bool): Return the loss as a float; False: as a 0-d tensor left on the model's device.
        """
        lengths = [len(row) for row in gold]
        return self._backward(scores, lengths, lambda crf_input: self._nll(crf_input, gold), read=read)

    def _backward(
        self,
        scores: Floats3d,
        lengths: Sequence[int],
        compute: Callable[[CrfInput], torch.Tensor],
        read: bool = True,
    ) -> Tuple[Any, Floats3d]:
        """Run a summed loss over the rows with `lengths` > 0, averaged, and backward; the loss
        as a float, or (`read` False) as a detached 0-d tensor on the device."""
        rows = [b for b, n in enumerate(lengths) if n]
        if not rows:  # only empty docs: nothing to learn
            return 0.0, cast(Floats3d, scores * 0)
        emissions = xp_to_torch(scores, requires_grad=True, device=self.device)
        # Cut to these rows' longest: the batch's longest row may be one without targets.
        width = min(max(lengths[b] for b in rows), emissions.shape[1])
        filled = (emissions[to_device(rows, self.device)] if len(rows) < len(lengths) else emissions)[:, :width]
        mask = _padded([lengths[b] for b in rows], self.device)[:, :width]
        loss = compute((filled, mask, rows)) / max(1, len(rows))
        loss.backward()
        assert emissions.grad is not None
        return float(loss.item()) if read else loss.detach(), cast(Floats3d, torch2xp(emissions.grad))

    def _nll(
        self, crf_input: Tuple[torch.Tensor, torch.Tensor, List[int]], gold: Sequence[Sequence[int]]
    ) -> torch.Tensor:
        emissions, mask, rows = crf_input
        tags = numpy.zeros(mask.shape, dtype="int64")
        for k, b in enumerate(rows):
            tags[k, : len(gold[b])] = gold[b]
        return self.module.loss(emissions, to_device(tags, emissions.device), mask)

    @property
    def _crf(self) -> ConstrainedCRF:
        crf = self.module.crf
        assert crf is not None, "LatticeTagger.configure was not called"
        return crf

    def predict(
        self,
        segments: Sequence[Segment],
        rules: Optional[BoundaryRules],
        tag_set: TagSet,
        *,
        on_device: bool = False,
        temperature: float = 1.0,
        probabilities: bool = True,
    ) -> Tagged:
        """Score a batch of segments and decode its entity runs under `rules`.

        on_device (bool): Decode on the model's device (`device_runs`), falling back to the
            host for a batch the device cannot decode exactly.
        temperature (float): Divides the CRF's potentials for the runs' probabilities.
        probabilities (bool): Compute each run's probability.
        RETURNS (Tagged): The tag scores (host decoding only) and the entity runs.
        """
        lengths = [len(segment) for segment in segments]
        if not any(lengths):
            none = numpy.zeros((0,), dtype="int64")
            empty = numpy.zeros((0,), dtype="float64") if probabilities else None
            return Tagged(lengths, (none, none, none, none), empty, temperature)
        scores = self.model.predict(list(segments))
        forbidden = None if rules is None else rules.forbidden([s.text for s in segments], tag_set, scores.shape[1])
        if on_device:
            found = self.device_runs(scores, lengths, forbidden, tag_set.labels, temperature, probabilities)
            if found is not None:
                return Tagged(lengths, found[0], found[1], temperature)
        # Masked once on the host, for Viterbi and the probabilities alike.
        emissions = cast(Floats3d, host_emissions(scores, forbidden))
        paths = self.best_paths(emissions, lengths)
        row, first, end, label = tag_runs(tag_set.labels).runs(paths, lengths)
        probs = None
        if probabilities:
            probs = self.span_probabilities(emissions, lengths, None, (row, first, end, paths), temperature)
        return Tagged(lengths, (row, first, end, label), probs, temperature, emissions, paths)

    def rescored(self, tagged: Tagged, temperature: float) -> numpy.ndarray:
        """The probabilities of a host-decoded batch's runs at another temperature (calibration).
        RETURNS (numpy.ndarray): (runs,) float64."""
        if tagged.probabilities is not None and tagged.temperature == temperature:
            return tagged.probabilities
        if tagged.scores is None or tagged.paths is None:
            if not len(tagged.runs[0]):
                return numpy.zeros((0,), dtype="float64")
            computed = "none" if tagged.probabilities is None else "some"
            raise ValueError(
                f"these docs were decoded on the device with probabilities at temperature {tagged.temperature} "
                f"({computed} computed), not at {temperature}: decode them on the host "
                "(decode_docs(..., on_device=False)) to score them at several temperatures"
            )
        row, first, end, _ = tagged.runs
        runs = (row, first, end, tagged.paths)
        return self.span_probabilities(tagged.scores, tagged.lengths, None, runs, temperature)

    def decode(
        self, scores: Floats3d, lengths: Sequence[int], forbidden: Optional[numpy.ndarray] = None
    ) -> List[List[int]]:
        """Viterbi tag ids per row, each of its own length (none for an empty row).

        forbidden (Optional[numpy.ndarray]): (rows, chars, tags) bool: tags a
            character may not take (`BoundaryRules`); the best path under them is found.
        """
        paths = self.best_paths(scores, lengths, forbidden)
        return [paths[b, :n].tolist() for b, n in enumerate(lengths)]

    def best_paths(
        self, scores: Floats3d, lengths: Sequence[int], forbidden: Optional[numpy.ndarray] = None
    ) -> numpy.ndarray:
        """Viterbi tag ids of every row at once, (rows, width) int32, each row's valid
        to its length: one recursion over the batch on the host, no bucket tensors."""
        return self._crf.best_paths(host_emissions(scores, forbidden), numpy.asarray(lengths, dtype="int64"))

    def device_runs(
        self,
        scores: Floats3d,
        lengths: Sequence[int],
        forbidden: Optional[numpy.ndarray],
        labels: Tuple[str, ...],
        temperature: float = 1.0,
        probabilities: bool = True,
    ) -> Optional[HostRuns]:
        """Viterbi, the entity runs and their probabilities on the model's device, copied back once
        (`device_decoder.decode_on_device`); None when a row must be decoded on the host."""
        return decode_on_device(self._crf, scores, lengths, forbidden, labels, temperature, probabilities)

    def span_probabilities(
        self,
        scores: Floats3d,
        lengths: Sequence[int],
        forbidden: Optional[numpy.ndarray],
        runs: Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray],
        temperature: float = 1.0,
    ) -> numpy.ndarray:
        """The CRF's probability of each run of tags under `decode`'s constraints, for
        the whole batch at once (`ConstrainedCRF.span_probabilities`).

        runs: (row, first, end, tags): each run's row and [first, end), and the
            (rows, width) tag ids they are read from. RETURNS: (runs,) float64.
        """
        emissions = host_emissions(scores, forbidden)
        return self._crf.span_probabilities(emissions, numpy.asarray(lengths, dtype="int64"), runs, temperature)


def _padded(lengths: Sequence[int], device: torch.device) -> torch.Tensor:
    width = max(lengths)
    return torch.arange(width, device=device)[None, :] < to_device(lengths, device)[:, None]
