"""docs/settings.md is what docs/make_settings.py makes from the code, and it names every setting of the
component and every argument of each registered function, with the code's defaults, so it cannot drift."""

import configparser
import importlib.util
import inspect
import json
import re
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Tuple

import catalogue  # type: ignore[import-untyped]
import pytest
from spacy.language import Language
from spacy.util import registry
from thinc.api import Model

import spacy_flat  # noqa: F401  (runs every registration decorator)
from spacy_flat.pipeline.flat_ner import FlatNER

from .util import heading_anchors

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "settings.md"
# The entry-point groups of the functions a config names, and their registries.
GROUPS = {
    "spacy_architectures": registry.architectures,
    "spacy_misc": registry.misc,
    "thinc_schedules": registry.schedules,
    "spacy_scorers": registry.scorers,
}
PASSED = {"self", "nlp", "name", "get_examples"}


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_settings", ROOT / "docs" / "make_settings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_settings = load_generator()
TEXT = PAGE.read_text(encoding="utf8")


def declared(group: str) -> List[str]:
    """The names spacy-flat declares in an entry-point group (tests/test_registry.py: the registered ones)."""
    return sorted(ep.name for ep in entry_points(group=group) if ep.value.startswith("spacy_flat"))


def section(heading: str) -> str:
    """The page's text under `heading`, up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = TEXT.index(f"\n{heading}\n")
    rest = TEXT[start + len(heading) + 2 :]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def rows(text: str) -> Tuple[List[str], Dict[str, List[str]]]:
    """The table in `text`: its header, and each row by its first cell (without backticks)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return split[0], {row[0].strip("`"): row for row in split[2:]}


def written(value: object) -> str:
    """A default as the page shows it: a config's value in backticks, or "required"."""
    return "required" if value is inspect.Parameter.empty else f"`{json.dumps(value)}`"


def params(func) -> List[inspect.Parameter]:
    return [p for p in inspect.signature(func).parameters.values() if p.name not in PASSED]


def test_the_page_is_what_the_generator_makes():
    diff = make_settings.differences(TEXT, make_settings.render())
    assert diff == [], "docs/settings.md is stale: run python docs/make_settings.py\n" + "\n".join(diff)
    assert make_settings.main(["--check"]) == 0


def test_the_check_fails_on_a_stale_page(tmp_path, capsys):
    stale = tmp_path / "settings.md"
    stale.write_text(TEXT.replace("| `window_size` |", "| `window_length` |"), encoding="utf8")
    assert make_settings.main(["--check", "--page", str(stale)]) == 1
    assert "`window_length`" in capsys.readouterr().err
    make_settings.main(["--page", str(stale)])
    assert stale.read_text(encoding="utf8") == make_settings.render()


def test_every_factory_setting_is_on_the_page_with_its_default():
    defaults = Language.get_factory_meta("flat_ner").default_config or {}
    factory = registry.factories.get("flat_ner")
    head, table = rows(section("## The component's settings"))
    assert head == ["setting", "description", "type", "default"]
    names = [p.name for p in params(factory)]
    assert names == list(table) and set(defaults) == set(names)
    for name in names:
        assert table[name][3] == written(defaults[name]), name
        assert table[name][1], name


def test_every_initialize_setting_is_on_the_page():
    _, table = rows(section("## The initialize settings"))
    signature = params(FlatNER.initialize)
    assert [p.name for p in signature] == list(table)
    assert all(table[p.name][3] == written(p.default) for p in signature)


def test_every_argument_of_each_architecture_is_on_the_page_with_its_default():
    head, table = rows(section("## The architectures' arguments"))
    architectures = [name for name in declared("spacy_architectures") if not name.endswith(".v1")]
    columns = {name: head.index(name.removeprefix("spacy-flat.")) for name in architectures}
    assert len(architectures) >= 6 and len(head) == 3 + len(architectures)
    taken = set()
    for name, column in columns.items():
        for param in params(registry.architectures.get(name)):
            assert table[param.name][column] == written(param.default), (name, param.name)
            assert table[param.name][2], param.name
            taken.add(param.name)
        for arg in set(table) - {p.name for p in params(registry.architectures.get(name))}:
            assert table[arg][column] == "–", (name, arg)
    assert taken == set(table)


def test_the_earlier_releases_architectures_are_listed():
    legacy = [name for name in declared("spacy_architectures") if name.endswith(".v1")]
    listed = re.findall(r"^- `(spacy-flat\.\w+\.v1)`$", section("### Architectures of earlier releases"), re.M)
    assert len(legacy) == 6 and sorted(listed) == legacy


