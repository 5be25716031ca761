"""Module paths of petrov 0.1 that moved in 0.2, importable until petrov 0.3.0 (``REMOVED_IN``).

``import petrov.train.evaluate`` still works and gives the module's new home (``petrov.evaluate``)
with a ``DeprecationWarning`` naming it.  ``MOVED`` is the whole table (CHANGELOG.md says why
each moved); a package entry covers its submodules (``petrov.operators.mixers.galerkin`` ->
``petrov.operators.attention.mixers.galerkin``).  [`install`][] puts the finder on
``sys.meta_path`` (the package root does, at ``import petrov``).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

REMOVED_IN = "0.3.0"  # the release that drops these names

MOVED: dict[str, str] = {
    # the command line spans every subpackage: it moved above them, one module per command group
    "petrov.train.cli": "petrov.cli",
    "petrov.train.console": "petrov.cli.console",
    "petrov.train.commands": "petrov.cli.training",
    "petrov.train.commands_registry": "petrov.cli.catalog",
    "petrov.datasets.commands": "petrov.cli.data",
    "petrov.train.inverse.commands": "petrov.cli.inverse",
    # evaluation and inverse problems are not training: rooms of their own
    "petrov.train.evaluate": "petrov.evaluate",
    "petrov.train.plots": "petrov.evaluate.plots",
    "petrov.train.inverse": "petrov.inverse",
    # the attention layer with its normalizations, kernels and mixers in one room
    "petrov.operators.normalization": "petrov.operators.attention.norms",
    "petrov.operators.fused_galerkin": "petrov.operators.attention.fused",
    "petrov.operators.mixers._kernels": "petrov.operators.attention.kernels",
    "petrov.operators.mixers": "petrov.operators.attention.mixers",
    # latent1d and latent2d differ only in their dimension: one module
    "petrov.operators.models.latent1d": "petrov.operators.models.latent",
    "petrov.operators.models.latent2d": "petrov.operators.models.latent",
    # the encoder was a second file named latent.py beside models/latent.py: named after what it holds
    "petrov.operators.latent": "petrov.operators.latent_encoder",
}


# names inside a module that moved to another package (resolved on first use: the old package must not
# import the new one, which sits above it)
MOVED_ATTRIBUTES: dict[str, str] = {
    # inverse problems are not training
    "petrov.train.invert": "petrov.inverse.invert",
    # the grid and mesh halves of generate_dataset (their storage modules now read files only)
    "petrov.datasets.storage.generate_grid_dataset": "petrov.datasets.generate_dataset",
    "petrov.datasets.mesh.generate_mesh_dataset": "petrov.datasets.generate_dataset",
    "petrov.datasets.mesh.storage.generate_mesh_dataset": "petrov.datasets.generate_dataset",
}


def moved_attribute(module: str, name: str):
    """``module.name`` for a name listed in ``MOVED_ATTRIBUTES`` (with a ``DeprecationWarning``
    naming its new home); ``AttributeError`` for any other name (a package's ``__getattr__``)."""
    new = MOVED_ATTRIBUTES.get(f"{module}.{name}")
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(f"{module}.{name} moved to {new}; import it from there (the old name goes away in petrov "
                  f"{REMOVED_IN})", DeprecationWarning, stacklevel=3)
    home, _, attr = new.rpartition(".")
    return getattr(importlib.import_module(home), attr)


def new_name(old: str) -> str | None:
    """Where the 0.1 module ``old`` lives now (None if it did not move)."""
    if old in MOVED:
        return MOVED[old]
    for prefix in sorted(MOVED, key=len, reverse=True):  # the longest package entry that covers it
        if old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix):]
    return None


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names and hands out the new modules themselves (one module object, so
    registries and ``isinstance`` see a single copy)."""

    def find_spec(self, fullname, path=None, target=None):
        if new_name(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=False)

    def create_module(self, spec) -> ModuleType:
        new = new_name(spec.name)
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old path goes away in petrov "
                      f"{REMOVED_IN})", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported under its new name."""


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once): an old submodule name such as
    ``petrov.train.inverse.api`` must not be found again, as a second copy, in the path of its
    moved package."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
