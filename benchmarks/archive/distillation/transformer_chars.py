"""A character table from a BERT-style model's input embeddings, as a word2vec text file.

The single-character entries of the model's vocabulary, each with its row of the input
(word-piece) embedding matrix: a static table that `spacy-flat.word2vec_char_vectors.v1`
reads as a model's character vectors, so a model without a transformer starts from
the transformer's own view of each character.

    python benchmarks/transformer_chars.py ../shared/vectors/m3e-small training/pretrain/m3e-chars.vec

Prints how many characters were written and how many of them are Han characters.
"""

import argparse
import json
from pathlib import Path
from typing import Dict

import torch


def vocabulary(model: Path) -> Dict[str, int]:
    """Token to row: tokenizer.json's vocabulary, or vocab.txt's lines."""
    if (model / "tokenizer.json").exists():
        return dict(json.loads((model / "tokenizer.json").read_text(encoding="utf8"))["model"]["vocab"])
    lines = (model / "vocab.txt").read_text(encoding="utf8").splitlines()
    return {token: row for row, token in enumerate(lines)}


def input_embeddings(model: Path) -> torch.Tensor:
    """The word-piece embedding matrix of pytorch_model.bin (with or without a `bert.` prefix)."""
    weights = torch.load(model / "pytorch_model.bin", map_location="cpu", weights_only=True)
    for key, value in weights.items():
        if key.endswith("embeddings.word_embeddings.weight"):
            return value.float()
    raise SystemExit(f"{model}/pytorch_model.bin has no embeddings.word_embeddings.weight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, help="a directory with pytorch_model.bin and its tokenizer")
    parser.add_argument("output", type=Path, help="the word2vec text file to write")
    args = parser.parse_args()
    table = input_embeddings(args.model)
    chars = sorted(
        (token, row) for token, row in vocabulary(args.model).items() if len(token) == 1 and not token.isspace()
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", encoding="utf8") as out:
        out.write(f"{len(chars)} {table.shape[1]}\n")
        for token, row in chars:
            out.write(token + " " + " ".join(f"{x:.6f}" for x in table[row].tolist()) + "\n")
    han = sum(1 for token, _ in chars if "\u4e00" <= token <= "\u9fff")
    print(f"{args.output}: {len(chars):,} characters ({han:,} Han), width {table.shape[1]}")


if __name__ == "__main__":
    main()