@pytest.mark.parametrize("group", ["spacy_misc", "thinc_schedules", "spacy_scorers"])
def test_every_loader_schedule_and_scorer_is_on_the_page_with_its_arguments(group):
    names = declared(group)
    assert names
    for name in names:
        text = section(f"### `{name}`")
        signature = params(GROUPS[group].get(name))
        if not signature:
            assert "It takes no arguments." in text
            continue
        _, table = rows(text)
        assert [p.name for p in signature] == list(table), name
        assert all(table[p.name][3] == written(p.default) and table[p.name][1] for p in signature), name


def build_new(width: int = 160, new_argument: int = 3) -> Model:
    """A new architecture.

    new_argument (int): What the new argument does.
    The other arguments are `spacy-flat.FlatTagger.v2`'s.
    """
    raise NotImplementedError


def test_a_new_architecture_argument_reaches_the_page_and_fails_the_check(monkeypatch):
    monkeypatch.setitem(catalogue.REGISTRY, (*registry.architectures.namespace, "spacy-flat.NewTagger.v1"), build_new)
    generated = make_settings.render()
    _, table = rows(generated[generated.index("## The architectures' arguments") :])
    assert table["new_argument"][2] == "What the new argument does."
    assert table["new_argument"][3:] == ["–"] * 6 + ["`3`"]
    assert table["width"][-1] == "`160`"
    diff = "\n".join(make_settings.differences(TEXT, generated))
    assert "new_argument" in diff and "NewTagger.v1" in diff


def test_an_argument_without_a_description_is_refused():
    def build_undescribed(width: int = 160, undescribed: bool = False) -> Model:
        """A builder that forgot an argument.

        The other arguments are `spacy-flat.FlatTagger.v2`'s.
        """
        raise NotImplementedError

    functions = {"spacy-flat.FlatTagger.v2": registry.architectures.get("spacy-flat.FlatTagger.v2")}
    functions["spacy-flat.Undescribed.v1"] = build_undescribed
    with pytest.raises(make_settings.SettingsError, match="no description of `undescribed`"):
        make_settings.comparison_table(functions)


def test_a_docstring_describing_a_removed_argument_is_refused():
    def build_stale(width: int = 160) -> Model:
        """A builder whose docstring kept a removed argument.

        width (int): Model width.
        residual (bool): Gone.
        """
        raise NotImplementedError

    with pytest.raises(make_settings.SettingsError, match="describes \\['residual'\\]"):
        make_settings.arguments("spacy-flat.Stale.v1", {"spacy-flat.Stale.v1": build_stale})


def test_a_new_loader_needs_a_place_on_the_page(monkeypatch):
    def create_new_loader(path: str) -> None:
        """A new loader.

        path (str): The file.
        """

    monkeypatch.setitem(catalogue.REGISTRY, (*registry.misc.namespace, "spacy-flat.new_loader.v1"), create_new_loader)
    with pytest.raises(make_settings.SettingsError, match=r"spacy-flat\.new_loader\.v1"):
        make_settings.render()


def test_the_page_links_resolve_and_its_anchors_stay():
    for target in re.findall(r"\]\(([^)#]*)(#[^)]*)?\)", TEXT):
        path, anchor = target
        page = (PAGE.parent / path).resolve() if path else PAGE
        assert page.exists(), path
        if anchor:
            assert anchor[1:] in heading_anchors(page.read_text(encoding="utf8")), (path, anchor)
    # The anchors other pages link.
    anchors = heading_anchors(TEXT)
    assert {"the-components-settings", "the-architectures-arguments"} <= anchors
    for other in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for anchor in re.findall(r"settings\.md#([\w-]+)", other.read_text(encoding="utf8")):
            assert anchor in anchors, (other.name, anchor)


class CaseKeeping(configparser.ConfigParser):
    """A parser that keeps the keys' case."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


def test_the_ini_examples_name_real_settings():
    blocks = re.findall(r"```ini\n(.*?)```", TEXT, flags=re.S)
    assert len(blocks) == 3
    functions = {"@architectures": registry.architectures, "@misc": registry.misc}
    settings = {
        "components.flat_ner": {"factory", *(Language.get_factory_meta("flat_ner").default_config or {})},
        "initialize.components.flat_ner": {p.name for p in params(FlatNER.initialize)},
    }
    checked = []
    for block in blocks:
        parser = CaseKeeping(interpolation=None)
        parser.read_string(block)
        for path in parser.sections():
            keys = set(parser[path])
            for ref in [key for key in keys if key.startswith("@")]:
                # A registered function's block: its arguments, and the setting it is the value of.
                name = json.loads(parser[path][ref])
                assert keys - {ref} <= {p.name for p in params(functions[ref].get(name))}, (path, keys)
                checked.append(name)
                path, keys = path.rpartition(".")[0], {path.rpartition(".")[2]}
            assert keys <= settings[path], (path, keys)
    assert checked == ["spacy-flat.DcsanTagger.v2", "spacy-flat.word2vec_lexicon.v1"]
