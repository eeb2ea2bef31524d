"""CRF decoding on the scores' own device, batched, in torch: constrained Viterbi, the
forward-backward for entity probabilities, and the entity runs read out of the tag paths.

On a GPU the NumPy recursions (`packed.py`, `span_marginals.py`) made the device wait for the
host: the scores were copied over, then decoded one small NumPy step at a time. Here every step
is one batched tensor operation over all rows (rows past their end keep their state through a
`torch.where`, so no loop per row and no row is read back), the backtrace is a gather per step,
and nothing asks the device for a value until the entity runs are counted (`nonzero`, the one
operation whose output size depends on the data): the caller copies the runs back once.

The arithmetic is the NumPy path's: Viterbi in float32 with the same additions and the same
first-index ties, so the paths are identical; the forward-backward runs in log space in float64
(float32 on Apple's MPS, which has no float64; log space keeps its range), so the probabilities
agree to rounding.
"""

import contextlib
from typing import Iterator, Optional, Tuple

import torch

# Each entity run as tensors: its row, first character, the character after its last, label index.
TensorRuns = Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@contextlib.contextmanager
def expected_sync(device: torch.device) -> Iterator[None]:
    """Mark one of decoding's two deliberate waits for the device (the count of entity marks,
    the copy of the runs): under `torch.cuda.set_sync_debug_mode("error")` any other is an error."""
    if device.type != "cuda":
        yield
        return
    mode = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(0)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(mode)


def wide_dtype(device: torch.device) -> torch.dtype:
    """The forward-backward's float type: float64, but float32 on MPS, which has none."""
    return torch.float32 if device.type == "mps" else torch.float64


def viterbi(
    emissions: torch.Tensor, lengths: torch.Tensor, trans: torch.Tensor, start: torch.Tensor, end: torch.Tensor
) -> torch.Tensor:
    """Best tag sequence of every row at once.

    emissions (torch.Tensor): (rows, width, n_tags) float32, forbidden tags already masked.
    lengths (torch.Tensor): (rows,) int64 characters per row, on the same device.
    trans, start, end (torch.Tensor): The CRF's float32 potentials, forbidden moves masked.
    RETURNS (torch.Tensor): (rows, width) int64 tag ids, each row's valid to its length (0 after).
    """
    rows, width, _ = emissions.shape
    paths = torch.zeros((rows, width), dtype=torch.int64, device=emissions.device)
    if width == 0:
        return paths
    best = start[None] + emissions[:, 0]
    pointers = []
    for t in range(1, width):
        # (row, prev, next) reduced over prev: the first best predecessor, as NumPy's argmax takes it.
        top, pointer = (best[:, :, None] + trans[None]).max(1)
        best = torch.where((t < lengths)[:, None], top + emissions[:, t], best)
        pointers.append(pointer)
    # A row's score stops changing after its last character, so every row closes here.
    current = (best + end[None]).argmax(1)
    for t in range(width - 1, 0, -1):
        running = t < lengths
        paths[:, t] = torch.where(running, current, 0)
        current = torch.where(running, pointers[t - 1].gather(1, current[:, None])[:, 0], current)
    paths[:, 0] = torch.where(lengths > 0, current, 0)
    return paths


