"""Dataset files of samples on grids: their attributes, their size, and their layout for the write path.

File layout (h5py): datasets ``x`` and ``y``, float32 ``(n_samples, *grid)``, or ``(n_samples, *grid, c)``
with a trailing channel axis (imported multi-channel data; a trajectory kind's ``y`` with its
``c = T + 1`` snapshots), one sample per HDF5 chunk (so a read touches only the samples asked for),
all chunks allocated when the file is made (a disk filling up later cannot fail a write), unwritten
samples filled with NaN. Attributes: ``format``/``format_version``, ``kind``, ``family``, ``equation``,
every parameter (one attribute each, plus all of them as JSON in ``params``), ``seed``,
``native_resolution``, ``grid`` ("periodic"/"nodes"; imported files also "cells"), ``dim``,
``solver_settings`` (JSON), ``petrov_version``, ``created`` (UTC ISO time), ``n_samples``,
``n_complete``, ``x_name``/``y_name``, ``chunk_size``, ``content_hash`` (``content_hash``); a shard
(``shards``) also ``shard_start``, ``shard_stop``, ``total_samples``.

Imported files (``petrov import``, kind ``imported``) have the same layout except that ``x``/``y`` are
``(n_samples, *grid, channels)`` (attributes ``x_channels``/``y_channels``), and record ``domain`` and
``sources`` (JSON) instead of generation parameters.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..common.path_checks import require_space
from .hdf5_files import FORMAT, claimed_now, writing_h5
from .recipes import Recipe
from .write_path import SHARD_KEYS, Layout, dataset_attrs, start_hash

FORMAT_VERSION = 1
# attributes that must agree for a partial file to be resumed (or a complete one kept)
IDENTITY = ("format_version", "kind", "params", "seed", "native_resolution", "n_samples", *SHARD_KEYS)
FIELDS = ("x", "y")


def default_chunk_size(n_points: int) -> int:
    """Samples per generation chunk: about 4M grid values (32 MB in float64), between 1 and 256."""
    return int(min(256, max(1, 2**22 // n_points)))


def grid_attrs(recipe: Recipe, params, resolution: int, seed: int, n_samples: int, chunk_size: int) -> dict:
    """The attributes of a grid file of ``recipe`` (module docstring)."""
    return dataset_attrs(recipe, params, FORMAT, FORMAT_VERSION, n_samples, chunk_size, seed=int(seed),
                         native_resolution=int(resolution), grid=recipe.grid_kind, dim=recipe.dim)


def sample_shapes(recipe: Recipe, params, resolution: int) -> dict[str, tuple[int, ...]]:
    """The shape of one stored sample of each field."""
    return {name: recipe.sample_shape(name, params, resolution) for name in FIELDS}


def stored_bytes(shapes: dict[str, tuple[int, ...]], n_samples: int) -> int:
    """About how large a file of ``n_samples`` samples of these ``shapes`` is: float32 values, one HDF5
    chunk per sample and field (about 100 bytes of index each), a few kB of header."""
    values = sum(math.prod(shape) for shape in shapes.values())
    return n_samples * (4 * values + 2 * 128) + 2**16


def file_bytes(recipe: Recipe, params, resolution: int, n_samples: int) -> int:
    """About how large the file of ``n_samples`` samples of ``recipe`` is (``stored_bytes``)."""
    return stored_bytes(sample_shapes(recipe, params, resolution), n_samples)


def create_grid_file(path: Path, attrs: dict[str, Any], shapes: dict[str, tuple[int, ...]], **options: Any) -> None:
    """An empty grid file at ``path``: ``x``/``y`` of ``attrs["n_samples"]`` samples of ``shapes``, NaN,
    their disk space claimed now; nothing is left at ``path`` if it cannot be made. ``options`` go to
    ``hdf5_files.writing_h5`` (``shown``, ``locking``)."""
    n_samples = int(attrs["n_samples"])
    needed = stored_bytes(shapes, n_samples)
    require_space(options.get("shown") or path, needed)  # HDF5 can be left in a state that crashes the
    try:                                                  # interpreter by a full disk
        with writing_h5(path, "w", needed, **options) as h5:
            for name, sample in shapes.items():
                h5.create_dataset(name, shape=(n_samples, *sample), dtype="float32", chunks=(1, *sample),
                                  fillvalue=np.nan, dcpl=claimed_now())
            h5.attrs.update(attrs)
            start_hash(h5)
    except BaseException:
        path.unlink(missing_ok=True)  # nothing written yet: no partial file to keep
        raise


def _writer(h5: h5py.File, n_complete: int, held: dict):
    held.update((name, h5[name]) for name in FIELDS)

    def write(lo: int, data: dict[str, np.ndarray]) -> None:
        for name in FIELDS:
            held[name][lo : lo + len(data[name])] = data[name]

    return write


def _samples(data: dict[str, np.ndarray]):
    return zip(*(data[name] for name in FIELDS))


def _reader(h5: h5py.File):
    fields = {name: h5[name] for name in FIELDS}
    return lambda lo, hi: {name: np.asarray(ds[lo:hi], dtype=np.float32) for name, ds in fields.items()}


def grid_layout(shapes: dict[str, tuple[int, ...]], **options: Any) -> Layout:
    """The write path's view of a grid file whose samples have these ``shapes`` (a block is
    ``{"x": float32 (k, *shape), "y": ...}``; the content hash takes ``x_i`` then ``y_i``; ``options``
    to ``create_grid_file``)."""
    return Layout(identity=IDENTITY, create=lambda path, attrs: create_grid_file(path, attrs, shapes, **options),
                  writer=_writer, samples=_samples, reader=_reader)


__all__ = ["FORMAT_VERSION", "IDENTITY", "create_grid_file", "default_chunk_size", "file_bytes", "grid_attrs",
           "grid_layout", "sample_shapes", "stored_bytes"]
