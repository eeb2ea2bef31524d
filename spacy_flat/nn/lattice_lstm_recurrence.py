"""The Lattice LSTM's recurrence (spacy_flat/nn/lattice_lstm.py) as one autograd
function, with its backward pass (back-propagation through time) written by hand.

Each character is some thirty small operations on (directions, rows, hidden)
blocks. Autograd records every one of them and replays their backward one by one,
and over a recurrence of a few dozen such steps that per-operation cost, not the
arithmetic, sets the training speed. Here the forward pass records nothing: it
writes each step's states into preallocated buffers and keeps what the backward
needs. The backward walks the steps once in reverse with a handful of operations a
step; whatever does not depend on the recurrence (the gates' derivatives before
the loop, the weights' and the inputs' gradients after it) is computed for all
steps at once.

The layout: step j reads x[j] (C, D, B, 5H: i, o, f, c̃ and the word gate's
character term per direction) and the word terms `words` (D * N_w, 3H: i, f, c̃);
the states of step j are h[j] and c[j] (C, D, B, H), flattened to rows
(j * D + d) * B + b when a word's first character is read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable


@dataclass
class Schedule:
    """Where the words merged at each step read and write, built once per batch.

    At a step the words of each direction are packed side by side (N_j per
    direction, the most of the two) for the matrix products of eq. 13 and 14, and
    laid out by row (K_j slots per row, the most in one row) for eq. 15 and 16.

    widths, packed (List[int]): per step, K_j and N_j; 0 where no word ends.
    slot (S,) int64: per slot of a row, its word's place (d * N_j + n) among the
        step's packed words; 0 in padding (whose weight is 0).
    state (P,) int64: per packed word, the state row of its first character.
    word (P,) int64: per packed word, its row in the word terms (D * N_w).
    word_by_direction (P,) int64: `word`, ordered by direction, then step.
    penalty (C, D, B, 1 + K, 1): 0 for the character's own gate and its words, -inf for padding.
    merges (C, D, B, 1): 1.0 where words end (eq. 15), 0.0 where the plain LSTM cell holds.
    """

    widths: List[int]
    packed: List[int]
    slot: torch.Tensor
    state: torch.Tensor
    word: torch.Tensor
    word_by_direction: torch.Tensor
    penalty: torch.Tensor
    merges: torch.Tensor


class Merge(NamedTuple):
    """What the backward needs of a step where words end: per packed word (D, N, .)
    its first character's states, its gates and cell; per row slot (D, B, 1 + K, H)
    the softmax's weights (eq. 16, 0 in rows where no word ends) and weighted terms
    (eq. 15); where it reads the schedule."""

    step: int
    state: torch.Tensor  # D * N
    slot: torch.Tensor  # D * B * K
    h_b: torch.Tensor
    c_b: torch.Tensor
    z: torch.Tensor  # i^w, f^w, c̃^w
    cells: torch.Tensor
    gate: torch.Tensor  # i^c_bj per slot, D B K H
    alpha: torch.Tensor
    terms: torch.Tensor  # α ⊙ [c̃; c^w]


def recur(
    x: torch.Tensor,
    words: torch.Tensor,
    char_hidden: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    plan: Schedule,
    keep: bool,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, List[Merge]]:
    """Run the recurrence without recording it.

    RETURNS (tuple): h and c of every step (C, D, B, H), tanh(c), the character
        gates' activations (C, D, B, 4H: i, o, f, c̃) and, if `keep`, each merge.
    """
    steps, dirs, batch, _ = x.shape
    hidden = char_hidden.shape[1]
    hs = x.new_empty(steps, dirs, batch, hidden)
    cs, tanh_c = torch.empty_like(hs), torch.empty_like(hs)
    acts = x.new_empty(steps, dirs, batch, 4 * hidden)
    plain = 1 - plan.merges
    h = c = x.new_zeros(dirs, batch, hidden)
    merges: List[Merge] = []
    slots = packed = 0
    for j in range(steps):
        a = torch.baddbmm(x[j, :, :, : 4 * hidden], h, char_hidden, out=acts[j])
        a[..., : 3 * hidden].sigmoid_()
        a[..., 3 * hidden :].tanh_()
        i, o, f, g = a.view(dirs, batch, 4, hidden).unbind(2)
        c = torch.mul(f, c, out=cs[j]).addcmul_(i, g)
        width, n = plan.widths[j], plan.packed[j]
        if width:
            slot = plan.slot[slots : slots + dirs * batch * width]
            merge = _merge(j, a, x[j, :, :, 4 * hidden :], words, hs, cs, word_hidden, word_gate, plan, slot, packed)
            c.mul_(plain[j]).add_(merge.terms.sum(2))
            if keep:
                merges.append(merge)
            slots, packed = slots + slot.shape[0], packed + dirs * n
        h = torch.mul(o, torch.tanh(c, out=tanh_c[j]), out=hs[j])
    return hs, cs, tanh_c, acts, merges


def _merge(
    j: int,
    a: torch.Tensor,
    x_gate: torch.Tensor,
    words: torch.Tensor,
    hs: torch.Tensor,
    cs: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    plan: Schedule,
    slot: torch.Tensor,
    start: int,
) -> Merge:
    """Eq. 13, 14 and 16 at step j, the words' first characters read from the state buffers."""
    dirs, batch, hidden = x_gate.shape
    width, n = plan.widths[j], plan.packed[j]
    state = plan.state[start : start + dirs * n]
    h_b = hs.view(-1, hidden).index_select(0, state).view(dirs, n, hidden)
    c_b = cs.view(-1, hidden).index_select(0, state).view(dirs, n, hidden)
    rows = words.index_select(0, plan.word[start : start + dirs * n]).view(dirs, n, 3 * hidden)
    z = torch.baddbmm(rows, h_b, word_hidden)
    z[..., : 2 * hidden].sigmoid_()
    z[..., 2 * hidden :].tanh_()
    word_i, word_f, word_c = z.view(dirs, n, 3, hidden).unbind(2)
    cells = (word_f * c_b).addcmul_(word_i, word_c)  # c^w_bj, eq. 13
    # W^l's c^w half and the cells, from the packed words to the rows' slots.
    both = torch.cat([torch.bmm(cells, word_gate), cells], -1).view(-1, 2 * hidden)
    by_row = both.index_select(0, slot).view(dirs, batch, width, 2 * hidden)
    gate = (by_row[..., :hidden] + x_gate[:, :, None]).sigmoid_()  # i^c_bj, eq. 14
    scores = torch.cat([a[:, :, None, :hidden], gate], 2).add_(plan.penalty[j, :, :, : 1 + width])
    alpha = torch.softmax(scores, 2).mul_(plan.merges[j][..., None])  # eq. 16, 0 where no word ends
    terms = alpha * torch.cat([a[:, :, None, 3 * hidden :], by_row[..., hidden:]], 2)  # eq. 15's terms
    return Merge(j, state, slot, h_b, c_b, z, cells, gate, alpha, terms)


