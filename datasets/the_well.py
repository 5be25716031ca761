"""The Well's HDF5 files as a petrov time series (``petrov import --from the-well FILE``).

A file of The Well (PolymathicAI) holds ``n_trajectories`` samples on a uniform Cartesian grid:

- root attributes ``n_spatial_dims``, ``n_trajectories``, ``grid_type`` (only "cartesian" is read here);
- ``dimensions/``: ``time`` ``(T,)`` (or ``(n_trajectories, T)`` where its ``sample_varying`` attribute
  says so) and one coordinate array per spatial axis, named by the group's ``spatial_dims`` attribute;
- ``t0_fields/``, ``t1_fields/``, ``t2_fields/``: scalar, vector and tensor fields (group attribute
  ``field_names``), each ``(n_trajectories, T, *grid)`` followed by one component axis per tensor order
  (of length ``n_spatial_dims``; a tensor's two may come as one of ``n_spatial_dims**2``); a field whose ``time_varying`` or ``sample_varying`` attribute is false
  is a constant coefficient, not part of the state, and is left out (``sources`` lists it);
- ``boundary_conditions/``: one group per condition, attributes ``bc_type`` (PERIODIC, WALL or OPEN) and
  ``associated_dims`` (the spatial axes it applies to).

Vector and tensor fields become one field per component, named as The Well's own loader names them
(``velocity_x``, ``velocity_y``; ``stress_xx``, ``stress_xy``, ...). A PERIODIC axis is a periodic grid; a
WALL or OPEN one a node grid (its coordinates include both ends) unless ``grid`` (``--grid``) says otherwise.
"""
from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np

from .hdf5_files import file_attrs
from .array_sources import GRID_LETTERS, ArraySource
from .time_series import FieldPart, SeriesSource, grid_domain, parse_axis_grids, series_of_file, time_step

FORMAT = "the-well"
BOUNDARY_GRIDS = {"PERIODIC": "periodic", "WALL": "nodes", "OPEN": "nodes"}


def _need(h5: h5py.File | h5py.Group, path: Path, key: str, kind: type, what: str) -> Any:
    obj = h5.get(key)
    if not isinstance(obj, kind):
        noun = "group" if kind is h5py.Group else "dataset"
        raise KeyError(f"{path}: no {noun} {h5.name.rstrip('/')}/{key}; {what}")
    return obj


def _attr(obj: h5py.HLObject, path: Path, name: str, what: str) -> Any:
    if name not in obj.attrs:
        raise KeyError(f"{path}: {obj.name} has no attribute {name!r}; {what}")
    value = obj.attrs[name]
    if isinstance(value, np.ndarray):
        return [v.decode() if isinstance(v, bytes) else v.item() if isinstance(v, np.generic) else v for v in value]
    return value.decode() if isinstance(value, bytes) else value.item() if isinstance(value, np.generic) else value


def _spatial(h5: h5py.File, path: Path) -> tuple[int, int, list[str]]:
    """``(n_spatial_dims, n_trajectories, spatial_dims)`` from the root and ``dimensions`` attributes."""
    for name in ("n_spatial_dims", "n_trajectories", "grid_type"):
        _attr(h5, path, name, "a file of The Well records it at its root")
    dim, n, grid_type = (_attr(h5, path, k, "") for k in ("n_spatial_dims", "n_trajectories", "grid_type"))
    if grid_type != "cartesian":
        raise ValueError(f"{path}: grid_type is {grid_type!r}; petrov reads Cartesian grids of The Well only")
    if dim not in (1, 2):
        raise ValueError(f"{path}: n_spatial_dims is {dim}; petrov stores 1-D and 2-D grids")
    dims = _need(h5, path, "dimensions", h5py.Group, "The Well keeps the time and grid coordinates there")
    names = list(_attr(dims, path, "spatial_dims", "it names the grid's coordinate arrays"))
    if len(names) != dim:
        raise ValueError(f"{path}: dimensions/spatial_dims names {names} but n_spatial_dims is {dim}")
    return dim, int(n), names


def _coordinates(h5: h5py.File, path: Path, names: list[str]) -> list[tuple[Path, str]]:
    specs = []
    for name in names:
        ds = _need(h5["dimensions"], path, name, h5py.Dataset, "dimensions/spatial_dims names it")
        if ds.attrs.get("sample_varying", False) or ds.ndim != 1:
            raise ValueError(f"{path}: dimensions/{name} varies between samples (shape {ds.shape}); petrov stores "
                             f"one grid for all samples")
        specs.append((path, f"dimensions/{name}"))
    return specs


def _dt(h5: h5py.File, path: Path, states: int) -> float:
    ds = _need(h5["dimensions"], path, "time", h5py.Dataset, "The Well keeps the times of the states there")
    times = np.atleast_2d(ds[()])
    steps = {time_step(row, states, f"{path}:dimensions/time") for row in times}
    if len(steps) > 1 and not np.allclose(sorted(steps), min(steps), rtol=1e-3):
        raise ValueError(f"{path}: dimensions/time has other time steps in other samples ({min(steps):.6g} to "
                         f"{max(steps):.6g}); petrov stores one time step for all samples")
    return min(steps)


