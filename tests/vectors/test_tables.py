"""pretrain-vectors (pretraining/tables.py): raw text to three word2vec tables,
then those tables train and evaluate a pipeline."""

import itertools
import json
import lzma

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_flat.cli.main import main
from spacy_flat.lattice.readers import read_word2vec
from spacy_flat.lattice.word_counts import read_word_counts

from ..util import SHARED, needs_shared, small_config, tiny_examples, tiny_records

pytest.importorskip("gensim")


@needs_shared
def test_pretrain_then_train_and_evaluate(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with lzma.open(SHARED / "corpora" / "waimai_10k.csv.xz", "rb") as f:
        (corpus / "waimai.csv").write_bytes(b"".join(itertools.islice(f, 400)))
    with lzma.open(SHARED / "corpora" / "xwlb_2012-07-02_2016-12-31.jsonl.xz", "rb") as f:
        (corpus / "news.jsonl").write_bytes(b"".join(itertools.islice(f, 2)))
    planted = [r["text"] for r in tiny_records()]
    (corpus / "planted.txt").write_text("\n".join(planted * 2) + "\n", encoding="utf8")
    nlp = spacy.blank("zh")
    DocBin(docs=[eg.reference for eg in tiny_examples(nlp)[:5]]).to_disk(tmp_path / "test.spacy")
    out = tmp_path / "tables"
    args = ["pretrain-vectors", str(corpus), "--output", str(out), "--held-back", str(tmp_path / "test.spacy")]
    args += ["--csv-column", "review", "--json-field", "videoList.video_detail.content", "--width", "16"]
    assert main([*args, "--epochs", "2", "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text(encoding="utf8"))
    sentences = report["stages"]["sentences"]
    # The five held-back sentences are dropped both times they are planted; the other five's copies
    # are duplicates, as are the reviews' own repeats.
    assert sentences["sentences_dropped"]["held back (in a dev or test set)"] == 10
    assert sentences["sentences_dropped"]["duplicate"] >= 5
    assert sentences["sources"]["documents"][str(corpus / "waimai.csv")] == 399
    assert all(report["stages"][t]["rows"] > 50 for t in ("chars", "bigrams", "words"))
    chars, vectors, _ = read_word2vec(out / "chars.vec", min_length=1, max_length=1)
    assert vectors.shape[1] == 16 and "好" in chars
    words, _, _ = read_word2vec(out / "words.vec")
    assert words and all(len(w) >= 2 for w in words)
    # The word table's frequencies, for DC-SAN's word sets: every row, in row order, at least min count.
    counts = read_word_counts(out / "words.counts.tsv")
    assert set(words) <= set(counts) and min(counts.values()) >= 1
    # Unchanged inputs: every stage is reused.
    assert main([*args, "--epochs", "2", "--no-progress"]) == 0
    again = json.loads((out / "report.json").read_text(encoding="utf8"))
    assert all(stage.get("reused") for stage in again["stages"].values())

    config = small_config()
    config["model"]["char_width"] = 16
    config["model"]["bigram_vectors"] = True
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config=config)
    examples = tiny_examples(nlp)
    registry = spacy.registry.misc
    ner.initialize(
        lambda: examples,
        nlp=nlp,
        lexicon=registry.get("spacy-flat.word2vec_lexicon.v1")(str(out / "words.vec")),
        char_vectors=registry.get("spacy-flat.word2vec_char_vectors.v1")(str(out / "chars.vec")),
        bigram_vectors=registry.get("spacy-flat.word2vec_bigram_vectors.v1")(str(out / "bigrams.vec")),
    )
    assert ner.lexicon is not None and ner.lexicon.vector_width == 16
    assert ner.resources is not None and ner.resources.bigrams is not None and len(ner.resources.bigrams) > 50
    optimizer = nlp.create_optimizer()
    losses = [nlp.update(examples, sgd=optimizer)["flat_ner"] for _ in range(30)]
    assert losses[-1] < losses[0]
    nlp.to_disk(tmp_path / "model")
    assert main(["evaluate", str(tmp_path / "model"), str(tmp_path / "test.spacy"), str(tmp_path / "metrics")]) == 0
