"""MSRA's name lists: test F1 inside and outside the sentences where person names touch.

MSRA's files hold one character a line, so the spaces that separated the names of a list
are gone and a list of people is one run of names ("李鹏乔石李瑞环彭真…"). Test holds two such
lists of 1,475 and 649 characters; training holds one of 373. This script counts, for every
split, the sentences in which two person entities touch (nothing between them) and their
entities, then scores trained pipelines on the test set three ways: all of it, without
those sentences, and those sentences alone, with the recall of the touching person names.
Scores are exact character spans, micro-averaged (the scorer's `ents_f`).

    python benchmarks/name_lists.py training/msra4/flat --label "msra.cfg, 4 epochs"
    python benchmarks/name_lists.py RUN [RUN ...] --label NAME [NAME ...]   # RUN: accuracy.py --output

Each RUN is an `accuracy.py --output` folder; every `flatSEED/model-best` in it is scored.
One record: analysis-msra-name-lists (benchmarks/results.py; --results DIR: elsewhere).
"""

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

import spacy
from spacy.tokens import Doc, DocBin

sys.path.insert(0, str(Path(__file__).parent))
from common import markdown_table, splits
from results import record, results_option

Span = Tuple[int, int, str]
# Person labels: MSRA's own and the news pipeline's.
PERSON = {"NR", "PER"}


def spans(doc: Doc) -> Set[Span]:
    return {(e.start_char, e.end_char, e.label_) for e in doc.ents}


def touching_persons(gold: Set[Span]) -> Set[Span]:
    """The person entities that touch another person entity."""
    people = sorted(s for s in gold if s[2] in PERSON)
    out: Set[Span] = set()
    for a, b in zip(people, people[1:]):
        if a[1] == b[0]:
            out |= {a, b}
    return out


def split_counts(docs: List[Doc]) -> Dict[str, int]:
    listed = [d for d in docs if touching_persons(spans(d))]
    return {
        "sentences": len(docs),
        "entities": sum(len(d.ents) for d in docs),
        "list_sentences": len(listed),
        "list_entities": sum(len(d.ents) for d in listed),
        "touching_persons": sum(len(touching_persons(spans(d))) for d in docs),
        "longest_list_chars": max((len(d.text) for d in listed), default=0),
    }


def f_score(counts: List[int]) -> float:
    tp, fp, fn = counts
    return round(200 * tp / max(2 * tp + fp + fn, 1), 2)


def score(model: Path, gold: List[Doc]) -> Dict[str, float]:
    """Test F1 overall, outside and inside the name-list sentences, and the touching names' recall."""
    nlp = spacy.load(model)
    parts = {"all": [0, 0, 0], "outside": [0, 0, 0], "inside": [0, 0, 0]}
    found = total = 0
    for g, p in zip(gold, nlp.pipe((d.text for d in gold), batch_size=64)):
        want, got = spans(g), spans(p)
        touching = touching_persons(want)
        counts = (len(want & got), len(got - want), len(want - got))
        for part in ("all", "inside" if touching else "outside"):
            parts[part] = [x + y for x, y in zip(parts[part], counts)]
        found += len(touching & got)
        total += len(touching)
    out = {f"test_f1_{part}": f_score(c) for part, c in parts.items()}
    out["touching_person_recall"] = round(100 * found / max(total, 1), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path, help="accuracy.py --output folders")
    parser.add_argument("--label", nargs="+", required=True, help="one name per run")
    results_option(parser)
    args = parser.parse_args()
    if len(args.label) != len(args.runs):
        parser.error("give one --label per run")
    load = round(os.getloadavg()[0], 2)
    vocab = spacy.blank("zh").vocab
    docs = {name: list(DocBin().from_disk(path).get_docs(vocab)) for name, path in splits("msra").items()}
    counts = {name: split_counts(split) for name, split in docs.items()}
    print(markdown_table(["split", *counts["test"]], [[n, *map(str, c.values())] for n, c in counts.items()]))
    rows = []
    runs_seeds: List[List[int]] = []
    for run, label in zip(args.runs, args.label):
        models = sorted(run.glob("flat*/model-best"))
        if not models:
            sys.exit(f"{run}: no flatSEED/model-best inside")
        per_seed = [score(m, docs["test"]) for m in models]
        runs_seeds.append([int(m.parent.name[4:]) for m in models])
        row: Dict[str, object] = {"run": label, "seeds": runs_seeds[-1]}
        for key in per_seed[0]:
            row[key] = round(statistics.mean(s[key] for s in per_seed), 2)
        rows.append(row)
    keys = ["test_f1_all", "test_f1_outside", "test_f1_inside", "touching_person_recall"]
    print(f"load average {load}")
    table = [[str(r["run"]), str(r["seeds"]), *(str(r[k]) for k in keys)] for r in rows]
    print(markdown_table(["run", "seeds", *keys], table))
    record(
        "analysis-msra-name-lists",
        "analysis",
        "MSRA test F1 inside and outside the sentences where person names touch (name lists)",
        {"splits": counts, "rows": rows},
        dataset="msra",
        seeds=sorted({s for models in runs_seeds for s in models}),
        load_before=load,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
