"""Reading petrov dataset files on grids: ``open_stored`` and ``StoredData``, strided reads of the samples.

The file layout is in ``grid_files``; files are written along the one write path (``write_path``) by
``grid_generation`` (``petrov generate``), ``merging`` (``petrov merge``) and ``importing``
(``petrov import``). Generation writes ``FILE.h5.partial`` in the same directory, chunk by chunk in index
order, and renames it to ``FILE.h5`` when all samples are written; rerunning an interrupted generation
with the same parameters resumes from ``n_complete``, and because sample ``i`` depends only on
``(seed, i)`` the result equals an uninterrupted run. Complete files carry ``content_hash`` (see
``identity``): a run records it to test on the data it trained on.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .hdf5_files import FORMAT, MESH_FORMAT, file_attrs, open_h5
from .recipes import RECIPES, get_recipe
from .sampling import cell_average


@dataclass
class StoredData:
    """A dataset file opened for reading, whatever its format (petrov HDF5 or FNO .mat).

    ``x``/``y`` are array-likes (h5py datasets or numpy arrays) holding ``(n, *grid)`` samples, or
    ``(*grid reversed, n)`` when ``transposed`` (MATLAB v7.3 files seen through h5py).
    """

    path: Path
    kind: str
    native_resolution: int
    periodic: bool
    dim: int
    n_samples: int  # samples requested
    n_complete: int  # samples actually present
    attrs: dict[str, Any]
    x: Any
    y: Any
    transposed: bool = False
    source: str = FORMAT
    cells: bool = False  # a cell-centred grid: coarsened by averaging blocks of cells (see sampling)
    native_shape: tuple[int, ...] = ()  # points per grid axis (empty: native_resolution on every axis)
    axis_grids: tuple[str, ...] = ()  # "periodic" / "nodes" / "cells" per axis (empty: the file's one grid)
    _handle: Any = field(default=None, repr=False)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        """Points per grid axis of the stored grid (``(n,) * dim`` for square files)."""
        return tuple(self.native_shape) or (self.native_resolution,) * self.dim

    @property
    def grid_kinds(self) -> tuple[str, ...]:
        """The grid kind of each axis: "periodic", "nodes" or "cells"."""
        one = "cells" if self.cells else "periodic" if self.periodic else "nodes"
        return tuple(self.axis_grids) or (one,) * self.dim

    @property
    def axis_periodic(self) -> tuple[bool, ...]:
        """Whether each grid axis is periodic."""
        return tuple(kind == "periodic" for kind in self.grid_kinds)

    @property
    def fields(self) -> list[str]:
        """The names of the stored fields: a time-series file's ``fields`` attribute; ``[]`` for other
        files (one unnamed field per channel)."""
        return list(json.loads(self.attrs["fields"])) if "fields" in self.attrs else []

    @property
    def time_series(self) -> bool:
        """Whether ``y`` is ``(n, *grid, S, F)``: states, then fields (kind ``time-series``)."""
        return self.kind == "time-series"

    @property
    def n_states(self) -> int:
        """The states of a trajectory stored in ``y`` (its ``S`` axis, or its channels for older trajectory kinds)."""
        shape = self.channel_shape("y") or (1,)
        return shape[0] if self.time_series else shape[-1]

    def strides(self, stride: int | tuple[int, ...]) -> tuple[int, ...]:
        """One stride per grid axis (an int applies to every axis)."""
        return tuple(stride) if isinstance(stride, (tuple, list)) else (stride,) * self.dim

    def read(self, name: str, indices: np.ndarray, stride: int | tuple[int, ...], block_bytes: int = 2**26) -> np.ndarray:
        """Samples ``indices`` (any order, repeats allowed) of field ``"x"``/``"y"``, strided by ``stride``
        along every grid axis (or one stride per axis): float32 ``(len(indices), *grid)``. Only the samples
        asked for are read, in increasing order (as HDF5 wants), a block of at most ``block_bytes`` of
        full-resolution samples at a time, strided in memory (faster than an HDF5 strided selection); on
        cell-centred axes blocks of ``stride`` cells are averaged. NaN or inf is a ValueError naming the
        file, the field and the first bad sample."""
        ds = self.x if name == "x" else self.y
        indices = np.asarray(indices, dtype=np.int64)
        unique, inverse = np.unique(indices, return_inverse=True)
        channels = self.channel_shape(name)
        strides, kinds = self.strides(stride), self.grid_kinds
        block = max(1, block_bytes // (4 * math.prod(self.grid_shape) * int(np.prod(channels))))
        grid_sel = tuple(slice(None, None, 1 if kind == "cells" else s) for s, kind in zip(strides, kinds))
        parts = []
        for lo in range(0, len(unique), block):
            rows = unique[lo : lo + block]
            # consecutive runs as slices: h5py's list selection is very slow
            runs = np.split(rows, np.flatnonzero(np.diff(rows) != 1) + 1)
            part = np.concatenate([self._rows(ds, int(r[0]), int(r[-1]) + 1, grid_sel) for r in runs])
            for d, (s, kind) in enumerate(zip(strides, kinds)):
                if kind == "cells":
                    part = cell_average(part, s, 1 + d, 1)
            bad = ~np.isfinite(part).reshape(len(rows), -1).all(axis=1)
            if bad.any():
                raise ValueError(
                    f"{self.path}: field {name!r} contains NaN or inf in sample {int(rows[bad][0])} "
                    f"(an unfinished or corrupt file, or bad values in imported data); regenerate or fix it"
                )
            parts.append(part)
        shape = (0,) + tuple(len(range(0, n, s)) for n, s in zip(self.grid_shape, strides)) + channels
        data = np.concatenate(parts) if parts else np.zeros(shape, np.float32)
        return data[inverse]

    def channel_shape(self, name: str) -> tuple[int, ...]:
        """``(c,)`` for a field stored with a trailing channel axis (imported files), else ``()``."""
        ds = self.x if name == "x" else self.y
        return () if self.transposed or ds.ndim == 1 + self.dim else tuple(ds.shape[1 + self.dim:])

    def read_channels(self, name: str, indices: np.ndarray, stride: int | tuple[int, ...]) -> np.ndarray:
        """[`read`][] with a channel axis always: float32 ``(len(indices), *grid, c)``."""
        data = self.read(name, indices, stride)
        return data if self.channel_shape(name) else data[..., None]

    def _rows(self, ds, lo: int, hi: int, grid_sel: tuple) -> np.ndarray:
        part = np.asarray(ds[..., lo:hi]).T if self.transposed else np.asarray(ds[lo:hi])
        return np.ascontiguousarray(part[(slice(None),) + grid_sel], dtype=np.float32)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> "StoredData":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def attribute_error(path: Path, name: str, value: Any, why: str) -> ValueError:
    """The error for a dataset file's attribute ``name`` whose ``value`` is wrong (``why``, e.g. "is not ...")."""
    return ValueError(f"{path}: attribute {name} = {value!r} {why}; the file's attributes were edited or the "
                      f"file is damaged: restore the attribute or regenerate the file")


