"""A stand-in for the released Lattice LSTM's training loop (Zhang and Yang 2018), to time against.

The released code (github.com/jiesutd/LatticeLSTM, `model/latticelstm.py`, written for PyTorch 0.3)
cannot run on today's PyTorch, so its shape is re-created here with the same sizes as
configs/<dataset>_lattice_lstm.cfg, written from the paper's equations and the released code's
control flow, not copied from it:

- one sentence a step (its `LatticeLSTM.forward` asserts a batch of one), an SGD update per sentence;
- the two directions run one after the other, each a Python loop over the characters;
- at each character, one call of the character cell with a Python list of the word cells that end
  there (eq. 11, 14-16: an LSTM cell alone where none ends, else the normalised gates over the
  character's candidate and the word cells);
- at each character where lexicon words start, one batched word cell over those words (eq. 13),
  whose cells are appended to the lists of the characters where the words end;
- dropout 0.5 on the embeddings and the LSTM's output, a linear layer to the tags and a CRF
  (pytorch-crf, the family's CRF, in place of the released code's own).

It computes what the released model computes, so its speed is the released design's speed on
today's PyTorch; the released code itself, on PyTorch 0.3 and Python 2, is not measured. The released
training loop also Viterbi-decodes every sentence (for the accuracy it prints); that is left out
here, so the stand-in is, if anything, faster than the loop it stands for.
"""

import time
from typing import Dict, List, Sequence, Tuple

import torch
from torch import nn
from torchcrf import CRF

# One sentence: character ids, and per character the (word id, length) of the words starting there.
Sentence = Tuple[List[int], List[List[Tuple[int, int]]]]


class WordCell(nn.Module):
    """Eq. 13: a word's cell from its embedding and the state of its first character."""

    def __init__(self, word_width: int, hidden: int) -> None:
        super().__init__()
        self.input = nn.Linear(word_width, 3 * hidden)
        self.hidden = nn.Linear(hidden, 3 * hidden, bias=False)

    def forward(self, words: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        i, f, g = (self.input(words) + self.hidden(h)).chunk(3, dim=1)
        return torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)


