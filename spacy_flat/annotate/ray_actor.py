"""The Ray side of `annotate --engine ray`: the actor that annotates, and the
ledger that keeps a document which kills its worker from being retried forever.

Ray Data restarts a dead actor and retries its batch without limit, which is
right for a lost node and wrong for a document that crashes the process (a
native library's segfault, memory blown by one text): that batch would be
retried for ever. The ledger, a small Ray actor that outlives the workers,
counts the deaths during each batch. After `WHOLE_BATCH_TRIES` the batch is redone one
document at a time, telling the ledger which document is in hand; a worker that
dies then names that document, which the next attempt skips and reports. So
every attempt either finishes or finds one more such document: the run ends,
and every input document is in the output or in the report, exactly once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from .batches import BatchResult, annotate_batch, annotate_one_by_one, scores_key_of
from .records import Record

# Whole-batch attempts before a batch is redone one document at a time.
WHOLE_BATCH_TRIES = 2
# Set by the fault tests: an actor exits hard after this many batches, once per marker file ...
CRASH_AFTER_ENV = "SPACY_FLAT_TEST_CRASH_AFTER"
CRASH_MARKER_ENV = "SPACY_FLAT_TEST_CRASH_MARKER"
# ... or every time it is about to annotate a text holding this string.
CRASH_ON_TEXT_ENV = "SPACY_FLAT_TEST_CRASH_ON_TEXT"


class AttemptLedger:
    """Deaths per batch key and, for batches run a document at a time, the
    document in hand; run as a Ray actor (`ray.remote(AttemptLedger)`).

    A death is counted against a batch only when the batch was begun and never
    ended: Ray retries a dead actor's whole task, and the batches of that task
    which had ended are redone whole, as in the first try.
    """

    def __init__(self) -> None:
        self.deaths: Dict[str, int] = defaultdict(int)
        self.open: Set[str] = set()
        self.in_hand: Dict[str, int] = {}
        self.fatal: Dict[str, Set[int]] = defaultdict(set)

    def begin(self, key: str) -> Tuple[int, List[int]]:
        """RETURNS (Tuple[int, List[int]]): This attempt's number (1 + the deaths
        during this batch), and the positions of the documents in hand at a death."""
        if key in self.open:
            self.deaths[key] += 1
            if key in self.in_hand:
                self.fatal[key].add(self.in_hand.pop(key))
        self.open.add(key)
        return self.deaths[key] + 1, sorted(self.fatal[key])

    def hold(self, key: str, position: int) -> None:
        self.in_hand[key] = position

    def end(self, key: str) -> None:
        self.open.discard(key)
        self.in_hand.pop(key, None)


class Annotator:
    """A Ray Data actor: loads the pipeline once, then annotates batches of rows.

    Rows are whole `nlp.pipe` batches (`shard`, `key`, `chunk`: the records as
    JSON), cut by the reading tasks exactly as the local engine cuts its shards, so every
    doc meets the same batch-mates and the output equals the local engine's to the
    last digit of every probability; or, from `annotate_dataset` with
    `chunked=False`, single documents (`shard`, `id`, `text`, `fields`), each
    returned as its output record (`line`) or why it was skipped (`skipped`).
    """

    def __init__(
        self,
        pipeline: str,
        batch_size: int,
        keep_text: bool,
        ledger: Any = None,
        gpu: bool = False,
        chunked: bool = False,
    ):
        import spacy

        if gpu:  # Ray gives a GPU actor its device as CUDA_VISIBLE_DEVICES, so it is device 0
            spacy.require_gpu(0)
        self.nlp = spacy.load(pipeline)
        self.key = scores_key_of(self.nlp)
        self.batch_size = batch_size
        self.keep_text = keep_text
        self.ledger = ledger
        self.chunked = chunked
        self.batches = 0

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        if self.chunked:
            out: Dict[str, List[Any]] = {"shard": [], "lines": [], "skipped": [], "chars": []}
            for shard, key, chunk in zip(batch["shard"], batch["key"], batch["chunk"]):
                records = [Record(id=i, text=t, origin=o, fields=f) for i, t, o, f in json.loads(str(chunk))]
                done = self._annotate(str(key), records)
                out["shard"].append(int(shard))
                out["lines"].append(json.dumps(done.lines, ensure_ascii=False))
                out["skipped"].append(json.dumps(done.skipped, ensure_ascii=False))
                out["chars"].append(done.chars)
        else:
            records = [
                Record(id=str(i), text=str(t), origin=f"row {k}", fields=json.loads(str(f)))
                for k, (i, t, f) in enumerate(zip(batch["id"], batch["text"], batch["fields"]))
            ]
            ids = "\x00".join(r.id for r in records)
            done = self._annotate(f"{batch['shard'][0]}:{hashlib.sha1(ids.encode('utf8')).hexdigest()}", records)
            # A row per document, as they came in: its output record, or why it was skipped.
            lines, why = iter(done.lines), {origin: detail for origin, _, detail in done.skipped}
            out = {
                "shard": [int(s) for s in batch["shard"]],
                "line": [("" if r.origin in why else next(lines)) for r in records],
                "skipped": [why.get(r.origin, "") for r in records],
            }
        self.batches += 1
        self._maybe_crash_after()
        return out

    def _annotate(self, key: str, records: List[Record]) -> BatchResult:
        if self.ledger is None:
            self._maybe_crash_on(records)
            return annotate_batch(self.nlp, records, self.key, self.keep_text)
        import ray

        attempt, fatal = ray.get(self.ledger.begin.remote(key))
        if attempt <= WHOLE_BATCH_TRIES:
            self._maybe_crash_on(records)
            result = annotate_batch(self.nlp, records, self.key, self.keep_text)
        else:
            result = BatchResult()
            for position, record in enumerate(records):
                skip: Tuple[int, ...] = (0,) if position in fatal else ()
                if not skip:
                    ray.get(self.ledger.hold.remote(key, position))
                    self._maybe_crash_on([record])
                one = annotate_one_by_one(self.nlp, [record], self.key, self.keep_text, skip)
                result.lines.extend(one.lines)
                result.skipped.extend(one.skipped)
                result.chars += one.chars
        ray.get(self.ledger.end.remote(key))
        return result

    def _maybe_crash_after(self) -> None:
        after, marker = os.environ.get(CRASH_AFTER_ENV), os.environ.get(CRASH_MARKER_ENV)
        if after and marker and self.batches >= int(after) and not Path(marker).exists():
            Path(marker).write_text("crashed", encoding="utf8")
            os._exit(1)

    @staticmethod
    def _maybe_crash_on(records: List[Record]) -> None:
        text: Optional[str] = os.environ.get(CRASH_ON_TEXT_ENV)
        if text and any(text in r.text for r in records):
            os._exit(1)
