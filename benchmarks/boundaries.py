"""What a trained pipeline makes of hostile input, with and without its entity-boundary rules.

The inputs are those a new user tried (issue #24): a sentence repeated across full stops, names split by a
blank line, 120 emoji, an ASCII sentence, punctuation only. An entity a reader would reject has a line break,
a space or a sentence end inside it, or no letter, digit or Han character at all.

    python benchmarks/boundaries.py training/msra_news/model-best
"""

import argparse
import sys
from pathlib import Path
from typing import List, Tuple

import spacy

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, markdown_table

from spacy_flat.boundaries import LINE_BREAK, SENTENCE_END, SPACE, WORD, char_class

HOSTILE = [
    "重庆人和药店的老板张三在上海。",
    "重庆人和药店的老板张三在上海。" * 3,
    "张三\n\n李四",
    "张伟毕业于北京大学。李娜在上海工作。\n王芳加入了华为公司。",
    "😀" * 120,
    "Hello World from OpenAI and Google, a sentence in ASCII only.",
    "。，！？、；：“”（）《》…—",
]


def rejected(text: str) -> bool:
    kinds = {char_class(c) for c in text[1:-1]} | {char_class(text[0]), char_class(text[-1])}
    inside = {char_class(c) for c in text[1:-1]}
    return bool(inside & {LINE_BREAK, SPACE, SENTENCE_END}) or WORD not in kinds


def entities(nlp: spacy.Language, rules: bool) -> List[List[Tuple[str, str]]]:
    nlp.get_pipe("flat_ner").cfg["constrain_boundaries"] = rules
    return [[(e.text, e.label_) for e in doc.ents] for doc in nlp.pipe(HOSTILE)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    args = parser.parse_args()
    nlp = spacy.load(args.model)
    print(f"Machine: {machine()}\n\nPipeline: {args.model}\n")
    for line in nlp.get_pipe("flat_ner").boundary_rules.describe():
        print(f"- {line}")
    rows = []
    for text, free, ruled in zip(HOSTILE, entities(nlp, False), entities(nlp, True)):
        shown = text.replace("\n", "\\n") if len(text) < 40 else text[:36].replace("\n", "\\n") + "…"
        bad_free = [e for e in free if rejected(e[0])]
        bad_ruled = [e for e in ruled if rejected(e[0])]
        rows.append(
            [f"`{shown}`", f"{len(free)} ({len(bad_free)} rejected)", f"{len(ruled)} ({len(bad_ruled)} rejected)"]
        )
        for label, found in (("without rules", free), ("with rules", ruled)):
            print(f"{label:14} {shown}: {found[:8]}{' …' if len(found) > 8 else ''}")
    print()
    print(markdown_table(["input", "entities without rules", "entities with rules"], rows))


if __name__ == "__main__":
    main()
