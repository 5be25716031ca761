"""Generating a dataset of a grid kind (burgers, darcy, ...) into a grid file, whole or one shard of it.

The samples come from the kind's recipe a chunk at a time (``recipe.produce``, on a pool of worker
processes for kinds that use one), are checked (shape, finite) and go through the one write path
(``write_path``): a partial file resumed after an interruption, the content hash chained chunk by chunk,
one writer per path, the rename at the end. Because sample ``i`` depends only on ``(seed, i)``, the
result equals an uninterrupted run's, and shards merged equal one run of all the samples.
"""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from . import burgers, grf, navier_stokes
from ..common.path_checks import require_space
from ..common.worker_pool import worker_pool
from .grid_files import default_chunk_size, file_bytes, grid_attrs, grid_layout, sample_shapes
from .recipes import Recipe, get_recipe
from .resources import available_memory, check_memory
from .shards import first_index, shard_attrs
from .write_path import WriteOptions, check_generation_args, write_dataset


def check_resources(recipe: Recipe, resolution: int, n_samples: int, chunk_size: int | None,
                    path: Path, params=None, already_written: int = 0) -> None:
    """Refuse a generation into ``path`` that cannot fit: memory for one chunk (ValueError), disk for the
    rest of the file (``NoSpace``; ``already_written``: bytes of the partial file being resumed)."""
    params = recipe.params_cls() if params is None else params
    points = math.prod(recipe.grid(resolution))
    values = _sample_values(recipe, params, resolution)
    chunk = chunk_size or default_chunk_size(values)
    # a chunk's x and y (with a trajectory's snapshots) in float64, plus one solve's working set (sparse matrix
    # and its factor or multigrid hierarchy, FFT buffers): a generous 2 kB per grid point
    check_memory(8 * (points + values) * chunk + 2048 * points,
                 f"{recipe.name} at resolution {resolution} ({points:,} grid points per sample)",
                 f"choose a lower --resolution (native {recipe.native_resolution}) or a smaller --chunk-size")
    require_space(path, file_bytes(recipe, params, resolution, n_samples) - already_written,
                  "free some space, or generate fewer samples or a lower resolution", flag="-o")


AMPLITUDE_BATCH = 256  # initial conditions drawn at a time to find their largest amplitude


def largest_amplitude(p, resolution: int, seed: int, first: int, count: int) -> float:
    """max|u0| over the Burgers initial conditions ``first .. first + count - 1`` (what sizes the solver)."""
    top = 0.0
    for lo in range(first, first + count, AMPLITUDE_BATCH):
        u0 = grf.periodic_grf_1d(resolution, seed, range(lo, min(lo + AMPLITUDE_BATCH, first + count)),
                                 alpha=p.alpha, tau=p.tau, sigma=p.sigma)
        top = max(top, float(np.abs(u0).max()))
    return top


def _check_burgers(p, resolution: int, seed: int, first: int, count: int) -> None:
    grf.check_periodic_grf(resolution, alpha=p.alpha, tau=p.tau, sigma=p.sigma)
    umax = largest_amplitude(p, resolution, seed, first, count)
    field = f"sigma={p.sigma:g}, tau={p.tau:g}, alpha={p.alpha:g}, "
    burgers.check_solver_memory(resolution, p.nu, umax, available_memory(), amplitude_from=field)
    burgers.check_time_steps(p.t, p.nu, umax, amplitude_from=field)


def _check_darcy(p, resolution: int, seed: int, first: int, count: int) -> None:
    grf.check_neumann_grf(resolution, alpha=p.alpha, tau=p.tau)


def _check_navier_stokes(p, resolution: int, seed: int, first: int, count: int) -> None:
    navier_stokes.check_generation(p, resolution, count)


# by recipe family: the checks of a generation's random field and solver before any work (ValueError),
# and what a non-finite target most likely means
_FAMILY_CHECKS = {"burgers": _check_burgers, "burgers-trajectory": _check_burgers, "darcy": _check_darcy,
                  "navier-stokes": _check_navier_stokes}