def _grid_kinds(h5: h5py.File, path: Path, names: list[str], grid) -> list[str]:
    if grid is not None:
        return parse_axis_grids(grid, len(names), str(path))
    bcs = _need(h5, path, "boundary_conditions", h5py.Group, "it gives each axis's boundary condition (or give "
                "--grid periodic|nodes|cells)")
    found: dict[str, str] = {}
    for key, bc in bcs.items():
        kind = str(_attr(bc, path, "bc_type", "each boundary condition has one")).upper()
        if kind not in BOUNDARY_GRIDS:
            raise ValueError(f"{path}: boundary_conditions/{key} has bc_type {kind!r}; expected PERIODIC, WALL or OPEN")
        for axis in _attr(bc, path, "associated_dims", "it names the axes of the condition"):
            seen = found.setdefault(axis, BOUNDARY_GRIDS[kind])
            if seen != BOUNDARY_GRIDS[kind]:
                raise ValueError(f"{path}: axis {axis!r} is periodic on one boundary and not on another "
                                 f"(boundary_conditions/{key}); give --grid to say how to store it")
    missing = [a for a in names if a not in found]
    if missing:
        raise KeyError(f"{path}: boundary_conditions names no condition for axis {', '.join(missing)}; give "
                       f"--grid periodic|nodes|cells (one per axis) to say which grid it has")
    return [found[a] for a in names]


def _fields(h5: h5py.File, path: Path, dim: int, n: int, names: list[str]) -> tuple[list[FieldPart], list[str]]:
    parts, skipped = [], []
    for order in range(3):
        group = h5.get(f"t{order}_fields")
        if group is None:
            continue
        for name in _attr(group, path, "field_names", "it lists the group's fields"):
            ds = _need(group, path, name, h5py.Dataset, f"t{order}_fields lists it in field_names")
            flags = {k: bool(ds.attrs.get(k, True)) for k in ("time_varying", "sample_varying")}
            if not all(flags.values()) or not all(ds.attrs.get("dim_varying", [True] * dim)):
                skipped.append(f"t{order}_fields/{name}")
                continue
            expected, letters = 2 + dim + order, "CD"[:order]
            if order == 2 and ds.ndim == 3 + dim and ds.shape[-1] == dim * dim:  # components flattened: D^2
                expected, letters = 3 + dim, "C"
            if ds.ndim != expected or ds.shape[0] != n or math.prod(ds.shape[2 + dim:]) != dim**order:
                raise ValueError(f"{path}: t{order}_fields/{name} has shape {ds.shape}; expected (n_trajectories = {n}, "
                                 f"T, *grid{', ' + ', '.join([str(dim)] * order) if order else ''})")
            axes = "NT" + GRID_LETTERS[:dim] + letters
            labels = ["".join(c) for c in itertools.product(names, repeat=order)]
            source = ArraySource(f"{path}:t{order}_fields/{name}", ds, axes, file=str(path), key=f"t{order}_fields/{name}")
            parts.append(FieldPart(source, [f"{name}_{c}" if c else name for c in labels]))
    if not parts:
        raise KeyError(f"{path}: no field varying in time and between samples in t0_fields, t1_fields or t2_fields "
                       f"(skipped: {', '.join(skipped) or 'none'}); a time series needs one")
    return parts, skipped


def well_series(path: str | os.PathLike, grid: str | Sequence[str] | None = None) -> SeriesSource:
    """The time series of The Well's file ``path`` (module docstring), to be written by ``write_time_series``;
    ``grid``: the grid kind of every axis or of each (default: from ``boundary_conditions``). Close it
    (``.close()``) when done."""
    return series_of_file(path, "--from the-well", "The Well's files", lambda h5, path: _series(h5, path, grid))


def _series(h5: h5py.File, path: Path, grid: str | Sequence[str] | None) -> SeriesSource:
    """The series of the open file ``h5`` of The Well."""
    dim, n, names = _spatial(h5, path)
    coords = _coordinates(h5, path, names)
    parts, skipped = _fields(h5, path, dim, n, names)
    shape = parts[0].source.array.shape
    kinds = _grid_kinds(h5, path, names, grid)
    return SeriesSource(
        file=str(path), parts=parts, axis_grids=kinds, domain=grid_domain(coords, shape[2:2 + dim], kinds),
        dt=_dt(h5, path, shape[1]),
        sources={"format": FORMAT, "file": str(path), "dataset_name": file_attrs(h5).get("dataset_name"),
                 "keys": [p.source.key for p in parts], "skipped": skipped, "spatial_dims": names})


__all__ = ["BOUNDARY_GRIDS", "FORMAT", "well_series"]
