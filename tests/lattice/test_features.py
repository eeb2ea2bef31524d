"""From texts to the encoder's input arrays."""

import numpy
import pytest

from spacy_flat.lattice.char_vocab import CharVocab
from spacy_flat.lattice.features import featurize
from spacy_flat.lattice.lexicon import Lexicon


def test_bigram_vectors_are_the_lexicon_vectors_of_each_characters_bigram():
    words = ["北京", "京大", "大学", "北京大学"]
    vectors = numpy.arange(len(words) * 3, dtype="float32").reshape(len(words), 3) + 1
    lexicon = Lexicon(words, vectors)
    texts = ["北京大学好", "上海"]
    vocab = CharVocab(sorted(set("".join(texts))))
    batch = featurize(texts, lexicon, vocab, word_rows=100, bigram_vectors=True)
    assert batch.bigram_vectors is not None
    assert batch.bigram_vectors.shape == (7, 3)
    expected = {0: "北京", 1: "京大", 2: "大学"}
    for i in range(7):
        want = vectors[words.index(expected[i])] if i in expected else numpy.zeros(3)
        # "学好", the end marks and "上海" (not in the lexicon) get zeros.
        assert numpy.array_equal(batch.bigram_vectors[i], want), i
    assert featurize(texts, lexicon, vocab, word_rows=100).bigram_vectors is None


def test_bigram_vectors_need_a_lexicon_with_vectors():
    vocab = CharVocab(list("北京"))
    with pytest.raises(ValueError, match="needs a lexicon with vectors"):
        featurize(["北京"], Lexicon(["北京"]), vocab, word_rows=100, bigram_vectors=True)
