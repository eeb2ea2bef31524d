"""The Lattice LSTM's recurrence (spacy_flat/nn/lattice_lstm/encoder.py) as one autograd
function, with its backward pass (back-propagation through time) written by hand
(lattice_lstm_backward.py).

Each character is some thirty small operations on (directions, rows, hidden)
blocks. Autograd records every one of them and replays their backward one by one,
and over a recurrence of a few dozen such steps that per-operation cost, not the
arithmetic, sets the training speed. Here the forward pass records nothing: it
writes each step's states into preallocated buffers and keeps what the backward
needs. Both passes run in inference mode, which also spares each small operation
autograd's version and view bookkeeping (a quarter of its cost at these sizes);
what they make there is read only by this module.

The layout: the input terms `chars` (N_c, D * 5H: i, o, f, c̃ and the word gate's
character term per direction;
each row's characters in turn) are gathered once into reading order x (C, D, B, 5H),
so that step j reads x[j]; the word terms `words` (N_w, D * 3H: i, f, c̃) are read
in place as rows w * D + d. The states of step j are h[j] and c[j] (C, D, B, H), kept
after a zero state and flattened to rows ((j + 1) * D + d) * B + b when a word's
first character reads them. The words merged at a step are packed per direction
(N_j each, the most of the two; padding words sum into a row of their own), and
eq. 15 and 16 are sums over each row's words:

    c^c_j = (e^{i^c_j} ⊙ c̃^c_j + Σ_b e^{i^c_bj} ⊙ c^w_bj) / (e^{i^c_j} + Σ_b e^{i^c_bj})

(the gates are sigmoids, so the exponentials need no shift).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from .backward import Merge, through_time
from .schedule import Schedule


def recur(
    chars: torch.Tensor,
    words: torch.Tensor,
    char_hidden: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    plan: Schedule,
    keep: bool,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, List[Merge]]:
    """Run the recurrence without recording it.

    RETURNS (tuple): h and c of every step after the zero state (2, C + 1, D, B,
        H: h, then c; step j's at j + 1), tanh(c) (C, D, B, H), the character
        gates' activations (C, D, B, 4, H: i, o, f, c̃), the merged cells (C, D, B, H; 0 at steps where no word ends),
        eq. 16's and 15's sums (C, D * B + 1, 2, H: the denominator, then the
        numerator; 1 at steps where no word ends; row D * B: padding words') and,
        if `keep`, each merge.
    """
    steps, dirs, batch = plan.merges.shape[:3]
    hidden = char_hidden.shape[1]
    x = chars.reshape(-1, chars.shape[1] // dirs).index_select(0, plan.read).view(steps, dirs, batch, -1)
    words = words.reshape(-1, words.shape[1] // dirs)
    n_gates = char_hidden.shape[2] // hidden
    # h and c of every step in one buffer, after the zero state before the first: a word's
    # first character is read in one gather, and the backward reads each step's previous state.
    states = x.new_empty(2, steps + 1, dirs, batch, hidden)
    h, c = states[:, 0].zero_()
    hs, cs = states[:, 1:].unbind(0)
    tanh_c, merged = torch.empty_like(hs), torch.zeros_like(hs)
    acts = x.new_empty(steps, dirs, batch, n_gates, hidden)
    # Each step's sums of eq. 16 and 15 start from its characters' own terms; kept for
    # the backward, which needs their reciprocals.
    sums = x.new_ones(steps, dirs * batch + 1, 2, hidden)
    # Each step's views, made in a few calls: indexing in the loop costs as much as a small operation.
    x_char = x[..., : n_gates * hidden].unbind(0)
    gates = acts.view(steps, dirs, batch, -1).unbind(0)
    sigmoids, candidates = acts[:, :, :, :-1].unbind(0), acts[:, :, :, -1].unbind(0)
    i_s, o_s, g_s = (t.unbind(0) for t in (acts[:, :, :, 0], acts[:, :, :, 1], acts[:, :, :, -1]))
    f_s = acts[:, :, :, 2].unbind(0)
    c_s, h_s = cs.unbind(0), hs.unbind(0)
    tanh_s, merged_s = tanh_c.unbind(0), merged.unbind(0)
    own_s, own_weighted_s = (t.view(steps, dirs, batch, hidden).unbind(0) for t in sums[:, :-1].unbind(2))
    sums_s, state_rows = sums.unbind(0), states.view(2, -1, hidden)  # the zero state's rows first
    ends = plan.merges.bool().unbind(0)
    # Each word's terms and its character's gate term, gathered for all steps at once (D, P_d, .)
    # and split by step; padding words read the first rows.
    packed = [n for n in plan.packed if n]
    word_terms = words.index_select(0, plan.word_by_direction).view(dirs, -1, words.shape[1]).split(packed, 1)
    target = plan.target_by_direction.clamp(max=steps * dirs * batch - 1)
    gate_terms = x.reshape(-1, x.shape[-1])[:, n_gates * hidden :].index_select(0, target)
    gate_terms = gate_terms.view(dirs, -1, hidden).split(packed, 1)
    kept: List[Merge] = []
    k = 0
    for j in range(steps):
        torch.baddbmm(x_char[j], h, char_hidden, out=gates[j])
        sigmoids[j].sigmoid_()
        candidates[j].tanh_()
        c = torch.mul(f_s[j], c, out=c_s[j]).addcmul_(i_s[j], g_s[j])
        if plan.packed[j]:
            torch.mul(torch.exp(i_s[j], out=own_s[j]), g_s[j], out=own_weighted_s[j])
            merge = _merge(
                plan.state[k], plan.row[k], word_terms[k], gate_terms[k], state_rows, word_hidden, word_gate, sums_s[j]
            )
            torch.div(own_weighted_s[j], own_s[j], out=merged_s[j])  # eq. 15 and 16
            c = torch.where(ends[j], merged_s[j], c, out=c_s[j])
            if keep:
                kept.append(merge)
            k += 1
        h = torch.mul(o_s[j], torch.tanh(c, out=tanh_s[j]), out=h_s[j])
    return states, tanh_c, acts, merged, sums, kept


def _merge(
    state: torch.Tensor,
    row: torch.Tensor,
    word_terms: torch.Tensor,
    gate_terms: torch.Tensor,
    state_rows: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    sums: torch.Tensor,
) -> Merge:
    """Eq. 13 and 14 at a step where words end (`word_terms`, `gate_terms`: D, n, .),
    the words' first characters (`state`) read from the states' rows (2, C * D * B, H:
    h, then c); e^{i^c_bj} and e^{i^c_bj} ⊙ c^w_bj added to their `row`s of `sums`
    (D * B + 1, 2, H)."""
    dirs, n, hidden = word_terms.shape[0], word_terms.shape[1], word_hidden.shape[1]
    h_b, c_b = state_rows.index_select(1, state).view(2, dirs, n, hidden).unbind(0)
    z = torch.baddbmm(word_terms, h_b, word_hidden)
    z[..., : 2 * hidden].sigmoid_()
    z[..., 2 * hidden :].tanh_()
    word_i, word_f, word_c = z.view(dirs, n, 3, hidden).unbind(2)
    cells = (word_f * c_b).addcmul_(word_i, word_c)  # c^w_bj, eq. 13
    gate = torch.baddbmm(gate_terms, cells, word_gate).sigmoid_()  # i^c_bj, eq. 14
    both = cells.new_empty(dirs, n, 2, hidden)
    weight = torch.exp(gate, out=both[:, :, 0])
    torch.mul(weight, cells, out=both[:, :, 1])
    sums.index_add_(0, row, both.view(-1, 2, hidden))
    return Merge(h_b, c_b, z, cells, gate, weight)


class LatticeRecurrence(torch.autograd.Function):
    """h of every character (B, C, D * H) from the input terms `chars` (N_c, D * 5H),
    the word terms (N_w, D * 3H), the recurrent weights and the schedule."""

    @staticmethod
    def forward(
        ctx: Any,
        chars: torch.Tensor,
        words: torch.Tensor,
        char_hidden: torch.Tensor,
        word_hidden: torch.Tensor,
        word_gate: torch.Tensor,
        plan: Schedule,
    ) -> torch.Tensor:
        with torch.inference_mode():
            kept = recur(chars, words, char_hidden, word_hidden, word_gate, plan, keep=True)
        ctx.save_for_backward(char_hidden, word_hidden, word_gate)
        ctx.kept = (*kept, plan)
        ctx.shapes = (chars.shape, words.shape)
        return _in_rows_order(kept[0], plan)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        # The gradients leave as ordinary tensors, which autograd and the optimizer may
        # update in place: the words' added into a buffer made here, the rest gathered or copied.
        chars_shape, words_shape = ctx.shapes
        d_words = grad.new_zeros(words_shape)
        with torch.inference_mode():  # as in the forward pass
            d_x, *d_weights = through_time(grad, d_words, *ctx.saved_tensors, *ctx.kept)
        d_chars = d_x.view(-1, d_x.shape[-1]).index_select(0, ctx.kept[-1].char_states)
        return (d_chars.view(chars_shape), d_words, *(d.clone() for d in d_weights), None)


def _in_rows_order(states: torch.Tensor, plan: Schedule) -> torch.Tensor:
    """h of every step (`states`[0, 1:], C, D, B, H) back in the rows' order (B, C,
    D * H), by one gather (outside inference mode, an ordinary tensor)."""
    _, steps, dirs, batch, hidden = states.shape
    hs = states[0, 1:].view(-1, hidden)
    return hs.index_select(0, plan.written).view(batch, steps - 1, dirs * hidden)


def lattice_recurrence(
    chars: torch.Tensor,
    words: torch.Tensor,
    char_hidden: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    plan: Schedule,
) -> torch.Tensor:
    """h of every character (B, C, D * H): through `LatticeRecurrence` when a
    gradient is wanted, the forward pass alone (nothing kept) otherwise."""
    tensors = (chars, words, char_hidden, word_hidden, word_gate)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        out = LatticeRecurrence.apply(*tensors, plan)
        assert isinstance(out, torch.Tensor)
        return out
    with torch.inference_mode():
        states = recur(*tensors, plan, keep=False)[0]
    return _in_rows_order(states, plan)
