"""mkdocs hook: one API reference page per module of the package, generated at build time.

The hand-written pages ``api/PACKAGE.md`` hold each subpackage's public names (what users import);
this hook adds a page for every module of the installed package (``petrov.operators.spectral`` ->
``api/petrov/operators/spectral.md``, rendered by mkdocstrings from its docstrings) and lists them in
the navigation under the API reference, each subpackage's modules after its page. Every object a
docstring cross-references (``[`name`][]``) thereby has an anchor on the site.
"""
from __future__ import annotations

import pkgutil

import petrov
from mkdocs.structure.files import File

PACKAGES = ("grids", "operators", "datasets", "train", "evaluate", "export", "inverse", "pretrained", "cli", "common")
_PAGES: dict[str, str] = {}


def modules() -> list[str]:
    """Every module of the installed package by its dotted name, subpackages before their modules."""
    names = [info.name for info in pkgutil.walk_packages(petrov.__path__, "petrov.")]
    return sorted(n for n in names if not n.split(".")[-1].startswith("_") and n.count(".") >= 1)


def page_path(module: str) -> str:
    return "api/" + module.replace(".", "/") + ".md"


def page(module: str) -> str:
    return f"# {module}\n\n::: {module}\n    options:\n      show_root_heading: false\n      show_submodules: false\n"


def _nav_entries(names: list[str]) -> list:
    """Navigation entries titled by the name below the subpackage (``attention.mixers.galerkin``)."""
    return [{(name.split(".", 2)[2] if name.count(".") > 1 else "the package"): page_path(name)} for name in names]


def on_config(config):
    _PAGES.clear()
    names = [n for n in modules() if n.split(".")[1] in PACKAGES]
    entry = next(e for e in config.nav if isinstance(e, dict) and "API reference" in e)
    written = petrov_api_pages(entry)  # petrov.X's page is the hand-written api/X.md where there is one
    for name in names:
        if name.count(".") > 1 or name.split(".")[1] not in written:
            _PAGES[page_path(name)] = page(name)
    _PAGES[page_path("petrov")] = page("petrov")
    sections = [{"petrov (the root)": page_path("petrov")}]
    for package in PACKAGES:
        head = [{f"petrov.{package}": f"api/{package}.md"}] if package in written else []
        own = [n for n in names if n.startswith(f"petrov.{package}")]
        own = own if package not in written else [n for n in own if n != f"petrov.{package}"]
        sections.append({f"petrov.{package}": head + _nav_entries(own)})
    entry["API reference"] = sections
    return config


def petrov_api_pages(entry) -> set[str]:
    """The subpackages with a hand-written page (``api/PACKAGE.md``) in the configured navigation."""
    found = set()
    for item in entry["API reference"]:
        for path in item.values():
            if isinstance(path, str) and path.startswith("api/") and path.count("/") == 1:
                found.add(path[4:-3])
    return found


def on_files(files, config):
    for path, content in _PAGES.items():
        files.append(File.generated(config, path, content=content))
    return files