class LatticeRecurrence(torch.autograd.Function):
    """h of every step (C, D, B, H) from the input terms x (C, D, B, 5H), the word
    terms (D * N_w, 3H), the recurrent weights and the schedule of the words."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        words: torch.Tensor,
        char_hidden: torch.Tensor,
        word_hidden: torch.Tensor,
        word_gate: torch.Tensor,
        plan: Schedule,
    ) -> torch.Tensor:
        hs, cs, tanh_c, acts, merges = recur(x, words, char_hidden, word_hidden, word_gate, plan, keep=True)
        ctx.save_for_backward(hs, char_hidden, word_hidden, word_gate)
        ctx.kept = (cs, tanh_c, acts, merges, plan, words.shape[0])
        return hs

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        hs, char_hidden, word_hidden, word_gate = ctx.saved_tensors
        cs, tanh_c, acts, merges, plan, n_words = ctx.kept
        steps, dirs, batch, hidden = hs.shape
        i, o, f, g = acts.view(steps, dirs, batch, 4, hidden).unbind(3)
        plain = 1 - plan.merges
        alpha_c = torch.zeros_like(hs)  # α^c_j where words end (eq. 15), 0 elsewhere
        for merge in merges:
            alpha_c[merge.step] = merge.alpha[:, :, 0]
        d_i, d_o, d_f = i - i * i, o - o * o, f - f * f  # the sigmoids' derivatives
        c_prev = torch.cat([torch.zeros_like(cs[:1]), cs[:-1]])
        # Per step, a pre-activation's gradient is dc times its partner (o's: dh times out_gate).
        partner = torch.stack([g * plain * d_i, d_o, c_prev * plain * d_f, (i * plain + alpha_c) * (1 - g * g)], 3)
        out_gate, cell_of_h, forget = tanh_c * d_o, o * (1 - tanh_c * tanh_c), f * plain
        words = _Words(merges, dirs, hidden) if merges else None
        dh, dc = grad.contiguous().clone(), torch.zeros_like(hs)
        dpre = hs.new_empty(steps, dirs, batch, 4, hidden)
        d_char_gate = torch.zeros_like(hs)
        char_back, word_back, gate_back = (w.transpose(1, 2) for w in (char_hidden, word_hidden, word_gate))
        at = {merge.step: k for k, merge in enumerate(merges)}
        d_terms: List[torch.Tensor] = []
        d_gates: List[torch.Tensor] = []
        for j in range(steps - 1, -1, -1):
            dc_j = dc[j].addcmul_(dh[j], cell_of_h[j])
            dp = torch.mul(partner[j], dc_j[:, :, None], out=dpre[j])
            torch.mul(dh[j], out_gate[j], out=dp[:, :, 1])
            if j in at and words is not None:
                k = at[j]
                m, n, start = merges[k], plan.packed[j], words.starts[k]
                s = m.terms * dc_j[:, :, None]
                d_scores = torch.addcmul(s, m.alpha, s.sum(2, keepdim=True), value=-1)  # softmax
                dp[:, :, 0].addcmul_(d_scores[:, :, 0], d_i[j])
                d_gate = d_scores[:, :, 1:] * words.d_gate[k]
                torch.sum(d_gate, 2, out=d_char_gate[j])
                d_by_row = torch.cat([d_gate, m.alpha[:, :, 1:] * dc_j[:, :, None]], -1).view(-1, 2 * hidden)
                d_both = hs.new_zeros(dirs * n, 2 * hidden).index_add_(0, m.slot, d_by_row).view(dirs, n, -1)
                d_cells = torch.baddbmm(d_both[..., hidden:], d_both[..., :hidden], gate_back)
                d_z = d_cells[:, :, None] * words.partner[:, start : start + n]
                d_h_b = torch.bmm(d_z.view(dirs, n, 3 * hidden), word_back)
                dh.view(-1, hidden).index_add_(0, m.state, d_h_b.view(-1, hidden))
                dc.view(-1, hidden).index_add_(
                    0, m.state, (d_cells * words.forget[:, start : start + n]).view(-1, hidden)
                )
                d_terms.append(d_z.view(dirs, n, 3 * hidden))
                d_gates.append(d_both[..., :hidden])
            if j:
                dc[j - 1].addcmul_(dc_j, forget[j])
                dh[j - 1].baddbmm_(dp.view(dirs, batch, 4 * hidden), char_back)
        d_chars = dpre.view(steps, dirs, batch, 4 * hidden)
        h_prev = torch.cat([torch.zeros_like(hs[:1]), hs[:-1]])
        d_char_hidden = torch.einsum("jdbh,jdbk->dhk", h_prev, d_chars)
        d_words = hs.new_zeros(n_words, 3 * hidden)
        d_word_hidden, d_word_gate = torch.zeros_like(word_hidden), torch.zeros_like(word_gate)
        if words is not None:
            d_term, d_gate = torch.cat(d_terms[::-1], 1), torch.cat(d_gates[::-1], 1)  # D, P_d, .
            d_word_hidden = torch.bmm(words.h_b.transpose(1, 2), d_term)
            d_word_gate = torch.bmm(words.cells.transpose(1, 2), d_gate)
            d_words.index_add_(0, plan.word_by_direction, d_term.reshape(-1, 3 * hidden))
        d_x = torch.cat([d_chars, d_char_gate], -1)
        return d_x, d_words, d_char_hidden, d_word_hidden, d_word_gate, None


class _Words:
    """The merges' packed words side by side (D, P_d, .), ordered by step, and the
    derivatives of eq. 13 and 14 for all of them at once."""

    def __init__(self, merges: List[Merge], dirs: int, hidden: int) -> None:
        self.starts: List[int] = []
        total = 0
        for merge in merges:
            self.starts.append(total)
            total += merge.h_b.shape[1]
        self.h_b = torch.cat([m.h_b for m in merges], 1)
        self.cells = torch.cat([m.cells for m in merges], 1)
        c_b = torch.cat([m.c_b for m in merges], 1)
        word_i, word_f, word_c = torch.cat([m.z for m in merges], 1).view(dirs, -1, 3, hidden).unbind(2)
        self.forget = word_f
        # dc^w times these gives eq. 13's pre-activations' gradients.
        self.partner = torch.stack(
            [word_c * (word_i - word_i * word_i), c_b * (word_f - word_f * word_f), word_i * (1 - word_c * word_c)], 2
        )
        widths = [m.gate.shape[2] for m in merges]
        gate = torch.cat([m.gate for m in merges], 2)
        self.d_gate = (gate - gate * gate).split(widths, 2)  # per merge, D B K H


def lattice_recurrence(
    x: torch.Tensor,
    words: torch.Tensor,
    char_hidden: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    plan: Schedule,
) -> torch.Tensor:
    """h of every step (C, D, B, H): through `LatticeRecurrence` when a gradient
    is wanted, the forward pass alone (nothing kept) otherwise."""
    tensors = (x, words, char_hidden, word_hidden, word_gate)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        out = LatticeRecurrence.apply(*tensors, plan)
        assert isinstance(out, torch.Tensor)
        return out
    return recur(*tensors, plan, keep=False)[0]
