"""The FLAT torch module as a thinc layer, and the one handle the component
uses to reach it: device, shapes, CRF loss and decoding."""

from typing import Any, Callable, List, Optional, Sequence, Tuple, Union, cast

import numpy
import torch
from thinc.api import Model, PyTorchGradScaler, torch2xp
from thinc.types import Floats3d

from ..crf.kbest import crf_k_best, top_paths_loss
from ..crf.model import FORBIDDEN, ConstrainedCRF
from ..crf.posteriors import soft_target_loss
from ..decoding.tags import TagSet
from ..lattice.batching import length_buckets
from ..lattice.resources import FlatResources
from ..nn.tagger import LatticeTagger
from ..nn.transfer import to_device
from ..types import TopPaths
from .arrays import host_emissions, xp_to_torch
from .device_decoder import HostRuns, decode_on_device
from .shim import InPlacePyTorchShim

# A loss's input: the emissions of the rows that have targets, their mask, and their row numbers.
CrfInput = Tuple[torch.Tensor, torch.Tensor, List[int]]


class TorchTagger:
    """The torch side of a FLAT model, for the component: it never touches
    tensors or shims itself.

    model (Model): A model of any registered architecture, with a "tagger" ref.
    """

    def __init__(self, model: Model) -> None:
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
        self, scores: Floats3d, gold: Sequence[Sequence[int]], weight: float = 1.0, *, read: bool = True
    ) -> Tuple[Union[float, torch.Tensor], Floats3d]:
        """CRF negative log-likelihood, averaged over the non-empty rows, and its
        gradient (zero for empty rows and rows without gold).

        The CRF's own parameter gradients accumulate in the torch module and are
        applied by the next `finish_update`.

        weight (float): Scales the loss and every gradient (beside a soft-target loss).
        read (bool): Return the loss as a float; False: as a 0-d tensor left on the model's device.
        """
        lengths = [len(row) for row in gold]
        return self._backward(scores, lengths, weight, lambda crf_input: self._nll(crf_input, gold), read=read)

    def soft_loss(
        self,
        scores: Floats3d,
        targets: Sequence[Optional[numpy.ndarray]],
        temperature: float = 1.0,
        weight: float = 1.0,
    ) -> Tuple[float, Floats3d]:
        """Cross-entropy of the CRF's tag marginals against a teacher's
        (`crf.posteriors.soft_target_loss`), averaged over the rows that have
        targets, and its gradient. Accumulates CRF gradients as `loss` does.

        targets: Per row, the teacher's (length, n_tags) marginals, or None.
        """
        lengths = [0 if row is None else len(row) for row in targets]

        def compute(crf_input: CrfInput) -> torch.Tensor:
            emissions, mask, rows = crf_input
            wanted = numpy.zeros((*mask.shape, emissions.shape[2]), dtype="float32")
            for k, b in enumerate(rows):
                row = targets[b]
                assert row is not None
                wanted[k, : len(row)] = row
            module_targets = to_device(wanted, emissions.device)
            return soft_target_loss(self._crf, emissions, mask, module_targets, temperature)

        return self._backward(scores, lengths, weight, compute)

    def path_loss(
        self,
        scores: Floats3d,
        targets: Sequence[Optional[TopPaths]],
        temperature: float = 1.0,
        weight: float = 1.0,
    ) -> Tuple[float, Floats3d]:
        """Σ_k p_k · NLL(y_k) of a teacher's best paths under the CRF
        (`crf.kbest.top_paths_loss`), averaged over the rows that have
        targets, and its gradient. Accumulates CRF gradients as `loss` does.

        targets: Per row, the teacher's paths and their probabilities, or None.
        """
        lengths = [0 if row is None else row.paths.shape[1] for row in targets]

        def compute(crf_input: CrfInput) -> torch.Tensor:
            emissions, mask, rows = crf_input
            chosen = [targets[b] for b in rows]
            k = max(len(row.probabilities) for row in chosen if row is not None)
            paths = numpy.zeros((len(rows), k, mask.shape[1]), dtype="int64")
            weights = numpy.zeros((len(rows), k), dtype="float32")
            for i, row in enumerate(chosen):
                assert row is not None
                paths[i, : len(row.paths), : row.paths.shape[1]] = row.paths
                weights[i, : len(row.probabilities)] = row.probabilities
            device = emissions.device
            module_paths, module_weights = to_device(paths, device), to_device(weights, device)
            return top_paths_loss(self._crf, emissions, mask, module_paths, module_weights, temperature)

        return self._backward(scores, lengths, weight, compute)

    def _backward(
        self,
        scores: Floats3d,
        lengths: Sequence[int],
        weight: float,
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
        (loss * weight).backward()
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

    def marginals(
        self,
        scores: Floats3d,
        lengths: Sequence[int],
        forbidden: Optional[numpy.ndarray] = None,
        temperature: float = 1.0,
    ) -> List[numpy.ndarray]:
        """Each row's tag marginals, (length, n_tags) float32, under the same
        constraints as `decode` (`ConstrainedCRF.marginals`)."""
        out = [numpy.zeros((0, self._crf.num_tags), dtype="float32") for _ in lengths]
        for rows in length_buckets(lengths):
            emissions, mask = self._constrained(scores, lengths, forbidden, rows)
            for b, probs in zip(rows, self._crf.marginals(emissions, mask, temperature)):
                out[b] = probs
        return out

    def top_paths(
        self,
        scores: Floats3d,
        lengths: Sequence[int],
        forbidden: Optional[numpy.ndarray] = None,
        k: int = 1,
        temperature: float = 1.0,
    ) -> List[TopPaths]:
        """Each row's k best paths under the same constraints as `decode`
        (`crf.kbest.crf_k_best`), with their probabilities renormalised over
        them: exp(s_k / T) / Σ_j exp(s_j / T) for path scores s. A row with fewer
        allowed paths than k has fewer; an empty row has none.
        """
        paths, totals = crf_k_best(
            self._crf, host_emissions(scores, None), numpy.asarray(lengths, "int64"), k, forbidden
        )
        out: List[TopPaths] = []
        for b, n in enumerate(lengths):
            kept = numpy.isfinite(totals[b]) & (n > 0)
            scored = totals[b, kept]
            probabilities = numpy.exp((scored - (scored.max() if len(scored) else 0.0)) / temperature)
            # Paths as int16 (tag ids are few): a cache of a corpus's targets stays small.
            out.append(
                TopPaths(paths[b, kept, :n].astype("int16"), (probabilities / probabilities.sum()).astype("float32"))
            )
        return out

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

    def _constrained(
        self, scores: Floats3d, lengths: Sequence[int], forbidden: Optional[numpy.ndarray], rows: List[int]
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The emissions of `rows`, cut to their longest, with forbidden tags masked, and their mask."""
        width = max(lengths[b] for b in rows)
        # Rows come sorted by length (`length_buckets`): select them even when all are there.
        emissions = xp_to_torch(scores[rows, :width], device=self.device)
        if forbidden is not None:
            chosen = to_device(forbidden[rows, :width], self.device)
            emissions = emissions.masked_fill(chosen, FORBIDDEN)
        return emissions, _padded([lengths[b] for b in rows], self.device)


def _padded(lengths: Sequence[int], device: torch.device) -> torch.Tensor:
    width = max(lengths)
    return torch.arange(width, device=device)[None, :] < to_device(lengths, device)[:, None]
