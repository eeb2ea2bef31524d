"""The Lattice LSTM's recurrence (spacy_flat/nn/lattice_lstm.py) as one autograd
function, with its backward pass (back-propagation through time) written by hand.

Each character is some thirty small operations on (directions, rows, hidden)
blocks. Autograd records every one of them and replays their backward one by one,
and over a recurrence of a few dozen such steps that per-operation cost, not the
arithmetic, sets the training speed. Here the forward pass records nothing: it
writes each step's states into preallocated buffers and keeps what the backward
needs. The backward walks the steps once in reverse with a dozen operations a
step; whatever does not depend on the recurrence (the gates' derivatives and what
each word makes of its row's gradient before the loop, the weights' and the
inputs' gradients after it) is computed for all steps at once.

The layout: step j reads x[j] (C, D, B, 5H: i, o, f, c̃ and the word gate's
character term per direction; 4H without f when the forget gate is coupled, f = 1 - i)
and the word terms `words` (D * N_w, 3H: i, f, c̃); the states of step j are h[j]
and c[j] (C, D, B, H), flattened to rows
(j * D + d) * B + b when a word's first character reads them. The words merged at
a step are packed per direction (N_j each, the most of the two; padding words sum
into a row of their own), and eq. 15 and 16 are sums over each row's words:

    c^c_j = (e^{i^c_j} ⊙ c̃^c_j + Σ_b e^{i^c_bj} ⊙ c^w_bj) / (e^{i^c_j} + Σ_b e^{i^c_bj})

(the gates are sigmoids, so the exponentials need no shift).
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from .lattice_lstm_schedule import Schedule


class Merge(NamedTuple):
    """What the backward needs of a step where words end, per packed word (D, N_j, .)."""

    h_b: torch.Tensor  # the states of the word's first character
    c_b: torch.Tensor
    z: torch.Tensor  # i^w, f^w, c̃^w (eq. 13)
    cells: torch.Tensor  # c^w
    gate: torch.Tensor  # i^c_bj (eq. 14)
    weight: torch.Tensor  # e^{i^c_bj}


def recur(
    x: torch.Tensor,
    words: torch.Tensor,
    char_hidden: torch.Tensor,
    word_hidden: torch.Tensor,
    word_gate: torch.Tensor,
    plan: Schedule,
    keep: bool,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, List[Merge]]:
    """Run the recurrence without recording it.

    RETURNS (tuple): h and c of every step (C, D, B, H), tanh(c), the character
        gates' activations (C, D, B, G, H: i, o, f, c̃; i, o, c̃ when the forget gate
        is coupled), the merged cells (C, D, B, H; 0 at steps where no word ends),
        eq. 16's and 15's sums (C, D * B + 1, 2, H: the denominator, then the
        numerator; 1 at steps where no word ends; row D * B: padding words') and,
        if `keep`, each merge.
    """
    steps, dirs, batch, _ = x.shape
    hidden = char_hidden.shape[1]
    n_gates = char_hidden.shape[2] // hidden
    coupled = n_gates == 3
    # h and c of every step in one buffer: a word's first character is read in one gather.
    states = x.new_empty(2, steps, dirs, batch, hidden)
    hs, cs = states.unbind(0)
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
    f_s = () if coupled else acts[:, :, :, 2].unbind(0)  # coupled: f = 1 - i, in the loop
    c_s, h_s = cs.unbind(0), hs.unbind(0)
    tanh_s, merged_s = tanh_c.unbind(0), merged.unbind(0)
    own_s, own_weighted_s = (t.view(steps, dirs, batch, hidden).unbind(0) for t in sums[:, :-1].unbind(2))
    sums_s, state_rows = sums.unbind(0), states.view(2, -1, hidden)
    ends = plan.merges.bool().unbind(0)
    # Each word's terms and its character's gate term, gathered for all steps at once (D, P_d, .)
    # and split by step; padding words read the first rows.
    packed = [n for n in plan.packed if n]
    word_terms = words.index_select(0, plan.word_by_direction).view(dirs, -1, words.shape[1]).split(packed, 1)
    target = plan.target_by_direction.clamp(max=steps * dirs * batch - 1)
    gate_terms = x.reshape(-1, x.shape[-1])[:, n_gates * hidden :].index_select(0, target)
    gate_terms = gate_terms.view(dirs, -1, hidden).split(packed, 1)
    h = c = x.new_zeros(dirs, batch, hidden)
    kept: List[Merge] = []
    k = 0
    for j in range(steps):
        torch.baddbmm(x_char[j], h, char_hidden, out=gates[j])
        sigmoids[j].sigmoid_()
        candidates[j].tanh_()
        if coupled:  # (1 - i) ⊙ c + i ⊙ c̃
            c = torch.addcmul(c, i_s[j], torch.sub(g_s[j], c), out=c_s[j])
        else:
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
    return hs, cs, tanh_c, acts, merged, sums, kept


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
        hs, *kept = recur(x, words, char_hidden, word_hidden, word_gate, plan, keep=True)
        ctx.save_for_backward(hs, char_hidden, word_hidden, word_gate)
        ctx.kept = (*kept, plan, words.shape[0])
        return hs

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        hs, char_hidden, word_hidden, word_gate = ctx.saved_tensors
        cs, tanh_c, acts, merged, sums, merges, plan, n_words = ctx.kept
        steps, dirs, batch, hidden = hs.shape
        inverse = sums[:, :-1, 0].reciprocal().view(steps, dirs, batch, hidden)  # eq. 16's 1 / Σ
        i, o, g = acts[:, :, :, 0], acts[:, :, :, 1], acts[:, :, :, -1]
        coupled = acts.shape[3] == 3  # the released code's cell: f = 1 - i
        f = 1 - i if coupled else acts[:, :, :, 2]
        plain = 1 - plan.merges
        alpha = plan.merges * torch.exp(i) * inverse  # α^c_j (eq. 16) where words end, 0 elsewhere
        d_i, d_o, d_f = i - i * i, o - o * o, f - f * f  # the sigmoids' derivatives
        c_prev = torch.cat([torch.zeros_like(cs[:1]), cs[:-1]])
        # Per step, a pre-activation's gradient is dc times its partner (o's: dh times out_gate);
        # a coupled forget gate passes its gradient to i, with the opposite sign.
        into_i = ((g - c_prev if coupled else g) * plain + alpha * (g - merged)) * d_i
        candidate = (i * plain + alpha) * (1 - g * g)
        forget_term = [] if coupled else [c_prev * plain * d_f]
        partner = torch.stack([into_i, d_o, *forget_term, candidate], 3)
        words = _Words(merges, plan.merges * inverse, merged, plan) if merges else None
        # dh and dc in one buffer: a merge's gradients reach its words' first characters in one sum.
        grads = hs.new_zeros(2, steps, dirs, batch, hidden)
        dh, dc = grads.unbind(0)
        dh.copy_(grad)
        dpre = torch.empty_like(acts)
        # Each step's views, made in a few calls (as in `recur`).
        dh_s, dc_s, partner_s, dpre_s = dh.unbind(0), dc.unbind(0), partner.unbind(0), dpre.unbind(0)
        d_out_s, d_flat = dpre[:, :, :, 1].unbind(0), dpre.view(steps, dirs, batch, -1).unbind(0)
        out_gate, cell_of_h = (tanh_c * d_o).unbind(0), (o * (1 - tanh_c * tanh_c)).unbind(0)
        forget = (f * plain).unbind(0)
        char_back, word_back, gate_back = (w.transpose(1, 2) for w in (char_hidden, word_hidden, word_gate))
        grad_rows, dc_rows = grads.view(2, -1, hidden), dc.view(-1, hidden)
        targets = plan.target.split(plan.sizes)
        k = len(merges)
        d_terms: List[torch.Tensor] = []
        d_gates: List[torch.Tensor] = []
        for j in range(steps - 1, -1, -1):
            dc_j = dc_s[j].addcmul_(dh_s[j], cell_of_h[j])
            torch.mul(partner_s[j], dc_j.unsqueeze(2), out=dpre_s[j])
            torch.mul(dh_s[j], out_gate[j], out=d_out_s[j])
            if plan.packed[j] and words is not None:
                k -= 1
                n = plan.packed[j]
                # dc of the row each word merges into, times what eq. 14 to 16 make of it.
                d_gate, direct = (words.by_row[k] * dc_rows.index_select(0, targets[k]).view(dirs, 1, n, -1)).unbind(1)
                d_cells = torch.baddbmm(direct, d_gate, gate_back)
                d_term = words.by_cell[k] * d_cells.unsqueeze(2)  # eq. 13's pre-activations
                d_first = d_cells.new_empty(2, dirs, n, hidden)  # dh and dc of the words' first characters
                torch.bmm(d_term.view(dirs, n, -1), word_back, out=d_first[0])
                torch.mul(d_cells, words.forget[k], out=d_first[1])
                grad_rows.index_add_(1, plan.state[k], d_first.view(2, -1, hidden))
                d_terms.append(d_term)
                d_gates.append(d_gate)
            if j:
                dc_s[j - 1].addcmul_(dc_j, forget[j])
                dh_s[j - 1].baddbmm_(d_flat[j], char_back)
        d_chars = dpre.view(steps, dirs, batch, -1)
        h_prev = torch.cat([torch.zeros_like(hs[:1]), hs[:-1]])
        d_char_hidden = torch.einsum("jdbh,jdbk->dhk", h_prev, d_chars)
        d_words = hs.new_zeros(n_words, 3 * hidden)
        d_char_gate = hs.new_zeros(steps * dirs * batch + 1, hidden)
        d_word_hidden, d_word_gate = torch.zeros_like(word_hidden), torch.zeros_like(word_gate)
        if words is not None:
            d_term = torch.cat(d_terms[::-1], 1).view(dirs, -1, 3 * hidden)
            d_gate = torch.cat(d_gates[::-1], 1)  # D, P_d, .
            d_word_hidden = torch.bmm(words.h_b.transpose(1, 2), d_term)
            d_word_gate = torch.bmm(words.cells.transpose(1, 2), d_gate)
            d_words.index_add_(0, plan.word_by_direction, d_term.reshape(-1, 3 * hidden))
            d_char_gate.index_add_(0, plan.target_by_direction, d_gate.reshape(-1, hidden))
        d_x = torch.cat([d_chars, d_char_gate[:-1].view(steps, dirs, batch, hidden)], -1)
        return d_x, d_words, d_char_hidden, d_word_hidden, d_word_gate, None


class _Words:
    """The merges' packed words side by side (D, P_d, .), ordered by step, and, split
    by step, what dc of the row a word merges into is multiplied by in the backward:
    `by_row` (D, 2, n, H) gives the gradients of eq. 14's pre-activation and of c^w
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
        self.by_row = torch.stack([d_gate, row_share * weight], 1).split(sizes, 2)
        by_cell = [
            word_c * (word_i - word_i * word_i),
            c_b * (word_f - word_f * word_f),
            word_i * (1 - word_c * word_c),
        ]
        self.by_cell = torch.stack(by_cell, 2).split(sizes, 1)
        self.forget = word_f.split(sizes, 1)


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
