"""PDEBench's time-dependent HDF5 files as a petrov time series (``petrov import --from pdebench FILE``).

Three layouts of PDEBench's files are read, told apart by their keys:

- one group per sample (2-D diffusion-reaction, 2-D shallow water; 1-D diffusion-sorption): groups
  ``0000``, ``0001``, ... each holding ``data`` ``(T, X[, Y], C)`` and its coordinates ``grid/x``
  (``grid/y``) and ``grid/t``; the fields are unnamed in the file and become ``data0, data1, ...``;
- the compressible-flow files: ``Vx``, ``Vy`` (2-D), ``density``, ``pressure``, each ``(N, T, X[, Y])``,
  with ``x-coordinate`` (``y-coordinate``) and ``t-coordinate``;
- one array ``tensor`` ``(N, T, X[, Y])`` with the same coordinate keys (the 1-D advection, Burgers and
  reaction-diffusion files; its field is ``u``).

The coordinates give the domain and are checked uniform; ``t-coordinate`` (which in some files holds one
time more than the states stored) gives ``dt``. PDEBench records no boundary conditions in the files but
in the names of the compressible-flow files (``..._periodic_128_Train.hdf5``): a name saying ``periodic``
makes every axis periodic; for any other file ``grid`` (``--grid``) says which grid each axis has.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import h5py

from .array_sources import GRID_LETTERS, ArraySource
from .sample_groups import GroupStack
from .time_series import FieldPart, SeriesSource, grid_domain, parse_axis_grids, series_of_file, time_step

FORMAT = "pdebench"
FLOW_FIELDS = ("Vx", "Vy", "density", "pressure")
COORDINATES = ("x-coordinate", "y-coordinate")


def _grid_kinds(path: Path, grid: str | Sequence[str] | None, dim: int) -> list[str]:
    if grid is not None:
        return parse_axis_grids(grid, dim, str(path))
    if "periodic" in path.name.lower():
        return ["periodic"] * dim
    raise ValueError(f"{path}: PDEBench files do not record their boundary conditions (only the compressible-flow "
                     f"files' names say 'periodic'); give the grid of each axis: --grid periodic|nodes|cells "
                     f"(grid= in Python)")


def _dataset(h5: h5py.File, path: Path, key: str, ndim: tuple[int, ...], what: str) -> h5py.Dataset:
    obj = h5.get(key)
    if not isinstance(obj, h5py.Dataset):
        raise KeyError(f"{path}: no dataset {key!r}; a PDEBench {what} file has one")
    if obj.ndim not in ndim:
        raise ValueError(f"{path}: {key!r} has shape {obj.shape}; expected {' or '.join(map(str, ndim))} axes "
                         f"for a PDEBench {what} file")
    return obj


def _groups(h5: h5py.File, path: Path, grid) -> SeriesSource:
    stack = GroupStack(h5, "data", f"{path}:*/data")
    first = stack.groups[0]
    if len(stack.sample_shape) not in (3, 4):
        raise ValueError(f"{path}: {first}/data has shape {stack.sample_shape}; expected (T, X, C) or (T, X, Y, C)")
    dim = len(stack.sample_shape) - 2
    letters = GRID_LETTERS[:dim]
    axes = "NT" + letters + "C"
    source = ArraySource(f"{path}:*/data", stack, axes, file=str(path), key="*/data")
    coords = []
    for a in ("t",) + tuple(letters.lower()):
        key = f"{first}/grid/{a}"
        if not isinstance(h5.get(key), h5py.Dataset):
            raise KeyError(f"{path}: no dataset {key!r}; a PDEBench file of one group per sample keeps the "
                           f"coordinates in each group's grid/t, grid/x (and grid/y)")
        coords.append((path, key))
    kinds = _grid_kinds(path, grid, dim)
    states = stack.sample_shape[0]
    return SeriesSource(
        file=str(path), parts=[FieldPart(source, [f"data{c}" for c in range(stack.sample_shape[-1])])],
        axis_grids=kinds, domain=grid_domain(coords[1:], stack.sample_shape[1:1 + dim], kinds),
        dt=time_step(h5[coords[0][1]][()], states, f"{path}:{coords[0][1]}"),
        sources={"format": FORMAT, "file": str(path), "layout": "one group per sample", "groups": len(stack),
                 "key": "*/data", "axes": axes})


def _arrays(h5: h5py.File, path: Path, grid, names: Sequence[str], what: str) -> SeriesSource:
    first = _dataset(h5, path, names[0], (3, 4), what)
    dim = first.ndim - 2
    axes = "NT" + GRID_LETTERS[:dim]
    parts = []
    for name in names:
        ds = _dataset(h5, path, name, (first.ndim,), what)
        parts.append(FieldPart(ArraySource(f"{path}:{name}", ds, axes, file=str(path), key=name), [name]))
    for key in ("t-coordinate", *COORDINATES[:dim]):
        _dataset(h5, path, key, (1,), what)
    kinds = _grid_kinds(path, grid, dim)
    return SeriesSource(
        file=str(path), parts=parts, axis_grids=kinds,
        domain=grid_domain([(path, key) for key in COORDINATES[:dim]], first.shape[2:], kinds),
        dt=time_step(h5["t-coordinate"][()], first.shape[1], f"{path}:t-coordinate"),
        sources={"format": FORMAT, "file": str(path), "layout": what, "keys": list(names), "axes": axes})


def pdebench_series(path: str | os.PathLike, grid: str | Sequence[str] | None = None) -> SeriesSource:
    """The time series of the PDEBench file ``path`` (module docstring), to be written by
    ``write_time_series``; ``grid``: the grid kind of every axis or of each (default: read from the file's
    name where it says so). Close it (``.close()``) when done."""
    return series_of_file(path, "--from pdebench", "PDEBench's time-dependent files",
                          lambda h5, path: _series(h5, path, grid))


def _series(h5: h5py.File, path: Path, grid: str | Sequence[str] | None) -> SeriesSource:
    """The series of the open PDEBench file ``h5``, by its layout."""
    keys = set(h5.keys())
    groups = [k for k in keys if isinstance(h5[k], h5py.Group)]
    if groups and all(isinstance(h5[k], h5py.Group) for k in keys):
        series = _groups(h5, path, grid)
    elif "density" in keys:
        dim = 2 if "Vy" in keys else 1
        if "Vz" in keys:
            raise ValueError(f"{path}: a 3-D PDEBench file (it has 'Vz'); petrov stores 1-D and 2-D grids")
        series = _arrays(h5, path, grid, [n for n in FLOW_FIELDS if n != "Vy" or dim == 2], "compressible-flow")
    elif "tensor" in keys:
        series = _arrays(h5, path, grid, ["tensor"], "single-field")
        series.parts[0].names = ["u"]
    else:
        raise KeyError(f"{path}: not a PDEBench time series: expected groups of one sample each (holding data and "
                       f"grid/t, grid/x), the flow fields Vx, density, pressure, or 'tensor'; the file holds: "
                       f"{', '.join(sorted(keys)) or 'nothing'}")
    return series


__all__ = ["FLOW_FIELDS", "FORMAT", "pdebench_series"]