def require_attrs(path: Path, attrs: dict[str, Any], names: tuple[str, ...]) -> None:
    """ValueError naming the first of ``names`` missing from a dataset file's attributes."""
    for name in names:
        if name not in attrs:
            raise ValueError(f"{path}: attribute {name!r} is missing; the file is damaged or was not written "
                             f"by petrov: regenerate it")


def whole_number(path: Path, name: str, value: Any, minimum: int = 0) -> int:
    """``value`` of the attribute ``name`` if it is a whole number >= ``minimum``, else ``attribute_error``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise attribute_error(path, name, value, f"is not a whole number >= {minimum}")
    return value


def stored_layout(path: Path, attrs: dict[str, Any], x_shape: tuple, y_shape: tuple) -> dict[str, Any]:
    """kind, grid, dimension and sample counts from a file's attributes, checked against the stored
    arrays (ValueError naming the attribute that does not fit)."""
    require_attrs(path, attrs, ("kind", "native_resolution", "grid", "n_samples", "n_complete"))
    if attrs["kind"] not in RECIPES:
        raise attribute_error(path, "kind", attrs["kind"], f"is not a dataset kind ({', '.join(RECIPES.names())})")
    recipe = get_recipe(attrs["kind"])
    kinds = _axis_grids(path, attrs)
    if attrs["grid"] not in ("periodic", "nodes", "cells") and not (kinds and attrs["grid"] == "mixed"):
        raise attribute_error(path, "grid", attrs["grid"], "is not 'periodic', 'nodes' or 'cells'")
    numbers = {}
    for name in ("native_resolution", "n_samples", "n_complete", "dim"):
        numbers[name] = whole_number(path, name, attrs.get(name, recipe.dim))  # imported: the dimension is per file
    dim, res, n = numbers["dim"], numbers["native_resolution"], numbers["n_samples"]
    grid = _native_shape(path, attrs, dim, res)
    if kinds and len(kinds) != dim:
        raise attribute_error(path, "axis_grids", attrs["axis_grids"], f"does not name one grid per axis ({dim})")
    for field_name, shape in (("x", tuple(x_shape)), ("y", tuple(y_shape))):
        if shape[:1] != (n,):
            raise attribute_error(path, "n_samples", n, f"does not match the stored {field_name} of shape {shape}")
        if dim not in (1, 2) or shape[1 : 1 + dim] != grid:
            name, value = (("dim", dim) if dim not in (1, 2) or len(shape) < 1 + dim
                           else ("native_shape", attrs["native_shape"]) if "native_shape" in attrs
                           else ("native_resolution", res))
            raise attribute_error(path, name, value, f"does not match the stored {field_name} of shape {shape}")
    if numbers["n_complete"] > n:
        raise attribute_error(path, "n_complete", numbers["n_complete"], f"is more than n_samples = {n}")
    return {"kind": attrs["kind"], "native_resolution": res, "periodic": attrs["grid"] == "periodic",
            "cells": attrs["grid"] == "cells", "dim": dim, "n_samples": n, "n_complete": numbers["n_complete"],
            "native_shape": grid if "native_shape" in attrs else (), "axis_grids": kinds}


def _json_list(path: Path, attrs: dict[str, Any], name: str) -> list | None:
    """The JSON list attribute ``name`` (None when absent); ``attribute_error`` if it is not one."""
    if name not in attrs:
        return None
    try:
        value = json.loads(attrs[name])
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, list):
        raise attribute_error(path, name, attrs[name], "is not a JSON list")
    return value


def _native_shape(path: Path, attrs: dict[str, Any], dim: int, res: int) -> tuple[int, ...]:
    """Points per grid axis: the ``native_shape`` attribute (rectangular grids), else ``res`` on every axis."""
    shape = _json_list(path, attrs, "native_shape")
    if shape is None:
        return (res,) * dim
    if len(shape) != dim or any(isinstance(v, bool) or not isinstance(v, int) or v < 2 for v in shape):
        raise attribute_error(path, "native_shape", attrs["native_shape"], f"is not {dim} whole numbers >= 2")
    return tuple(shape)


def _axis_grids(path: Path, attrs: dict[str, Any]) -> tuple[str, ...]:
    """The per-axis grid kinds of the ``axis_grids`` attribute (empty when absent)."""
    kinds = _json_list(path, attrs, "axis_grids") or []
    if any(kind not in ("periodic", "nodes", "cells") for kind in kinds):
        raise attribute_error(path, "axis_grids", attrs["axis_grids"], "names a grid other than periodic, nodes, cells")
    return tuple(kinds)


def open_stored(path: str | os.PathLike) -> StoredData:
    """Open a petrov HDF5 dataset file (complete or ``.partial``) for reading."""
    path = Path(path)
    h5 = open_h5(path)
    try:
        attrs = file_attrs(h5)
        if attrs.get("format") == MESH_FORMAT:
            raise ValueError(f"{path} holds samples on meshes ({attrs.get('kind')}), but this reads data on grids: "
                             f"give a file on grids (written by `petrov generate` of a grid kind or by `petrov "
                             f"import` without --mesh), or use this one with a mesh model (a mesh preset of "
                             f"`petrov train`; petrov.datasets.mesh.open_mesh_dataset in Python)")
        if attrs.get("format") != FORMAT:
            raise ValueError(f"{path} is an HDF5 file but not a petrov dataset (no format={FORMAT!r} attribute)")
        missing = [k for k in ("x", "y") if k not in h5]
        if missing:
            raise KeyError(f"{path} is missing dataset(s) {missing}; the file is corrupt, regenerate it")
        layout = stored_layout(path, attrs, h5["x"].shape, h5["y"].shape)
        return StoredData(path=path, attrs=attrs, x=h5["x"], y=h5["y"], _handle=h5, **layout)
    except BaseException:
        h5.close()
        raise


__all__ = ["StoredData", "attribute_error", "open_stored", "require_attrs", "stored_layout", "whole_number"]
