"""``generate_dataset``: one entry point for every registered kind, on grids or on meshes.

Grid kinds (``recipes.RECIPES``: burgers, darcy, ...) are written by
[`petrov.datasets.storage.generate_grid_dataset`][], mesh kinds (``mesh.recipes.MESH_RECIPES``:
darcy-mesh) by [`petrov.datasets.mesh.storage.generate_mesh_dataset`][]; both follow the same rules.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..common.quick import quick_samples
from .mesh.recipes import MESH_RECIPES
from .mesh.storage import generate_mesh_dataset
from .recipes import RECIPES
from .storage import generate_grid_dataset


def generate_dataset(
    kind: str,
    path: str | os.PathLike,
    n_samples: int,
    resolution: int | None = None,
    seed: int = 0,
    *,
    overwrite: bool = False,
    chunk_size: int | None = None,
    workers: int = 0,
    progress: bool = True,
    callback: Callable[[int, int], None] | None = None,
    **params: Any,
) -> Path:
    """Generate ``n_samples`` samples of dataset ``kind`` at native ``resolution`` into the HDF5 file ``path``.

    ``params`` are the kind's parameters (see ``recipes``; unknown names are a ValueError listing the
    valid ones). ``resolution`` defaults to the kind's native grid (Burgers 8192, Darcy 421); lower
    resolutions can later be loaded by striding. Missing parent folders are created. An existing
    complete ``path`` with the same kind, parameters, seed, resolution and ``n_samples`` is kept as it
    is (nothing to do); any other existing ``path`` is a FileExistsError unless ``overwrite`` (the old
    file is replaced only once the new one is complete). In quick mode (``PETROV_QUICK=1``, see
    [`petrov.common.quick`][]) at most ``QUICK_SAMPLES`` samples are generated. An existing
    ``path.partial`` with the same kind, parameters, seed, resolution and ``n_samples`` is resumed
    (even with ``overwrite``); one with different settings is a ValueError unless ``overwrite``.
    ``callback(n_complete, n_samples)`` runs after each chunk is on disk. Returns ``Path(path)``.
    Mesh kinds (``darcy-mesh``) take no ``resolution`` (their spacing is the ``h`` parameter).
    """
    if kind not in RECIPES and kind not in MESH_RECIPES:
        raise KeyError(f"{RECIPES.unknown_message(kind)}; mesh kinds: {', '.join(MESH_RECIPES.names())}")
    n_samples = quick_samples(n_samples) if isinstance(n_samples, (int, np.integer)) else n_samples
    options = dict(overwrite=overwrite, chunk_size=chunk_size, workers=workers, progress=progress, callback=callback)
    if kind in MESH_RECIPES:
        if resolution is not None:
            raise ValueError(f"{kind} is a mesh dataset: it has no resolution (its mesh spacing is the h parameter)")
        return generate_mesh_dataset(kind, path, n_samples, seed, **options, **params)
    return generate_grid_dataset(kind, path, n_samples, resolution, seed, **options, **params)


__all__ = ["generate_dataset"]
