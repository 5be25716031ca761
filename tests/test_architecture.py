"""The package's architecture as its source tree shows it: every import inside the package is relative
(so it resolves to a file of the tree, for readers and tools alike), and the subpackages form layers —
each imports only the layers below it, never one above, and no two import each other.

The layers, bottom to top (README "What is inside"): ``common`` (utilities), ``grids`` (grid helpers),
``datasets`` (PDE data), ``operators`` (layers and models), ``train``, ``evaluate``, ``export``, ``inverse``,
``pretrained`` (the shipped operators), ``cli``, and the package root.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["common", "grids", "datasets", "operators", "train", "evaluate", "export", "inverse", "pretrained", "cli"]


def package_modules() -> list[Path]:
    files = [ROOT / "__init__.py", ROOT / "__main__.py"]
    for layer in LAYERS:
        files += sorted((ROOT / layer).rglob("*.py"))
    return files


def _layer_of(path: Path) -> str:
    """The subpackage a file of the tree belongs to ("" for the package root)."""
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else ""


def imported_files(path: Path) -> list[tuple[int, Path | None, str]]:
    """(line, the file or folder an import resolves to in the tree, the import as written) for every
    import of a petrov module in ``path``; absolute ``petrov.*`` imports resolve to None."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            written = "." * node.level + (node.module or "")
            if node.level == 0:
                if (node.module or "").split(".")[0] == "petrov":
                    found.append((node.lineno, None, written))
                continue
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            target = base.joinpath(*(node.module or "").split(".")) if node.module else base
            found.append((node.lineno, target, written))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "petrov":
                    found.append((node.lineno, None, alias.name))
    return found


def test_every_import_inside_the_package_is_relative_and_resolves_in_the_tree():
    bad = []
    for path in package_modules():
        for line, target, written in imported_files(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if target is None:
                bad.append(f"{where}: absolute import of {written} (write it relative)")
            elif not (target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()):
                bad.append(f"{where}: {written} resolves to {target.relative_to(ROOT)}, not a module of the tree")
            elif ROOT not in (target, *target.parents):
                bad.append(f"{where}: {written} leaves the package")
    assert not bad, "\n".join(bad)


def layer_edges() -> dict[tuple[str, str], str]:
    """(importing layer, imported layer) -> the first place it happens."""
    edges: dict[tuple[str, str], str] = {}
    for path in package_modules():
        for line, target, _ in imported_files(path):
            if target is None or target == ROOT:
                continue
            a, b = _layer_of(path), target.relative_to(ROOT).parts[0]
            if a != b:
                edges.setdefault((a, b), f"{path.relative_to(ROOT)}:{line}")
    return edges


def test_the_subpackages_are_layers_that_import_only_downwards():
    order = {name: k for k, name in enumerate(LAYERS)}
    order[""] = len(LAYERS)  # the package root may use anything
    edges = layer_edges()
    assert edges, "no import between subpackages found: the check reads nothing"
    upward = [f"{a or 'the root'} imports {b} at {where}" for (a, b), where in edges.items()
              if order[a] <= order[b]]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_is_a_package_of_the_tree(layer):
    assert (ROOT / layer / "__init__.py").is_file()


def module_map() -> str:
    """The table under the README's "What is inside"."""
    text = (ROOT / "README.md").read_text()
    start = text.index("## What is inside")
    end = text.index("\n## ", start + 1) if "\n## " in text[start + 1:] else len(text)
    return text[start:end]


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")[1:]  # petrov.a.b -> a/b(.py)
    target = ROOT.joinpath(*parts) if parts else ROOT
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def test_the_readme_module_map_names_modules_of_the_tree_and_every_subpackage():
    table = module_map()
    named = set(re.findall(r"`(petrov(?:\.\w+)+)`", table))
    assert named, "no module named in the README's module map"
    stale = sorted(m for m in named if not _resolves(m) and not _resolves(m.rsplit(".", 1)[0]))
    assert not stale, f"the README's module map names modules that are not in the tree: {stale}"
    folders = {p.parent.relative_to(ROOT).as_posix() for layer in LAYERS for p in (ROOT / layer).rglob("__init__.py")}
    missing = sorted(f for f in folders if f"`{f}/`" not in table and "petrov." + f.replace("/", ".") not in named
                     and f != "train/configs")  # the presets' folder holds TOML files only
    assert not missing, f"subpackages missing from the README's module map: {missing}"
