"""Every name declared as an entry point resolves, so setup.py and code cannot drift apart."""

from importlib.metadata import entry_points

import pytest
from spacy.util import registry

GROUPS = {
    "spacy_factories": None,
    "spacy_architectures": registry.architectures,
    "spacy_misc": registry.misc,
    "spacy_scorers": registry.scorers,
}


def declared():
    for group in GROUPS:
        for ep in entry_points(group=group):
            if ep.value.startswith("spacy_flat."):
                yield group, ep


def test_entry_points_are_declared():
    names = {ep.name for _, ep in declared()}
    assert {
        "flat_ner",
        "spacy-flat.FlatTagger.v1",
        "spacy-flat.jieba_lexicon.v1",
        "spacy-flat.word2vec_lexicon.v1",
        "spacy-flat.word_list_lexicon.v1",
        "spacy-flat.lac_char_vectors.v1",
        "spacy-flat.char_ner_scorer.v1",
    } <= names


@pytest.mark.parametrize("group,ep", list(declared()), ids=lambda x: getattr(x, "name", x))
def test_entry_point_resolves(group, ep):
    assert callable(ep.load())
    table = GROUPS[group]
    if table is not None:
        assert callable(table.get(ep.name))


def test_factory_resolves_without_import():
    import spacy

    nlp = spacy.blank("zh")
    assert "flat_ner" in nlp.factory_names
