"""Generating a dataset of a mesh kind (``darcy-mesh``) into a mesh file, whole or one shard of it.

Each sample is made from ``(seed, index)`` alone by the kind's recipe (in worker processes with
``workers``), checked, and written through the one write path (``petrov.datasets.write_path``) in
chunks: a partial file resumed after an interruption, the content hash chained, one writer per path, the
rename at the end. The file is the same whatever the chunking, the number of workers or the shards.
"""
from __future__ import annotations

import collections
import contextlib
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ...common.path_checks import require_space
from ...common.worker_pool import worker_pool
from ..shards import first_index, shard_attrs
from ..write_path import WriteOptions, check_generation_args, write_dataset
from .domains import Domain
from .recipes import MeshRecipe, get_mesh_recipe
from .sample import MeshSample
from .storage import DEFAULT_CHUNK_SIZE, mesh_attrs, mesh_file_layout, sample_rows

GENERATION_ADVICE = "the generator made an invalid mesh: please report it with the kind, parameters, seed and index"


def _make_sample(kind: str, params, seed: int, index: int) -> tuple[Domain, dict[str, MeshSample]]:
    """One checked sample (runs in the worker processes too)."""
    domain, samples = get_mesh_recipe(kind).sample(params, seed, index)
    for variant, sample in samples.items():
        sample.check(name=f"{kind} sample {index} ({variant})", advice=GENERATION_ADVICE)
    return domain, samples


def _in_order(pool, fn: Callable, calls: Iterable[tuple], window: int) -> Iterator:
    """``fn(*args)`` for each of ``calls``, results in order; with a pool, at most ``window`` in flight."""
    if pool is None:
        for args in calls:
            yield fn(*args)
        return
    pending: collections.deque = collections.deque()
    try:
        for args in calls:
            pending.append(pool.submit(fn, *args))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:  # interrupted: queued samples are not made
            future.cancel()


def _estimated_bytes(recipe: MeshRecipe, params, n_samples: int) -> int:
    """A generous estimate of the file size: hexagonal-lattice node counts (1.2 / h^2 on the unit square),
    33 bytes per node and two triangles of 12 bytes per node."""
    spacing = [attrs["spacing"] for attrs in recipe.variant_attrs(params).values()]
    nodes = sum(1.2 / s**2 for s in spacing) if spacing else 0.0
    return int(n_samples * nodes * (33 + 24))


def _made(recipe: MeshRecipe, p, seed: int, attrs: dict, workers: int):
    """The block source of the write path: samples ``first_index + lo ..`` as rows, ``chunk`` at a time."""
    offset, n_samples = first_index(attrs), int(attrs["n_samples"])

    def blocks(start: int, chunk: int, stack: contextlib.ExitStack):
        pool = stack.enter_context(worker_pool(workers)) if workers else None
        calls = ((recipe.name, p, seed, offset + i) for i in range(start, n_samples))
        results = _in_order(pool, _make_sample, calls, window=4 * workers)
        stack.callback(results.close)  # cancels the queued samples on an interruption
        for lo in range(start, n_samples, chunk):
            hi = min(lo + chunk, n_samples)
            yield lo, hi, [sample_rows(attrs, samples, domain) for domain, samples in
                           (next(results) for _ in range(lo, hi))]

    return blocks


def generate_mesh(kind: str, path: str | os.PathLike, n_samples: int, seed: int, params: dict[str, Any],
                  options: WriteOptions, workers: int = 0, part: Any = None) -> Path:
    """Generate ``n_samples`` samples of the mesh kind ``kind`` (e.g. ``"darcy-mesh"``) into ``path``: the
    mesh half of ``petrov.datasets.generate_dataset``, whose docstring holds the rules (quick mode and
    the shard, ``part`` from ``petrov.datasets.shards.sample_range``, are worked out there). ``workers`` > 0
    makes samples in that many single-threaded processes (the same file whatever the count); chunks of
    16 samples unless ``options.chunk_size`` says otherwise."""
    recipe = get_mesh_recipe(kind)
    if not recipe.generatable:
        recipe.validate(recipe.make_params(params))  # raises, saying how such files are made
    p = recipe.make_params(params)
    recipe.validate(p)
    check_generation_args(n_samples, seed, workers)
    attrs = shard_attrs(mesh_attrs(recipe, p, n_samples, seed, options.chunk_size or 0), part)

    def admit(already_written: int) -> None:
        require_space(path, _estimated_bytes(recipe, p, int(attrs["n_samples"])) - already_written,
                      "free some space, or generate fewer samples or use a larger h", flag="-o")

    desc = recipe.name + (f" shard {attrs['shard']}" if attrs.get("shard") else "")
    return write_dataset(path, attrs, mesh_file_layout(attrs, recipe.variant_attrs(p)),
                         _made(recipe, p, seed, attrs, workers), options, default_chunk=DEFAULT_CHUNK_SIZE,
                         admit=admit, desc=desc)


__all__ = ["generate_mesh"]
