"""The Lattice LSTM's back-propagation through time, written by hand: the
backward pass of `LatticeRecurrence` (lattice_lstm_recurrence.py).

It walks the steps once in reverse with a dozen operations a step. Whatever does
not depend on the recurrence is computed for all steps at once: the gates'
derivatives and what each word makes of its row's gradient before the loop
(`_Words`), the weights' and the inputs' gradients after it.
"""

from __future__ import annotations

from typing import List, NamedTuple, Tuple

import torch

from .schedule import Schedule


class Merge(NamedTuple):
    """What the backward needs of a step where words end, per packed word (D, N_j, .)."""

    h_b: torch.Tensor  # the states of the word's first character
    c_b: torch.Tensor
    z: torch.Tensor  # i^w, f^w, c̃^w (eq. 13)
    cells: torch.Tensor  # c^w
    gate: torch.Tensor  # i^c_bj (eq. 14)
    weight: torch.Tensor  # e^{i^c_bj}


def through_time(
    grad: torch.Tensor,
    d_words: torch.Tensor,
    char_hidden: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    states: torch.Tensor,
    tanh_c: torch.Tensor,
    acts: torch.Tensor,
    merged: torch.Tensor,
    sums: torch.Tensor,
    merges: List[Merge],
    plan: Schedule,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of x (C, D, B, 5H, in reading order) and of the three recurrent
    weights, given that of h in the rows' order (`grad`, B, C, D * H) and what the
    forward pass kept; the word terms' added to `d_words` (N_w, D * 3H, zeros)."""
    steps, dirs, batch, hidden = tanh_c.shape
    h_prev, c_prev = states[:, :-1].unbind(0)  # each step's previous state (`recur`)
    n_gates = acts.shape[3]
    inverse = sums[:, :-1, 0].reciprocal().view(steps, dirs, batch, hidden)  # eq. 16's 1 / Σ
    i, o, g = acts[:, :, :, 0], acts[:, :, :, 1], acts[:, :, :, -1]
    f = acts[:, :, :, 2]
    plain = 1 - plan.merges
    alpha = plan.merges * torch.exp(i) * inverse  # α^c_j (eq. 16) where words end, 0 elsewhere
    d_i, d_o, d_f = i - i * i, o - o * o, f - f * f  # the sigmoids' derivatives
    # Per step, a pre-activation's gradient is dc times its partner (o's: dh times out_gate).
    into_i = (g * plain + alpha * (g - merged)) * d_i
    candidate = (i * plain + alpha) * (1 - g * g)
    partner = torch.stack([into_i, d_o, c_prev * plain * d_f, candidate], 3)
    words = _Words(merges, plan.merges * inverse, merged, plan) if merges else None
    # dh and dc in one buffer: a merge's gradients reach its words' first characters in one sum.
    grads = acts.new_zeros(2, steps + 1, dirs, batch, hidden)  # laid out as `states`
    dh, dc = grads[:, 1:].unbind(0)
    dh.view(-1, hidden).index_copy_(0, plan.written, grad.reshape(-1, hidden))
    d_x = acts.new_empty(steps, dirs, batch, (n_gates + 1) * hidden)
    dpre = d_x[..., : n_gates * hidden].view(steps, dirs, batch, n_gates, hidden)
    # Each step's views, made in a few calls (as in `recur`).
    dh_s, dc_s, partner_s, dpre_s = dh.unbind(0), dc.unbind(0), partner.unbind(0), dpre.unbind(0)
    d_out_s, d_flat = dpre[:, :, :, 1].unbind(0), dpre.view(steps, dirs, batch, -1).unbind(0)
    out_gate, cell_of_h = (tanh_c * d_o).unbind(0), (o * (1 - tanh_c * tanh_c)).unbind(0)
    forget = (f * plain).unbind(0)
    char_back, word_back, gate_back = (w.transpose(1, 2) for w in (char_hidden, word_hidden, word_gate))
    grad_rows, dc_rows, dc_wide = grads.view(2, -1, hidden), dc.view(-1, hidden), dc.unsqueeze(3).unbind(0)
    targets, firsts, packed = plan.target.split(plan.sizes), plan.state, plan.packed
    # The gradients of eq. 14's pre-activations and of c^w through eq. 15 (2, D, P_d, H), and
    # of eq. 13's (D, P_d, 3, H), for all words, written a step's words at a time.
    sizes = [n for n in packed if n]
    by_rows = acts.new_empty(2, dirs, sum(sizes), hidden)
    d_term = acts.new_empty(dirs, sum(sizes), 3, hidden)
    by_rows_s, d_term_s = by_rows.split(sizes, 2), d_term.split(sizes, 1)
    k = len(merges)
    for j in range(steps - 1, -1, -1):
        dc_j = dc_s[j].addcmul_(dh_s[j], cell_of_h[j])
        torch.mul(partner_s[j], dc_wide[j], out=dpre_s[j])
        torch.mul(dh_s[j], out_gate[j], out=d_out_s[j])
        n = packed[j]
        if n and words is not None:
            k -= 1
            # dc of the row each word merges into, times what eq. 14 to 16 make of it.
            rows = dc_rows.index_select(0, targets[k]).view(1, dirs, n, hidden)
            d_gate, direct = torch.mul(words.by_row[k], rows, out=by_rows_s[k]).unbind(0)
            d_cells = torch.baddbmm(direct, d_gate, gate_back)
            # eq. 13's pre-activations, then dh and dc of the words' first characters
            d_term_k = torch.mul(words.by_cell[k], d_cells.unsqueeze(2), out=d_term_s[k])
            d_first = d_cells.new_empty(2, dirs, n, hidden)
            torch.bmm(d_term_k.view(dirs, n, -1), word_back, out=d_first[0])
            torch.mul(d_cells, words.forget[k], out=d_first[1])
            grad_rows.index_add_(1, firsts[k], d_first.view(2, -1, hidden))
        if j:
            dc_s[j - 1].addcmul_(dc_j, forget[j])
            dh_s[j - 1].baddbmm_(d_flat[j], char_back)
    d_chars = d_x[..., : n_gates * hidden]
    d_char_hidden = torch.einsum("jdbh,jdbk->dhk", h_prev, d_chars)
    # The characters' part of the word gates (eq. 14): padding words' gradients are
    # zeros, so they may add into any row.
    d_char_gate = d_x.view(-1, d_x.shape[-1])[:, n_gates * hidden :].zero_()
    d_word_hidden, d_word_gate = torch.zeros_like(word_hidden), torch.zeros_like(word_gate)
    if words is not None:
        d_terms, d_gates = d_term.view(dirs, -1, 3 * hidden), by_rows[0]  # (D, P_d, .)
        d_word_hidden = torch.bmm(words.h_b.transpose(1, 2), d_terms)
        d_word_gate = torch.bmm(words.cells.transpose(1, 2), d_gates)
        d_words.view(-1, 3 * hidden).index_add_(0, plan.word_by_direction, d_terms.reshape(-1, 3 * hidden))
        target = plan.target_by_direction.clamp(max=steps * dirs * batch - 1)
        d_char_gate.index_add_(0, target, d_gates.reshape(-1, hidden))
    return d_x, d_char_hidden, d_word_hidden, d_word_gate


class _Words:
    """The merges' packed words side by side (D, P_d, .), ordered by step, and, split
    by step, what dc of the row a word merges into is multiplied by in the backward:
    `by_row` (2, D, n, H) gives the gradients of eq. 14's pre-activation and of c^w
    through eq. 15; `by_cell` (D, n, 3, H), times dc^w, those of eq. 13's three
    pre-activations, and `forget` (D, n, H) that of c^c_b. Computed for all words at
    once, before the loop."""

    def __init__(self, merges: List[Merge], share: torch.Tensor, merged: torch.Tensor, plan: Schedule) -> None:
        dirs, hidden = share.shape[1], share.shape[-1]
        self.h_b = torch.cat([m.h_b for m in merges], 1)
        self.cells = torch.cat([m.cells for m in merges], 1)
        c_b, gate, weight = (torch.cat(parts, 1) for parts in zip(*((m.c_b, m.gate, m.weight) for m in merges)))
        word_i, word_f, word_c = torch.cat([m.z for m in merges], 1).view(dirs, -1, 3, hidden).unbind(2)
        sizes = [m.h_b.shape[1] for m in merges]
        # Each word's row: 1 / Σ of eq. 16 and its product with the merged cell; padding words
        # read the last row, zero, so every product for them is zero.
        rows = torch.stack([share, share * merged], 3).view(-1, 2, hidden)
        rows = torch.cat([rows, rows.new_zeros(1, 2, hidden)]).index_select(0, plan.target_by_direction)
        row_share, row_mixed = rows.view(dirs, -1, 2, hidden).unbind(2)
        # dc times: d e^{i^c_bj} = share ⊙ (c^w - merged), through e^x and σ to eq. 14's
        # pre-activation; and c^w's own share, e^{i^c_bj} ⊙ share (eq. 15).
        d_gate = (row_share * self.cells - row_mixed) * weight * (gate - gate * gate)
        self.by_row = torch.stack([d_gate, row_share * weight]).split(sizes, 2)
        by_cell = [
            word_c * (word_i - word_i * word_i),
            c_b * (word_f - word_f * word_f),
            word_i * (1 - word_c * word_c),
        ]
        self.by_cell = torch.stack(by_cell, 2).split(sizes, 1)
        self.forget = word_f.split(sizes, 1)
