"""What a trained pipeline makes of hostile input, with and without its entity-boundary rules.

The inputs are those a new user would try: a sentence repeated across full stops, names split by a
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
sys.path.insert(0, str(Path(__file__).parent.parent))
from common import machine, markdown_table

# The same inputs and the same verdict as the tests.
from tests.decoding.test_boundaries import HOSTILE, entity_ok


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
        bad_free = [e for e in free if not entity_ok(e[0])]
        bad_ruled = [e for e in ruled if not entity_ok(e[0])]
        rows.append(
            [f"`{shown}`", f"{len(free)} ({len(bad_free)} rejected)", f"{len(ruled)} ({len(bad_ruled)} rejected)"]
        )
        for label, found in (("without rules", free), ("with rules", ruled)):
            print(f"{label:14} {shown}: {found[:8]}{' …' if len(found) > 8 else ''}")
    print()
    print(markdown_table(["input", "entities without rules", "entities with rules"], rows))


if __name__ == "__main__":
    main()
