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
    The rest per step where words end, in order:
    slot (List[torch.Tensor]): (D * B * K_j,) int64, per slot of a row, its word's
        place (d * N_j + n) among the step's packed words; 0 in padding (weight 0).
    state (List[torch.Tensor]): (D * N_j,) int64, per packed word, the state row of its first character.
    word (List[torch.Tensor]): (D * N_j,) int64, per packed word, its row in the word terms (D * N_w).
    penalty (List[torch.Tensor]): (D, B, 1 + K_j, 1), 0 for the character's own
        gate and its words, -inf for padding.
    And:
    word_by_direction (P,) int64: `word`, ordered by direction, then step.
    merges (C, D, B, 1): 1.0 where words end (eq. 15), 0.0 where the plain LSTM cell holds.
    """

    widths: List[int]
    packed: List[int]
    slot: List[torch.Tensor]
    state: List[torch.Tensor]
    word: List[torch.Tensor]
    penalty: List[torch.Tensor]
    word_by_direction: torch.Tensor
    merges: torch.Tensor


class Merge(NamedTuple):
    """What the backward needs of a step where words end: per packed word (D, N, .)
    its first character's states, its gates and cell; per row slot (D, B, 1 + K, H)
    the softmax's weights (eq. 16, 0 in rows where no word ends) and weighted terms
    (eq. 15)."""

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
        gates' activations (C, D, B, 4, H: i, o, f, c̃) and, if `keep`, each merge.
    """
    steps, dirs, batch, _ = x.shape
    hidden = char_hidden.shape[1]
    hs = x.new_empty(steps, dirs, batch, hidden)
    cs, tanh_c = torch.empty_like(hs), torch.empty_like(hs)
    acts = x.new_empty(steps, dirs, batch, 4, hidden)
    # Each step's views, made in a few calls: indexing in the loop costs as much as a small operation.
    x_char, x_gate = (t.unbind(0) for t in x.split([4 * hidden, hidden], -1))
    gates = acts.view(steps, dirs, batch, -1).unbind(0)
    sigmoids, candidates = acts[:, :, :, :3].unbind(0), acts[:, :, :, 3].unbind(0)
    i_s, o_s, f_s, g_s = (t.unbind(0) for t in acts.unbind(3))
    h_s, c_s, tanh_s, plain = hs.unbind(0), cs.unbind(0), tanh_c.unbind(0), (1 - plan.merges).unbind(0)
    h = c = x.new_zeros(dirs, batch, hidden)
    merges: List[Merge] = []
    k = 0
    for j in range(steps):
        torch.baddbmm(x_char[j], h, char_hidden, out=gates[j])
        sigmoids[j].sigmoid_()
        candidates[j].tanh_()
        c = torch.mul(f_s[j], c, out=c_s[j]).addcmul_(i_s[j], g_s[j])
        if plan.widths[j]:
            merge = _merge(j, k, i_s[j], g_s[j], x_gate[j], words, hs, cs, word_hidden, word_gate, plan)
            c.mul_(plain[j]).add_(merge.terms.sum(2))
            if keep:
                merges.append(merge)
            k += 1
        h = torch.mul(o_s[j], torch.tanh(c, out=tanh_s[j]), out=h_s[j])
    return hs, cs, tanh_c, acts, merges


