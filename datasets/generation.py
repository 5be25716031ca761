"""``generate_dataset``: one entry point for every registered kind, on grids or on meshes, whole or a shard.

Grid kinds (``recipes.RECIPES``: burgers, darcy, ...) are written by ``grid_generation.generate_grid``,
mesh kinds (``mesh.recipes.MESH_RECIPES``: darcy-mesh) by ``mesh.generation.generate_mesh``; both
follow the same rules and the same write path (``write_path``). A shard (``shards``) is a contiguous
range of the samples; ``merging.merge_shards`` makes the whole file of a set of them.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..common.quick import quick_samples
from .grid_generation import generate_grid
from .mesh.generation import generate_mesh
from .mesh.recipes import MESH_RECIPES
from .recipes import RECIPES
from .shards import sample_range
from .write_path import WriteOptions


def generate_dataset(
    kind: str,
    path: str | os.PathLike,
    n_samples: int,
    resolution: int | None = None,
    seed: int = 0,
    *,
    shard: tuple[int, int] | str | None = None,
    indices: Any = None,
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

    A shard of the ``n_samples``: ``shard=(K, N)`` (or ``"K/N"``, K counted from 0: what
    ``$SLURM_ARRAY_TASK_ID`` gives with ``--array=0-(N-1)``) writes the K-th of N contiguous ranges,
    ``indices=(a, b)`` (or ``"a:b"``, ``range(a, b)``) the samples ``a .. b-1``, into a shard file of
    those samples that records its range and the whole recipe; ``merge_shards`` writes the whole file
    from a set of shards, identical to one generation of all the samples (``petrov.datasets.shards``).
    """
    if kind not in RECIPES and kind not in MESH_RECIPES:
        raise KeyError(f"{RECIPES.unknown_message(kind)}; mesh kinds: {', '.join(MESH_RECIPES.names())}")
    counted = isinstance(n_samples, (int, np.integer)) and not isinstance(n_samples, bool)
    n_samples = quick_samples(n_samples) if counted else n_samples
    # a bad n_samples is reported by the generation's own checks
    part = sample_range(n_samples, shard, indices) if counted and n_samples >= 1 else None
    options = WriteOptions(overwrite=overwrite, chunk_size=chunk_size, progress=progress, callback=callback)
    if kind in MESH_RECIPES:
        if resolution is not None:
            raise ValueError(f"{kind} is a mesh dataset: it has no resolution (its mesh spacing is the h parameter)")
        return generate_mesh(kind, path, n_samples, seed, params, options, workers, part)
    return generate_grid(kind, path, n_samples, resolution, seed, params, options, workers, part)


__all__ = ["generate_dataset"]
