"""What the code registers and what setup.py declares as entry points are the
same set, and every entry point resolves, so the two cannot drift apart."""

from importlib.metadata import entry_points
from typing import Set, Tuple

import catalogue
import pytest
from spacy.util import registry

import spacy_flat  # noqa: F401  (runs every registration decorator)

GROUPS = {
    "spacy_factories": registry.factories,
    "spacy_architectures": registry.architectures,
    "spacy_misc": registry.misc,
    "spacy_scorers": registry.scorers,
    "spacy_batchers": registry.batchers,
    "thinc_schedules": registry.schedules,
    "thinc_optimizers": registry.optimizers,
}


def declared() -> Set[Tuple[str, str]]:
    return {
        (group, ep.name) for group in GROUPS for ep in entry_points(group=group) if ep.value.startswith("spacy_flat")
    }


def registered() -> Set[Tuple[str, str]]:
    """(entry-point group, name) of every function spacy_flat's own code registered."""
    found = set()
    for group, table in GROUPS.items():
        for keys, func in catalogue.REGISTRY.items():
            if keys[:-1] == tuple(table.namespace) and getattr(func, "__module__", "").startswith("spacy_flat"):
                found.add((group, keys[-1]))
    return found


def test_registered_names_and_entry_points_are_the_same_set():
    ours = registered()
    assert ("spacy_architectures", "spacy-flat.FlatTransformerTagger.v1") in ours
    for name in ("Flat", "FlatTransformer", "Tener", "Dcsan", "DcsanTransformer", "LatticeLstm"):
        assert {("spacy_architectures", f"spacy-flat.{name}Tagger.v{v}") for v in (1, 2)} <= ours
    assert ("spacy_factories", "flat_ner") in ours
    assert ours == declared()
    assert all(name == "flat_ner" or name.startswith("spacy-flat.") for _, name in ours)


@pytest.mark.parametrize("group,name", sorted(declared()))
def test_entry_point_resolves(group, name):
    (ep,) = [ep for ep in entry_points(group=group) if ep.name == name]
    assert callable(ep.load())
    assert callable(GROUPS[group].get(name))


def test_factory_resolves_without_import():
    import spacy

    nlp = spacy.blank("zh")
    assert "flat_ner" in nlp.factory_names