_NON_FINITE_HINT = {"burgers": burgers.UNSTABLE_HINT, "burgers-trajectory": burgers.UNSTABLE_HINT,
                    "navier-stokes": navier_stokes.UNSTABLE_HINT}


def _sample_values(recipe: Recipe, params, resolution: int) -> int:
    """Values in one sample's target: its grid points times its snapshots (what sizes a chunk)."""
    return math.prod(recipe.sample_shape("y", params, resolution))


def non_finite_message(recipe: Recipe, name: str, first: int, last: int) -> str:
    """The error for non-finite values in field ``name`` of samples ``first..last``, with the likely cause."""
    hint = _NON_FINITE_HINT.get(recipe.family) if name == "y" else None
    return (f"{recipe.name}: non-finite values in {name} for samples {first}..{last}"
            + (f": {hint}" if hint else "; check the equation parameters"))


def _produced(recipe: Recipe, p, resolution: int, seed: int, offset: int, n_samples: int, workers: int):
    """The block source of the write path: the recipe's samples ``offset + lo ..`` as float32, checked."""
    shapes = sample_shapes(recipe, p, resolution)

    def blocks(start: int, chunk: int, stack: contextlib.ExitStack):
        # one pool for the whole run (starting spawn workers costs seconds); an interrupt kills it at once
        pool = stack.enter_context(worker_pool(workers)) if workers and recipe.uses_workers else 0
        for lo in range(start, n_samples, chunk):
            hi = min(lo + chunk, n_samples)
            first, last = offset + lo, offset + hi - 1
            data = dict(zip(("x", "y"), recipe.produce(p, resolution, seed, np.arange(first, last + 1), pool)))
            for name, arr in data.items():
                arr = np.asarray(arr)
                if arr.shape != (hi - lo, *shapes[name]):
                    raise RuntimeError(f"{recipe.name} recipe returned {name} of shape {arr.shape}, expected "
                                       f"{(hi - lo, *shapes[name])}")
                if not np.isfinite(arr).all():
                    raise RuntimeError(non_finite_message(recipe, name, first, last))
                with np.errstate(over="ignore"):  # said below, in one line
                    data[name] = arr.astype(np.float32)
                if not np.isfinite(data[name]).all():  # finite in float64, beyond float32's range
                    raise ValueError(f"{recipe.name}: {name} of samples {first}..{last} exceeds float32's range "
                                     f"(3.4e38), in which samples are stored; scale the equation's parameters down")
            yield lo, hi, data

    return blocks


def generate_grid(kind: str, path: str | os.PathLike, n_samples: int, resolution: int | None, seed: int,
                  params: dict[str, Any], options: WriteOptions, workers: int = 0, part: Any = None) -> Path:
    """Generate ``n_samples`` samples of the grid kind ``kind`` at native ``resolution`` into ``path``: the
    grid half of ``petrov.datasets.generate_dataset``, whose docstring holds the rules (quick mode and the
    shard, ``part`` from ``shards.sample_range``, are worked out there, once for both halves)."""
    recipe = get_recipe(kind)
    p = recipe.make_params(params)
    resolution = recipe.native_resolution if resolution is None else resolution
    recipe.validate(p, resolution)
    check_generation_args(n_samples, seed, workers)
    attrs = shard_attrs(grid_attrs(recipe, p, resolution, seed, n_samples, options.chunk_size or 0), part)
    count = int(attrs["n_samples"])
    check = _FAMILY_CHECKS.get(recipe.family)
    if check is not None:
        check(p, resolution, seed, first_index(attrs), count)

    def admit(already_written: int) -> None:
        check_resources(recipe, resolution, count, options.chunk_size, Path(path), p, already_written)

    desc = f"{kind} n={resolution}" + (f" shard {attrs['shard']}" if attrs.get("shard") else "")
    blocks = _produced(recipe, p, resolution, seed, first_index(attrs), count, workers)
    return write_dataset(path, attrs, grid_layout(sample_shapes(recipe, p, resolution)), blocks, options,
                         default_chunk=default_chunk_size(_sample_values(recipe, p, resolution)), admit=admit,
                         desc=desc)


__all__ = ["check_resources", "generate_grid", "largest_amplitude", "non_finite_message"]