def _merge(
    j: int,
    k: int,
    i: torch.Tensor,
    g: torch.Tensor,
    x_gate: torch.Tensor,
    words: torch.Tensor,
    hs: torch.Tensor,
    cs: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    plan: Schedule,
) -> Merge:
    """Eq. 13, 14 and 16 at step j (the k-th where words end), the words' first
    characters read from the state buffers."""
    dirs, batch, hidden = x_gate.shape
    width, n, state = plan.widths[j], plan.packed[j], plan.state[k]
    h_b = hs.view(-1, hidden).index_select(0, state).view(dirs, n, hidden)
    c_b = cs.view(-1, hidden).index_select(0, state).view(dirs, n, hidden)
    z = torch.baddbmm(words.index_select(0, plan.word[k]).view(dirs, n, 3 * hidden), h_b, word_hidden)
    z[..., : 2 * hidden].sigmoid_()
    z[..., 2 * hidden :].tanh_()
    word_i, word_f, word_c = z.view(dirs, n, 3, hidden).unbind(2)
    cells = (word_f * c_b).addcmul_(word_i, word_c)  # c^w_bj, eq. 13
    # W^l's c^w half and the cells, from the packed words to the rows' slots.
    both = torch.cat([torch.bmm(cells, word_gate), cells], -1).view(-1, 2 * hidden)
    by_row = both.index_select(0, plan.slot[k]).view(dirs, batch, width, 2 * hidden)
    gate = (by_row[..., :hidden] + x_gate.unsqueeze(2)).sigmoid_()  # i^c_bj, eq. 14
    scores = torch.cat([i.unsqueeze(2), gate], 2).add_(plan.penalty[k])
    alpha = torch.softmax(scores, 2).mul_(plan.merges[j].unsqueeze(2))  # eq. 16, 0 where no word ends
    terms = alpha * torch.cat([g.unsqueeze(2), by_row[..., hidden:]], 2)  # eq. 15's terms
    return Merge(h_b, c_b, z, cells, gate, alpha, terms)


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
        i, o, f, g = acts.unbind(3)
        plain = 1 - plan.merges
        merging = [j for j, width in enumerate(plan.widths) if width]
        alpha_c = torch.zeros_like(hs)  # α^c_j where words end (eq. 15), 0 elsewhere
        for j, merge in zip(merging, merges):
            alpha_c[j] = merge.alpha[:, :, 0]
        d_i, d_o, d_f = i - i * i, o - o * o, f - f * f  # the sigmoids' derivatives
        c_prev = torch.cat([torch.zeros_like(cs[:1]), cs[:-1]])
        # Per step, a pre-activation's gradient is dc times its partner (o's: dh times out_gate).
        partner = torch.stack([g * plain * d_i, d_o, c_prev * plain * d_f, (i * plain + alpha_c) * (1 - g * g)], 3)
        words = _Words(merges, dirs, hidden) if merges else None
        dh, dc = grad.contiguous().clone(), torch.zeros_like(hs)
        dpre = hs.new_empty(steps, dirs, batch, 4, hidden)
        d_char_gate = torch.zeros_like(hs)
        # Each step's views, made in a few calls (as in `recur`).
        dh_s, dc_s, d_gates_s, d_i_s = dh.unbind(0), dc.unbind(0), d_char_gate.unbind(0), d_i.unbind(0)
        partner_s, dpre_s, d_out_s = partner.unbind(0), dpre.unbind(0), dpre[:, :, :, 1].unbind(0)
        d_flat = dpre.view(steps, dirs, batch, -1).unbind(0)
        out_gate, cell_of_h = (tanh_c * d_o).unbind(0), (o * (1 - tanh_c * tanh_c)).unbind(0)
        forget = (f * plain).unbind(0)
        char_back, word_back, gate_back = (w.transpose(1, 2) for w in (char_hidden, word_hidden, word_gate))
        k = len(merges)
        d_terms: List[torch.Tensor] = []
        d_gates: List[torch.Tensor] = []
        for j in range(steps - 1, -1, -1):
            dc_j = dc_s[j].addcmul_(dh_s[j], cell_of_h[j])
            dp = torch.mul(partner_s[j], dc_j.unsqueeze(2), out=dpre_s[j])
            torch.mul(dh_s[j], out_gate[j], out=d_out_s[j])
            if plan.widths[j] and words is not None:
                k -= 1
                m, n, dc_up = merges[k], plan.packed[j], dc_j.unsqueeze(2)
                s = m.terms * dc_up
                d_scores = torch.addcmul(s, m.alpha, s.sum(2, keepdim=True), value=-1)  # softmax
                dp[:, :, 0].addcmul_(d_scores[:, :, 0], d_i_s[j])
                d_gate = d_scores[:, :, 1:] * words.d_gate[k]
                torch.sum(d_gate, 2, out=d_gates_s[j])
                d_by_row = torch.cat([d_gate, m.alpha[:, :, 1:] * dc_up], -1).view(-1, 2 * hidden)
                d_both = hs.new_zeros(dirs * n, 2 * hidden).index_add_(0, plan.slot[k], d_by_row).view(dirs, n, -1)
                d_cells = torch.baddbmm(d_both[..., hidden:], d_both[..., :hidden], gate_back)
                d_z = d_cells.unsqueeze(2) * words.partner[k]
                d_h_b = torch.bmm(d_z.view(dirs, n, 3 * hidden), word_back)
                dh.view(-1, hidden).index_add_(0, plan.state[k], d_h_b.view(-1, hidden))
                dc.view(-1, hidden).index_add_(0, plan.state[k], (d_cells * words.forget[k]).view(-1, hidden))
                d_terms.append(d_z.view(dirs, n, 3 * hidden))
                d_gates.append(d_both[..., :hidden])
            if j:
                dc_s[j - 1].addcmul_(dc_j, forget[j])
                dh_s[j - 1].baddbmm_(d_flat[j], char_back)
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
    derivatives of eq. 13 and 14 for all of them at once, split by merge."""

    def __init__(self, merges: List[Merge], dirs: int, hidden: int) -> None:
        self.h_b = torch.cat([m.h_b for m in merges], 1)
        self.cells = torch.cat([m.cells for m in merges], 1)
        c_b = torch.cat([m.c_b for m in merges], 1)
        word_i, word_f, word_c = torch.cat([m.z for m in merges], 1).view(dirs, -1, 3, hidden).unbind(2)
        sizes = [m.h_b.shape[1] for m in merges]
        self.forget = word_f.split(sizes, 1)
        # dc^w times these gives eq. 13's pre-activations' gradients.
        partner = [
            word_c * (word_i - word_i * word_i),
            c_b * (word_f - word_f * word_f),
            word_i * (1 - word_c * word_c),
        ]
        self.partner = torch.stack(partner, 2).split(sizes, 1)
        gate = torch.cat([m.gate for m in merges], 2)
        self.d_gate = (gate - gate * gate).split([m.gate.shape[2] for m in merges], 2)  # per merge, D B K H


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
