"""The import rules of ARCHITECTURE.md, checked on the code's own imports."""

import ast
from pathlib import Path
from typing import Dict, Set

import pytest

PACKAGE = Path(__file__).parent.parent / "spacy_flat"

TORCH_SIDE = {
    "encoder",
    "flat_layer",
    "tener",
    "dcsan",
    "lattice_lstm",
    "embeddings",
    "position",
    "position_scores",
    "crf",
}
DATA_SIDE = {
    "boundaries",
    "lexicon",
    "gazetteers",
    "word_counts",
    "calibration",
    "lattice",
    "char_vocab",
    "features",
    "readers",
    "vectors",
    "tags",
    "batching",
    "settings",
    "types",
    "errors",
}
COMPONENT_SIDE = {
    "factory",
    "pipe",
    "saving",
    "schedules",
    "entities",
    "confidence",
    "architectures",
    "loaders",
    "resources",
}


def module_name(path: Path) -> str:
    """`layers/groups.py` -> "layers.groups"; `layers/__init__.py` -> "layers"; the package's own -> ""."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


@pytest.mark.parametrize("module", sorted(TORCH_SIDE))
def test_torch_side_never_imports_spacy_or_thinc(module):
    assert not IMPORTS[module] & {"spacy", "thinc", "spacy_transformers"}


@pytest.mark.parametrize("module", sorted(DATA_SIDE))
def test_data_side_never_imports_torch_or_thinc(module):
    assert not IMPORTS[module] & {"torch", "thinc", "torchcrf"}
    assert not {f"spacy_flat.{m}" for m in TORCH_SIDE} & IMPORTS[module]


@pytest.mark.parametrize("module", sorted(COMPONENT_SIDE))
def test_component_side_reaches_torch_only_through_the_layers(module):
    assert "torch" not in IMPORTS[module]
    assert not {f"spacy_flat.{m}" for m in TORCH_SIDE} & IMPORTS[module]


def test_layers_never_import_the_component_and_nothing_imports_the_cli():
    for module, targets in IMPORTS.items():
        if module.startswith("layers"):
            assert not {f"spacy_flat.{m}" for m in ("factory", "pipe", "saving", "architectures")} & targets, module
        if not module.startswith("cli") and module != "__main__":
            assert not any(t.startswith("spacy_flat.cli") for t in targets), module


def test_no_import_runs_in_a_circle():
    graph = {m: {t.removeprefix("spacy_flat.") for t in ts if t.startswith("spacy_flat.")} for m, ts in IMPORTS.items()}
    assert graph["layers"] and graph["pipe"] >= {"layers", "windows"}
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


def test_readme_module_table_names_every_module():
    import re

    root = PACKAGE.parent
    readme = (root / "README.md").read_text(encoding="utf8")
    listed = set()
    for row in re.findall(r"^\| (`spacy_flat/[^|]*) \|", readme, flags=re.M):
        names = re.findall(r"`([^`]+)`", row)
        folder = names[0].rsplit("/", 1)[0]
        listed.update(name if name.startswith("spacy_flat/") else f"{folder}/{name}" for name in names)
    skipped = ("__init__.py", "__main__.py", "about.py")
    modules = {str(path.relative_to(root)) for path in PACKAGE.rglob("*.py") if path.name not in skipped}
    in_folder = {m for m in modules for entry in listed if entry.endswith("/") and m.startswith(entry)}
    assert modules - in_folder <= listed, sorted(modules - in_folder - listed)
    assert all((root / entry).exists() for entry in listed), sorted(e for e in listed if not (root / e).exists())