class CharCell(nn.Module):
    """Eq. 11, 14-16: the character cell, merging the cells of the words that end here."""

    def __init__(self, char_width: int, hidden: int) -> None:
        super().__init__()
        self.input = nn.Linear(char_width, 3 * hidden)
        self.hidden = nn.Linear(hidden, 3 * hidden, bias=False)
        self.gate_input = nn.Linear(char_width, hidden)
        self.gate_cell = nn.Linear(hidden, hidden, bias=False)

    def forward(
        self, x: torch.Tensor, words: List[torch.Tensor], h: torch.Tensor, c: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        i, o, g = (self.input(x) + self.hidden(h)).chunk(3, dim=1)
        i, o, g = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(g)
        if not words:
            c = (1 - i) * c + i * g  # the released code couples the forget gate to the input gate
        else:
            cells = torch.cat(words, 0)
            gates = torch.sigmoid(self.gate_input(x) + self.gate_cell(cells))
            weights = torch.softmax(torch.cat([i, gates], 0), dim=0)
            c = (weights * torch.cat([g, cells], 0)).sum(0, keepdim=True)
        return o * torch.tanh(c), c


class Direction(nn.Module):
    """One direction of the lattice LSTM over one sentence, character by character."""

    def __init__(self, char_width: int, word_width: int, hidden: int, forward: bool) -> None:
        super().__init__()
        self.hidden_size = hidden
        self.forward_ = forward
        self.char_cell = CharCell(char_width, hidden)
        self.word_cell = WordCell(word_width, hidden)

    def forward(self, chars: torch.Tensor, words: List[List[Tuple[torch.Tensor, List[int]]]]) -> torch.Tensor:
        n = chars.shape[0]
        h = chars.new_zeros(1, self.hidden_size)
        c = chars.new_zeros(1, self.hidden_size)
        incoming: List[List[torch.Tensor]] = [[] for _ in range(n)]
        order = range(n) if self.forward_ else range(n - 1, -1, -1)
        out: List[torch.Tensor] = []
        for t in order:
            h, c = self.char_cell(chars[t : t + 1], incoming[t], h, c)
            out.append(h)
            if words[t]:
                embedded, lengths = words[t]
                cells = self.word_cell(embedded, h.expand(len(lengths), -1), c.expand(len(lengths), -1))
                for k, length in enumerate(lengths):
                    incoming[t + length - 1 if self.forward_ else t - length + 1].append(cells[k : k + 1])
        if not self.forward_:
            out.reverse()
        return torch.cat(out, 0)


class ReleasedLatticeLstm(nn.Module):
    """The released model's shape: embeddings, two lattice directions, dropout, linear, CRF."""

    def __init__(self, chars: int, words: int, tags: int, char_width: int, word_width: int, width: int) -> None:
        super().__init__()
        self.char_embed = nn.Embedding(chars, char_width)
        self.word_embed = nn.Embedding(words, word_width)
        self.dropout = nn.Dropout(0.5)
        self.directions = nn.ModuleList(
            [Direction(char_width, word_width, width // 2, forward) for forward in (True, False)]
        )
        self.output = nn.Linear(width, tags)
        self.crf = CRF(tags, batch_first=True)

    def loss(self, sentence: Sentence, tags: torch.Tensor) -> torch.Tensor:
        char_ids, starts = sentence
        device = self.output.weight.device
        chars = self.dropout(self.char_embed(torch.tensor(char_ids, device=device)))
        hidden = []
        for direction in self.directions:
            # The backward direction reads each word from its last character: the released code
            # rebuilds the word lists for it (`convert_forward_gaz_to_backward`) on every call.
            by_start = starts if direction.forward_ else _by_end(starts)
            words = [
                (self.dropout(self.word_embed(torch.tensor([w for w, _ in here], device=device))), [n for _, n in here])
                if here
                else []
                for here in by_start
            ]
            hidden.append(direction(chars, words))  # type: ignore[arg-type]
        emissions = self.output(self.dropout(torch.cat(hidden, 1)))
        return -self.crf(emissions.unsqueeze(0), tags.unsqueeze(0))


def _by_end(starts: List[List[Tuple[int, int]]]) -> List[List[Tuple[int, int]]]:
    ends: List[List[Tuple[int, int]]] = [[] for _ in starts]
    for head, here in enumerate(starts):
        for word, length in here:
            ends[head + length - 1].append((word, length))
    return ends


def sentences_of(
    texts: Sequence[str], matches: Sequence[Sequence[Tuple[int, int, int]]]
) -> Tuple[List[Sentence], int, int]:
    """The released model's inputs from texts and their lexicon matches (head, tail, row):
    words of two or more characters, as the paper's lattice; ids re-numbered densely.

    RETURNS (Tuple[List[Sentence], int, int]): The sentences, the numbers of character and word ids.
    """
    char_ids: Dict[str, int] = {}
    word_ids: Dict[int, int] = {}
    out: List[Sentence] = []
    for text, found in zip(texts, matches):
        starts: List[List[Tuple[int, int]]] = [[] for _ in text]
        for head, tail, row in found:
            if tail > head:
                starts[head].append((word_ids.setdefault(row, len(word_ids)), tail - head + 1))
        out.append(([char_ids.setdefault(ch, len(char_ids)) for ch in text], starts))
    return out, len(char_ids), max(1, len(word_ids))


def train_rate(model: ReleasedLatticeLstm, sentences: Sequence[Sentence], tags: Sequence[torch.Tensor]) -> float:
    """Sentences per second of training one sentence a step with SGD, as the released code does
    (on the model's device; a GPU's queue is drained before the clock stops)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.015)
    model.train()
    device = model.output.weight.device
    tags = [gold.to(device) for gold in tags]
    start = time.perf_counter()
    for sentence, gold in zip(sentences, tags):
        optimizer.zero_grad()
        loss = model.loss(sentence, gold)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return len(sentences) / (time.perf_counter() - start)
