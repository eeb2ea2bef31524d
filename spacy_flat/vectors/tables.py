"""Training the three pretrained tables FLAT reads (characters, character bigrams,
words) from raw text, with gensim's word2vec.

Why gensim's word2vec: its output is the word2vec format every loader here
reads (`word2vec_char_vectors.v1`, `word2vec_lexicon.v1`), the paper's Giga
tables are word2vec tables, and its `corpus_file` mode streams a token file from
disk with one thread per core, so memory stays bounded by the vocabulary.
(floret, which spaCy uses for its vectors, adds subword buckets: of no use for
single characters and bigrams, and its hashed rows are not a word list a lattice
can match.)

The run is staged, each stage's output kept in the output directory with the
key of its inputs, so a run on unchanged inputs reuses what was done:
1. sentences: stream the documents, clean, split, drop duplicates and held-back
   sentences (`sentences.py`);
2. tokens: characters, bigrams and words (jieba, with the user's word lists) of
   every kept sentence, one file each, segmented on all cores;
3. tables: one word2vec run per token file.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import resource
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Sequence

from .sentences import SentenceFilter, held_back_texts
from .sources import SourceReport, TextFields, describe, read_texts

TABLES = ("chars", "bigrams", "words")


@dataclass(frozen=True)
class PretrainSettings:
    """What a pretraining run does.

    width (int): Vector width of all three tables (the paper's Giga tables: 50).
    min_count (Dict[str, int]): Fewest occurrences for a row, per table.
    epochs (int): word2vec passes over each token file.
    window (int): word2vec context window.
    workers (int): Processes for segmenting and threads for word2vec (both cores: 2).
    min_han (int): Shorter sentences are left out.
    fields (TextFields): Where the text is in JSON and CSV files.
    """

    width: int = 50
    min_count: Dict[str, int] = field(default_factory=lambda: {"chars": 3, "bigrams": 5, "words": 5})
    epochs: int = 5
    window: int = 5
    workers: int = 2
    min_han: int = 2
    fields: TextFields = field(default_factory=TextFields)


def pretrain_vectors(
    inputs: Sequence[Path],
    output: Path,
    settings: PretrainSettings,
    *,
    held_back: Sequence[Path] = (),
    user_words: Sequence[Path] = (),
    progress: bool = True,
) -> Dict[str, Any]:
    """Train `chars.vec`, `bigrams.vec` and `words.vec` (binary word2vec) in `output`.

    inputs (Sequence[Path]): Corpus files or directories.
    output (Path): Where the stages and tables go; a re-run reuses stages whose inputs are unchanged.
    settings (PretrainSettings): The run's settings.
    held_back (Sequence[Path]): Files whose sentences no table may learn from (DocBins or text).
    user_words (Sequence[Path]): Word lists (one per line, first field) jieba segments with.
    progress (bool): Show progress bars.
    RETURNS (Dict[str, Any]): The report, also written to `output/report.json`.
    """
    output.mkdir(parents=True, exist_ok=True)
    report: Dict[str, Any] = {"settings": _jsonable(asdict(settings)), "stages": {}}
    key = _key([*inputs, *held_back], [settings.fields, settings.min_han])
    sentences = output / "sentences.txt"
    report["stages"]["sentences"] = _stage(
        output / "sentences.json",
        key,
        lambda: _write_sentences(inputs, held_back, sentences, settings, progress),
    )
    key = _key([sentences, *user_words], [])
    report["stages"]["tokens"] = _stage(
        output / "tokens.json",
        key,
        lambda: _write_tokens(sentences, output, user_words, settings.workers, progress),
    )
    for table in TABLES:
        key = _key([output / f"{table}.txt"], [_jsonable(asdict(settings))])
        train = partial(_train_table, output / f"{table}.txt", output / f"{table}.vec", table, settings)
        report["stages"][table] = _stage(output / f"{table}.json", key, train)
    report["peak_memory_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    (output / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf8")
    return report


def _stage(record: Path, key: str, run: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    """Run a stage, or reuse its result when its record holds the same input key."""
    if record.exists():
        done = json.loads(record.read_text(encoding="utf8"))
        if done.get("key") == key:
            return {**done["result"], "reused": True}
    start = time.perf_counter()
    result = run()
    result["seconds"] = round(time.perf_counter() - start, 1)
    record.write_text(json.dumps({"key": key, "result": result}, ensure_ascii=False), encoding="utf8")
    return result


def _key(paths: Iterable[Path], extra: List[Any]) -> str:
    """A digest of the files' names, sizes and modification times, and of `extra`."""
    digest = hashlib.sha256(json.dumps(_jsonable(extra), sort_keys=True).encode())
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file_path in files:
            stat = file_path.stat() if file_path.exists() else None
            digest.update(f"{file_path.resolve()}|{stat and stat.st_size}|{stat and stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, TextFields):
        return asdict(value)
    return value


def _progress(items: Iterable[Any], unit: str, enabled: bool) -> Iterator[Any]:
    from tqdm import tqdm

    yield from tqdm(items, unit=unit, disable=not enabled, mininterval=1.0, unit_scale=True)


def _write_sentences(
    inputs: Sequence[Path], held_back: Sequence[Path], out: Path, settings: PretrainSettings, progress: bool
) -> Dict[str, Any]:
    sources = SourceReport()
    kept_filter = SentenceFilter(held_back_texts([str(p) for p in held_back]))
    counts = {"documents": 0, "characters_read": 0, "sentences_kept": 0, "characters_kept": 0}
    documents = _progress(read_texts(inputs, settings.fields, sources), "doc", progress)

    def texts() -> Iterator[str]:
        for text, _ in documents:
            counts["documents"] += 1
            counts["characters_read"] += len(text)
            yield text

    with out.open("w", encoding="utf8") as f:
        for sentence in kept_filter.sentences(texts(), settings.min_han):
            counts["sentences_kept"] += 1
            counts["characters_kept"] += len(sentence)
            f.write(sentence.replace("\n", " ") + "\n")
    return {
        **counts,
        "held_back_sentences": len(kept_filter.held_back),
        "sentences_dropped": dict(kept_filter.dropped),
        "sources": sources.summary(),
        "sources_described": describe(sources),
    }


_JIEBA: Any = None


def _init_jieba(user_words: Sequence[str]) -> None:
    global _JIEBA
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    for path in user_words:
        with open(path, encoding="utf8") as f:
            for line in f:
                if line.split():
                    tokenizer.add_word(line.split()[0])
    _JIEBA = tokenizer


def _tokens(sentence: str) -> List[str]:
    """The three token lines of a sentence: characters, bigrams, words."""
    chars = [c for c in sentence if not c.isspace()]
    bigrams = [a + b for a, b in zip(sentence, sentence[1:]) if not (a.isspace() or b.isspace())]
    words = [w for w in _JIEBA.lcut(sentence, HMM=True) if w.strip()]
    return [" ".join(chars), " ".join(bigrams), " ".join(words)]


def _write_tokens(
    sentences: Path, output: Path, user_words: Sequence[Path], workers: int, progress: bool
) -> Dict[str, Any]:
    files = [(output / f"{table}.txt").open("w", encoding="utf8") for table in TABLES]
    lines = 0
    try:
        with sentences.open(encoding="utf8") as f:
            stripped = (line.rstrip("\n") for line in f)
            words = [str(p) for p in user_words]
            if workers > 1:
                with multiprocessing.get_context("fork").Pool(workers, _init_jieba, (words,)) as pool:
                    for tokens in _progress(pool.imap(_tokens, stripped, chunksize=256), "sent", progress):
                        lines += _write_lines(files, tokens)
            else:
                _init_jieba(words)
                for tokens in _progress(map(_tokens, stripped), "sent", progress):
                    lines += _write_lines(files, tokens)
    finally:
        for handle in files:
            handle.close()
    return {"sentences": lines, "user_word_lists": [str(p) for p in user_words]}


def _write_lines(files: Sequence[Any], tokens: List[str]) -> int:
    for handle, line in zip(files, tokens):
        handle.write(line + "\n")
    return 1


def _train_table(tokens: Path, out: Path, table: str, settings: PretrainSettings) -> Dict[str, Any]:
    from gensim.models import Word2Vec

    model = Word2Vec(
        corpus_file=str(tokens),
        vector_size=settings.width,
        window=settings.window,
        min_count=settings.min_count[table],
        workers=settings.workers,
        epochs=settings.epochs,
        sg=0,
        seed=0,
    )
    model.wv.save_word2vec_format(str(out), binary=True)
    # Frequencies for DC-SAN's word-set weights (spacy-flat.word_counts.v1), in the table's row order.
    with out.with_suffix(".counts.tsv").open("w", encoding="utf8") as handle:
        for word in model.wv.index_to_key:
            handle.write(f"{word}\t{model.wv.get_vecattr(word, 'count')}\n")
    return {"rows": len(model.wv), "min_count": settings.min_count[table], "width": settings.width, "file": str(out)}


def describe_report(report: Dict[str, Any]) -> List[str]:
    """RETURNS (List[str]): The report in lines for a person."""
    stages = report["stages"]
    read = stages["sentences"]
    lines = [
        f"read {read['documents']:,} documents, {read['characters_read']:,} characters",
        f"kept {read['sentences_kept']:,} sentences, {read['characters_kept']:,} characters; dropped "
        + (", ".join(f"{n:,} {why}" for why, n in read["sentences_dropped"].items()) or "none"),
        *read["sources_described"],
    ]
    for table in TABLES:
        done = stages[table]
        lines.append(
            f"{table}: {done['rows']:,} rows (min count {done['min_count']}, width {done['width']}) -> {done['file']}"
        )
    seconds = sum(stage.get("seconds", 0.0) for stage in stages.values() if not stage.get("reused"))
    reused = [name for name, stage in stages.items() if stage.get("reused")]
    lines.append(
        f"{seconds:.0f} s"
        + (f"; reused: {', '.join(reused)}" if reused else "")
        + f"; peak {report['peak_memory_mb']} MB"
    )
    return lines