def forward_backward(
    emissions: torch.Tensor, lengths: torch.Tensor, trans: torch.Tensor, start: torch.Tensor, end: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log forward and backward scores and log Z of each row, in log space.

    emissions (torch.Tensor): (rows, width, n_tags) in the wide type, divided by the temperature.
    trans, start, end (torch.Tensor): The potentials in the same type, divided likewise.
    RETURNS: alpha and beta (rows, width, n_tags), log Z (rows,). Each row's entries are valid
        to its length; a row of length 0 has no meaningful values.
    """
    rows, width, n_tags = emissions.shape
    alphas = torch.empty_like(emissions)
    betas = torch.empty_like(emissions)
    alpha = start[None] + emissions[:, 0]
    alphas[:, 0] = alpha
    for t in range(1, width):
        step = torch.logsumexp(alpha[:, :, None] + trans[None], 1) + emissions[:, t]
        alpha = torch.where((t < lengths)[:, None], step, alpha)
        alphas[:, t] = alpha
    log_z = torch.logsumexp(alpha + end[None], 1)
    closing = end[None].expand(rows, n_tags)
    beta = closing
    betas[:, width - 1] = beta
    for t in range(width - 2, -1, -1):
        step = torch.logsumexp(trans[None] + (emissions[:, t + 1] + beta)[:, None, :], 2)
        beta = torch.where((t < lengths - 1)[:, None], step, closing)
        betas[:, t] = beta
    return alphas, betas, log_z


def entity_runs(
    paths: torch.Tensor,
    lengths: torch.Tensor,
    begins: torch.Tensor,
    ends: torch.Tensor,
    label: torch.Tensor,
    allowed: torch.Tensor,
    may_start: torch.Tensor,
    may_end: torch.Tensor,
) -> Tuple[TensorRuns, torch.Tensor]:
    """The B…L and U runs of every valid row, in row then position order, and which rows are
    valid BILUO sequences (`crf.host_runs.TagRuns.runs` in torch; an invalid row, which
    constrained Viterbi does not give, is left to the caller). One `nonzero` over the begin
    and end marks together: the device is asked for one count.

    begins, ends, may_start, may_end (torch.Tensor): (n_tags,) bool tag tables; label (n_tags,)
        int64 label index; allowed (n_tags, n_tags) bool moves.
    RETURNS: the runs, and (rows,) bool: the row is valid (or empty).
    """
    width = paths.shape[1]
    inside = torch.arange(width, device=paths.device)[None, :] < lengths[:, None]
    moves = allowed[paths[:, :-1], paths[:, 1:]] | ~inside[:, 1:]
    last = paths.gather(1, (lengths - 1).clamp_min(0)[:, None])[:, 0]
    valid = (moves.all(1) & may_start[paths[:, 0]] & may_end[last]) | (lengths == 0)
    keep = inside & valid[:, None]
    # In a valid row each begin pairs with the next end, so the k-th begin mark (row-major)
    # pairs with the k-th end mark: one nonzero over both, split in half.
    with expected_sync(paths.device):
        marks = torch.stack([begins[paths] & keep, ends[paths] & keep]).nonzero()
    half = marks.shape[0] // 2
    row, first, last_char = marks[:half, 1], marks[:half, 2], marks[half:, 2]
    return (row, first, last_char + 1, label[paths[row, last_char]]), valid


def run_probabilities(
    emissions: torch.Tensor,
    lengths: torch.Tensor,
    trans: torch.Tensor,
    start: torch.Tensor,
    end: torch.Tensor,
    paths: torch.Tensor,
    runs: TensorRuns,
    temperature: float = 1.0,
) -> torch.Tensor:
    """The CRF's probability that each run's characters take exactly their tags in `paths`
    (`span_marginals.span_probabilities` on the device): alpha at the run's first tag, the
    path's moves and emissions inside it, beta at its last tag, less log Z.

    emissions (torch.Tensor): (rows, width, n_tags) float32 scores, forbidden tags masked.
    trans, start, end (torch.Tensor): The CRF's potentials (any float type).
    RETURNS (torch.Tensor): (runs,) in the wide type, each min(1, p).
    """
    wide = wide_dtype(emissions.device)
    scaled = emissions.to(wide) / temperature
    moves = trans.to(wide) / temperature
    alpha, beta, log_z = forward_backward(
        scaled, lengths, moves, start.to(wide) / temperature, end.to(wide) / temperature
    )
    row, first, stop, _ = runs
    last = stop - 1
    # Each character's move into its tag and its emission; their running sum along the row gives
    # every run's inner score as a difference of two entries.
    emitted = scaled.gather(2, paths[:, :, None])[:, :, 0]
    steps = torch.zeros_like(emitted)
    steps[:, 1:] = moves[paths[:, :-1], paths[:, 1:]] + emitted[:, 1:]
    running = steps.cumsum(1)
    inner = running[row, last] - running[row, first]
    log_p = alpha[row, first, paths[row, first]] + inner + beta[row, last, paths[row, last]] - log_z[row]
    # fmin, as the NumPy path: a NaN gives 1.0.
    return torch.fmin(log_p.exp(), torch.ones((), dtype=wide, device=log_p.device))


def masked(emissions: torch.Tensor, forbidden: Optional[torch.Tensor], value: float) -> torch.Tensor:
    """RETURNS (torch.Tensor): float32 `emissions` with the tags in `forbidden` set to `value`."""
    emissions = emissions.float()
    if forbidden is None:
        return emissions
    return emissions.masked_fill(forbidden[:, : emissions.shape[1]], value)
