"""MSRA's name lists: test F1 inside and outside the sentences where person names touch.

MSRA's files hold one character a line, so the spaces that separated the names of a list
are gone and a list of people is one run of names ("李鹏乔石李瑞环彭真…"). Test holds two such
lists of 1,475 and 649 characters; training holds one of 373. This script counts, for every
split, the sentences in which two person entities touch (nothing between them) and their
entities, then scores trained pipelines on the test set three ways: all of it, without
those sentences, and those sentences alone, with the recall of the touching person names
and of the entities training holds (the same text and label) and of those it does not.
F1 is the component's scorer's (`score_char_entities`: exact character spans, micro-averaged).

    python benchmarks/name_lists.py training/msra4 --label "msra.cfg, 4 epochs"
    python benchmarks/name_lists.py RUN [RUN ...] --label NAME [NAME ...]   # RUN: accuracy.py --output

Each RUN is an `accuracy.py --output` folder; every `flatSEED/model-best` in it is scored.
One record: analysis-msra-name-lists (benchmarks/results.py; --results DIR: elsewhere).
"""

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example

sys.path.insert(0, str(Path(__file__).parent))
from common import markdown_table, splits
from results import record, results_option

from spacy_flat.pipeline.scorer import score_char_entities

Span = Tuple[int, int, str]
# Person labels: MSRA's own, and PER where its labels were renamed (project.yml's convert-msra).
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


def f_score(examples: List[Example]) -> float:
    """Test F1 by the component's own scorer (exact character spans, micro-averaged)."""
    return round(100 * (score_char_entities(examples)["ents_f"] or 0.0), 2)


def score(model: Path, gold: List[Doc], known: Set[Tuple[str, str]]) -> Dict[str, float]:
    """Dev F1 (the model's own, from training), test F1 overall, outside and inside the name-list
    sentences, the touching names' recall, and the recall of entities (text and label) that training
    holds (`known`) and of those it does not."""
    nlp = spacy.load(model)
    dev = 100 * json.loads((model / "meta.json").read_text(encoding="utf8"))["performance"]["ents_f"]
    examples = [Example(p, g) for g, p in zip(gold, nlp.pipe((d.text for d in gold), batch_size=64))]
    listed = [bool(touching_persons(spans(eg.reference))) for eg in examples]
    out = {
        "dev_f1": round(dev, 2),
        "test_f1_all": f_score(examples),
        "test_f1_outside": f_score([eg for eg, inside in zip(examples, listed) if not inside]),
        "test_f1_inside": f_score([eg for eg, inside in zip(examples, listed) if inside]),
    }
    found = total = 0
    recalled = {True: [0, 0], False: [0, 0]}  # seen in training: [found, all]
    for eg in examples:
        want, got = spans(eg.reference), spans(eg.predicted)
        touching = touching_persons(want)
        found += len(touching & got)
        total += len(touching)
        for start, end, label in want:
            seen = recalled[(eg.reference.text[start:end], label) in known]
            seen[0] += (start, end, label) in got
            seen[1] += 1
    out["touching_person_recall"] = round(100 * found / max(total, 1), 2)
    out["recall_seen"] = round(100 * recalled[True][0] / max(recalled[True][1], 1), 2)
    out["recall_unseen"] = round(100 * recalled[False][0] / max(recalled[False][1], 1), 2)
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
    known = {(e.text, e.label_) for d in docs["train"] for e in d.ents}
    seen = sum((e.text, e.label_) in known for d in docs["test"] for e in d.ents)
    print(markdown_table(["split", *counts["test"]], [[n, *map(str, c.values())] for n, c in counts.items()]))
    print(f"test entities whose text and label training holds: {seen}")
    rows = []
    runs_seeds: List[List[int]] = []
    for run, label in zip(args.runs, args.label):
        models = sorted(run.glob("flat*/model-best"))
        if not models:
            sys.exit(f"{run}: no flatSEED/model-best inside")
        per_seed = [score(m, docs["test"], known) for m in models]
        runs_seeds.append([int(m.parent.name[4:]) for m in models])
        row: Dict[str, object] = {"run": label, "seeds": runs_seeds[-1]}
        for key in per_seed[0]:
            row[key] = round(statistics.mean(s[key] for s in per_seed), 2)
        rows.append(row)
    keys = ["dev_f1", "test_f1_all", "test_f1_outside", "test_f1_inside", "touching_person_recall"]
    keys += ["recall_seen", "recall_unseen"]
    print(f"load average {load}")
    table = [[str(r["run"]), str(r["seeds"]), *(str(r[k]) for k in keys)] for r in rows]
    print(markdown_table(["run", "seeds", *keys], table))
    record(
        "analysis-msra-name-lists",
        "analysis",
        "MSRA test F1 inside and outside the sentences where person names touch (name lists)",
        {"splits": counts, "test_entities_seen_in_training": seen, "rows": rows},
        dataset="msra",
        seeds=sorted({s for models in runs_seeds for s in models}),
        load_before=load,
        out_dir=args.results,
    )


if __name__ == "__main__":
    main()
