"""The import rules of the package's folders (docs/architecture.md), checked on the code's own imports.

A module is held to the rules of the folder it lies in: a new file in `nn/` is
checked as the torch side without being listed anywhere.
"""

import ast
import re
from pathlib import Path
from typing import Dict, Set

import pytest

PACKAGE = Path(__file__).parent.parent / "spacy_flat"

# Top-level modules every part may import; they import nothing else of the package.
BASE = {"about", "codepoints", "errors", "files", "types"}
# Top-level modules held to the package's own rules: its entry points and the architectures'
# names registered for configs of earlier releases.
ROOT = {"", "__main__", "legacy"}
# Part -> the parts its modules may import. Listed from the bottom up.
MAY_IMPORT: Dict[str, Set[str]] = {
    "base": {"base"},
    "crf": {"base", "decoding", "crf"},
    "nn": {"base", "crf", "nn"},
    "lattice": {"base", "lattice"},
    "decoding": {"base", "decoding"},
    "layers": {"base", "crf", "nn", "lattice", "decoding", "layers"},
    "pipeline": {"base", "crf", "lattice", "decoding", "layers", "pipeline"},
    "training": {"base", "crf", "lattice", "decoding", "layers", "pipeline", "training"},
    "annotate": {"base", "annotate"},
    "vectors": {"base", "vectors"},
    "cli": {"base", "crf", "lattice", "decoding", "layers", "pipeline", "training", "annotate", "vectors"} | {"cli"},
    "root": {"base", "lattice", "decoding", "layers", "pipeline", "training", "cli", "root"},
}
# Part -> libraries its modules never import.
NEVER_IMPORTS: Dict[str, Set[str]] = {
    "nn": {"spacy", "thinc", "spacy_transformers", "torchcrf"},
    "crf": {"spacy", "thinc", "spacy_transformers", "torchcrf"},
    "lattice": {"torch", "thinc", "torchcrf"},
    "decoding": {"torch", "thinc", "torchcrf"},
    "pipeline": {"torch", "torchcrf"},
    "base": {"torch", "thinc", "torchcrf"},
}
# Modules that compose the torch modules themselves, as spaCy's `ml/models/` builders do: beside
# their folder's parts they may import these parts and libraries.
BUILDERS: Dict[str, Set[str]] = {"pipeline.architectures": {"nn", "torch"}}
MAX_TOP_LEVEL_MODULES = 10
# Module name patterns (within a part that mixes both) that run on the host: NumPy, never torch.
HOST_ONLY = ("crf.host_",)


def module_name(path: Path) -> str:
    """`layers/flat_model.py` -> "layers.flat_model"; `layers/__init__.py` -> "layers"; the package's own -> ""."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """The part a module (relative to the package) belongs to: its folder, "base" or "root"."""
    head = module.split(".")[0]
    if head in BASE:
        return "base"
    if head in ROOT:
        return "root"
    return head


def imports() -> Dict[str, Set[str]]:
    """Module (relative to the package) -> top-level libraries and package modules it imports."""
    found: Dict[str, Set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        parts = name.split(".") if name else []
        package = parts if path.name == "__init__.py" else parts[:-1]
        targets: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                    targets.add("spacy_flat." + target if target else "spacy_flat")
                else:
                    assert node.module is not None
                    targets.add(node.module.split(".")[0])
        found[name] = targets
    return found


IMPORTS = imports()
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def package_targets(module: str) -> Set[str]:
    """The package modules `module` imports, relative to the package ("" for the package itself)."""
    return {t.removeprefix("spacy_flat").removeprefix(".") for t in IMPORTS[module] if t.split(".")[0] == "spacy_flat"}


def test_every_folder_has_rules_and_a_docstring():
    assert set(FOLDERS) <= set(MAY_IMPORT), sorted(set(FOLDERS) - set(MAY_IMPORT))
    for folder in FOLDERS:
        tree = ast.parse((PACKAGE / folder / "__init__.py").read_text(encoding="utf8"))
        assert ast.get_docstring(tree), f"{folder}/__init__.py says nothing of what lives there"


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_module_imports_only_what_its_folder_may(module):
    part = part_of(module)
    assert part in MAY_IMPORT, f"{module}: a top-level module outside the base; give it a folder"
    allowed = BUILDERS.get(module, set())
    for target in package_targets(module):
        assert part_of(target) in MAY_IMPORT[part] | allowed, f"{module} ({part}) imports {target} ({part_of(target)})"
    never = NEVER_IMPORTS.get(part, set()) - allowed
    assert not IMPORTS[module] & never, f"{module} ({part}) imports a library it must not"
    if module.startswith(HOST_ONLY):
        assert "torch" not in IMPORTS[module], f"{module} decodes on the host: NumPy, not torch"


def test_the_host_decoding_modules_are_checked():
    assert [m for m in IMPORTS if m.startswith(HOST_ONLY)], HOST_ONLY


def test_the_package_keeps_few_top_level_modules():
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, sorted(top)


def test_no_import_runs_in_a_circle():
    graph = {m: package_targets(m) for m in IMPORTS}
    assert graph["layers"] and graph["pipeline.flat_ner"] >= {"layers", "lattice.windows"}
    visiting: Set[str] = set()
    done: Set[str] = set()

    def visit(module: str, path: tuple) -> None:
        assert module not in visiting, f"import circle: {' -> '.join((*path, module))}"
        if module in done or module not in graph:
            return
        visiting.add(module)
        for target in graph[module]:
            visit(target, (*path, module))
        visiting.discard(module)
        done.add(module)

    for module in graph:
        visit(module, ())


def test_readme_folder_table_names_every_folder():
    readme = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf8")
    listed = set(re.findall(r"^\| `spacy_flat/([a-z_]+)/` \|", readme, flags=re.M))
    assert listed == set(FOLDERS), (sorted(set(FOLDERS) - listed), sorted(listed - set(FOLDERS)))


def test_the_tests_mirror_the_package():
    """`tests/<folder>/` holds the tests of `spacy_flat/<folder>/`: one folder of tests for each folder of the
    package, and none for a folder that is not there. Package-wide tests stay at the top of `tests/`."""
    tests = Path(__file__).parent
    mirrored = {p.name for p in tests.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert mirrored == set(FOLDERS), (sorted(set(FOLDERS) - mirrored), sorted(mirrored - set(FOLDERS)))
    for folder in mirrored:
        assert list((tests / folder).glob("test_*.py")), f"tests/{folder}/ holds no tests"
