"""Entities decoded where the scores are: the torch recursions of `crf/device_decoding.py` run
on the model's device, and the entity runs (row, first, end, label, probability) come back to
the host in one copy per batch.

The device is asked for values twice a batch, whatever its size: the count of entity marks
(`nonzero`) and the copy of the runs. Inputs go to the device from pinned memory without
waiting, so a GPU is never made to sync for them. A batch with a row that is no valid BILUO
sequence (which constrained Viterbi does not give) is decoded again on the host path, so its
entities are exactly the host's.
"""

import functools
from typing import List, Optional, Sequence, Tuple

import numpy
import torch
from thinc.types import Floats3d

from ..crf.device_decoding import entity_runs, expected_sync, masked, run_probabilities, viterbi
from ..crf.host_runs import Runs, tag_runs
from ..crf.model import FORBIDDEN, ConstrainedCRF
from .arrays import xp_to_torch

# The runs of a batch on the host, and their probabilities (None when not asked for).
HostRuns = Tuple[Runs, Optional[numpy.ndarray]]


def to_device(array: numpy.ndarray, device: torch.device) -> torch.Tensor:
    """`array` on `device`; to a GPU from pinned memory without blocking (a copy from pageable
    memory would make the host wait for the device)."""
    tensor = torch.from_numpy(numpy.ascontiguousarray(array))
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


@functools.lru_cache(maxsize=16)
def device_tables(labels: Tuple[str, ...], device: torch.device) -> Tuple[torch.Tensor, ...]:
    """The BILUO lookup tables of `labels` (`TagRuns`) on `device`, moved there once:
    begins, ends, label, allowed, may_start, may_end."""
    runs = tag_runs(labels)
    tables = (runs.begins, runs.ends, runs.label, runs.allowed, runs.may_start, runs.may_end)
    return tuple(to_device(table, device) for table in tables)


def decode_on_device(
    crf: ConstrainedCRF,
    scores: Floats3d,
    lengths: Sequence[int],
    forbidden: Optional[numpy.ndarray],
    labels: Tuple[str, ...],
    temperature: float = 1.0,
    probabilities: bool = True,
) -> Optional[HostRuns]:
    """Viterbi, the entity runs and (with `probabilities`) each run's probability, on the
    CRF's device.

    scores (Floats3d): (rows, width, n_tags) emissions, NumPy or CuPy.
    forbidden (Optional[numpy.ndarray]): (rows, >= width, n_tags) bool tags a character may not take.
    labels (Tuple[str, ...]): The tag set's labels (the tables of `tag_runs`).
    temperature (float): Divides every potential for the probabilities.
    RETURNS (Optional[HostRuns]): The runs as host arrays (row, first, end, label) and their
        float64 probabilities; None if some row is no valid BILUO sequence (decode it on the host).
    """
    device = crf.raw_transitions.device
    if not scores.shape[0] or not scores.shape[1]:  # nothing to decode
        empty = numpy.zeros(0, dtype="int64")
        return (empty, empty, empty, empty), (numpy.zeros(0) if probabilities else None)
    with torch.no_grad():
        rows_forbidden = None if forbidden is None else to_device(forbidden, device)
        emissions = masked(xp_to_torch(scores, device=device), rows_forbidden, FORBIDDEN)
        sizes = to_device(numpy.asarray(lengths, dtype="int64"), device)
        trans, start, end = crf.transitions.float(), crf.start_transitions.float(), crf.end_transitions.float()
        paths = viterbi(emissions, sizes, trans, start, end)
        runs, valid = entity_runs(paths, sizes, *device_tables(labels, device))
        parts = [*runs, valid.to(torch.int64)]
        if probabilities:
            probs = run_probabilities(emissions, sizes, trans, start, end, paths, runs, temperature)
            parts.append(_as_int64(probs))
        host = _one_copy(parts)
    if not host[4].all():
        return None
    found = (host[0], host[1], host[2], host[3])
    if not probabilities:
        return found, None
    return found, _from_int64(host[5], probs.dtype)


def _as_int64(values: torch.Tensor) -> torch.Tensor:
    """Floats carried as int64 so that one copy brings every part: float64 bit for bit, float32
    (MPS) through int32."""
    if values.dtype == torch.float64:
        return values.view(torch.int64)
    return values.float().view(torch.int32).to(torch.int64)


def _from_int64(values: numpy.ndarray, dtype: torch.dtype) -> numpy.ndarray:
    if dtype == torch.float64:
        return values.view("float64")
    return values.astype("int32").view("float32").astype("float64")


def _one_copy(parts: List[torch.Tensor]) -> List[numpy.ndarray]:
    """The int64 tensors `parts` on the host, by one copy of their concatenation."""
    sizes = [len(part) for part in parts]
    joined = torch.cat(parts)
    with expected_sync(joined.device):
        joined = joined.to("cpu", copy=True)
    return numpy.split(joined.numpy(), numpy.cumsum(sizes)[:-1])
