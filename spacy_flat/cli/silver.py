"""`python -m spacy_flat silver`: raw text annotated by teachers into silver
sentences for self-training, with a report of what was read, kept and dropped."""

import argparse
import json
from pathlib import Path
from typing import Any, Dict, Sequence

import srsly
from spacy.tokens import DocBin

from ..distillation.settings import SilverSettings


def add_commands(commands: Any) -> None:
    """Add `silver` to the sub-command parsers."""
    silver = commands.add_parser(
        "silver", help="annotate raw text with teacher pipelines and keep the sure sentences for self-training"
    )
    silver.add_argument("teachers", nargs="+", help="teacher pipelines (paths or package names); several: an ensemble")
    silver.add_argument("--input", type=Path, nargs="+", required=True, help="raw text files or directories")
    silver.add_argument("--output", type=Path, required=True, help="the silver DocBin (.spacy)")
    silver.add_argument("--held-back", type=Path, nargs="*", default=[], help="dev and test sets: never kept")
    silver.add_argument("--json-field", default="text", help="dotted path of the text in JSON records")
    silver.add_argument("--csv-column", default="text", help="text column of CSV files")
    defaults = SilverSettings()
    silver.add_argument("--min-probability", type=float, default=defaults.min_probability)
    silver.add_argument("--empty-share", type=float, default=defaults.empty_share)
    silver.add_argument("--max-sentences", type=int, default=defaults.max_sentences)
    silver.add_argument(
        "--max-with-entities",
        type=int,
        default=defaults.max_with_entities,
        help="stop after this many kept sentences with entities (0: no limit)",
    )
    silver.add_argument("--max-length", type=int, default=defaults.max_length)
    silver.add_argument("--gpu-id", type=int, default=-1)
    silver.add_argument("--no-progress", action="store_true")
    silver.set_defaults(run=run_silver)


def run_silver(args: argparse.Namespace, extra: Sequence[str] = ()) -> Dict[str, Any]:
    """Write the silver DocBin and `<output>.json`, the report. RETURNS: the report."""
    # Imported here: the other commands start without loading pipelines or torch.
    from ..distillation.silver import SilverReport, silver_docs
    from ..distillation.teachers import EnsembleTeacher, PipelineTeacher
    from ..vectors.sentences import SentenceFilter, held_back_texts
    from ..vectors.sources import TextFields, describe, read_texts

    if args.gpu_id >= 0:
        from thinc.api import require_gpu

        require_gpu(args.gpu_id)
    members = [PipelineTeacher.from_disk(path) for path in args.teachers]
    teacher = members[0] if len(members) == 1 else EnsembleTeacher(members)
    settings = SilverSettings(
        min_probability=args.min_probability,
        empty_share=args.empty_share,
        max_sentences=args.max_sentences,
        max_with_entities=args.max_with_entities,
        max_length=args.max_length,
    )
    report = SilverReport()
    sentence_filter = SentenceFilter(held_back_texts(str(p) for p in args.held_back))
    texts = (text for text, _ in read_texts(args.input, TextFields(args.json_field, args.csv_column), report.sources))
    docs = silver_docs(teacher, texts, sentence_filter, settings, report)
    if not args.no_progress:
        from tqdm import tqdm

        docs = tqdm(docs, unit="sentence", desc="kept", mininterval=1.0)
    out = DocBin(store_user_data=True)
    for doc in docs:
        out.add(doc)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    out.to_disk(args.output)
    summary = {"teachers": list(args.teachers), "settings": vars(settings), **report.summary(sentence_filter)}
    srsly.write_json(args.output.with_suffix(".json"), summary)
    for line in describe(report.sources, limit=10):
        print(line)
    print(json.dumps({k: v for k, v in summary.items() if k != "problems"}, ensure_ascii=False, indent=2))
    return summary
