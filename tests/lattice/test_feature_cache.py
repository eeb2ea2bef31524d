"""Training texts' ids computed once per run (lattice/feature_cache.py): the same batches as
featurizing anew, bounded memory with shards on disk, reuse by a later run with the same key, and
training that takes the same steps."""

import os
from pathlib import Path
from typing import Sequence

import numpy
import pytest
import spacy
import torch
from thinc.util import fix_random_seed

from spacy_flat.lattice.char_vocab import CharVocab
from spacy_flat.lattice.feature_cache import FeatureCache, cache_key
from spacy_flat.lattice.features import TextIds, featurize, text_ids
from spacy_flat.lattice.lexicon import Lexicon
from spacy_flat.layers.featurizer import set_feature_cache, training_cache

from ..util import FAMILY, small_lexicon, tiny_examples, tiny_records

TEXTS = [record["text"] for record in tiny_records()]
# Bytes of ids in memory: a few of the tiny corpus's texts.
BOUND = 400
WORDS = ["北京", "北京大学", "上海", "华为", "华为公司", "大学", "公司"]


def _resources(bigrams: bool):  # type: ignore[no-untyped-def]
    rng = numpy.random.default_rng(0)
    lexicon = Lexicon(WORDS, vectors=rng.normal(size=(len(WORDS), 4)).astype("float32"))
    chars = CharVocab(sorted({c for text in TEXTS for c in text}))
    grams = sorted({t[i : i + 2] for t in TEXTS for i in range(len(t) - 1)})[::3]
    table = Lexicon(grams, vectors=rng.normal(size=(len(grams), 4)).astype("float32")) if bigrams else None
    return lexicon, chars, table


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    for name in vars(a):
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, numpy.ndarray):
            numpy.testing.assert_array_equal(x, y, err_msg=name)
        else:
            assert x == y, name


@pytest.mark.parametrize("bigrams", [False, True])
@pytest.mark.parametrize("max_words", [-1, 2])
def test_cached_batches_are_the_batches_featurized_anew(tmp_path: Path, bigrams: bool, max_words: int):
    lexicon, chars, table = _resources(bigrams)
    settings = dict(word_rows=50, bigram_rows=30, max_words=max_words, bigram_vectors=bigrams, bigram_table=table)
    cache = FeatureCache("k" * 32, spill_dir=tmp_path)
    batches = [TEXTS[i : i + 3] for i in range(0, len(TEXTS), 3)] + [TEXTS[1:4], [TEXTS[0], TEXTS[0]]]
    for epoch in range(2):
        for texts in batches:
            _same(
                featurize(texts, lexicon, chars, cache=cache, **settings), featurize(texts, lexicon, chars, **settings)
            )
        if epoch == 0:
            assert cache.misses == len(TEXTS) and len(cache) == len(TEXTS)
    assert cache.hits == 2 * sum(map(len, batches)) - len(TEXTS)


def _never(texts: Sequence[str]) -> TextIds:
    raise AssertionError(f"computed again: {list(texts)[:2]}")


def test_beyond_its_bound_the_cache_spills_to_shards_and_a_later_run_reads_them(tmp_path: Path):
    lexicon, chars, _ = _resources(False)

    def compute(texts: Sequence[str]) -> TextIds:
        return text_ids(texts, lexicon, chars)

    key = cache_key(lexicon, chars, None, {"max_words": -1})
    cache = FeatureCache(key, memory_bytes=BOUND, spill_dir=tmp_path)
    want = {text: compute([text]) for text in TEXTS}
    for text in TEXTS:
        cache.ids([text], compute)
    assert cache.memory_used <= BOUND + max(
        sum(a.nbytes for a in vars(t).values() if a is not None) for t in want.values()
    )
    shards = sorted((tmp_path / key).glob("shard-*"))
    assert shards and not list((tmp_path / key).glob(".partial-*"))
    for text in TEXTS:
        _same(cache.ids([text], _never), want[text])
    # A later run with the same key reads every spilled text from the shards.
    later = FeatureCache(key, memory_bytes=BOUND, spill_dir=tmp_path)
    spilled = [text for text in TEXTS if text not in cache._memory]
    assert spilled
    for text in spilled:
        _same(later.ids([text], _never), want[text])


def test_other_keys_folders_are_removed_unless_a_live_process_uses_them(tmp_path: Path):
    dead, live = tmp_path / ("a" * 32), tmp_path / ("b" * 32)
    for folder, pid in ((dead, 2**22 + 12345), (live, os.getpid())):
        (folder / "users").mkdir(parents=True)
        (folder / "users" / str(pid)).touch()
    mine = tmp_path / "not-a-cache"
    mine.mkdir()
    FeatureCache("c" * 32, spill_dir=tmp_path)
    assert not dead.exists() and live.exists() and mine.exists()


def test_the_key_names_everything_that_shapes_the_ids():
    lexicon, chars, table = _resources(True)
    base = cache_key(lexicon, chars, table, {"max_words": -1})
    assert base == cache_key(lexicon, chars, table, {"max_words": -1})
    grown = Lexicon([*WORDS, "深圳"], vectors=numpy.zeros((len(WORDS) + 1, 4), dtype="float32"))
    others = [
        cache_key(lexicon, chars, table, {"max_words": 3}),
        cache_key(lexicon, chars, None, {"max_words": -1}),
        cache_key(grown, chars, table, {"max_words": -1}),
        cache_key(lexicon, CharVocab(list("北京")), table, {"max_words": -1}),
    ]
    assert base not in others and len(set(others)) == len(others)


def _trained(memory_bytes: int, folder: Path):  # type: ignore[no-untyped-def]
    fix_random_seed(0)
    nlp = spacy.blank("zh")
    ner = nlp.add_pipe("flat_ner", config={"model": FAMILY["flat"]})
    examples = tiny_examples(nlp)
    ner.initialize(lambda: examples, nlp=nlp, lexicon=small_lexicon())
    set_feature_cache(ner.model, folder, memory_bytes)
    optimizer = nlp.create_optimizer()
    for step in range(4):
        nlp.update(examples[step % 2 :: 2], sgd=optimizer)
    module = ner.tagger.module
    return {name: p.detach().clone() for name, p in module.named_parameters()}, ner.model


def test_training_with_the_cache_takes_the_same_steps(tmp_path: Path):
    cached, model = _trained(BOUND, tmp_path)
    held = training_cache(model)
    assert held is not None and held.hits > 0 and list(tmp_path.glob("*/shard-*"))
    plain, model = _trained(0, tmp_path / "none")
    assert training_cache(model) is None
    for name in cached:
        assert torch.equal(cached[name], plain[name]), name
