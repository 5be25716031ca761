"""Loading datasets at any reachable resolution as channels-last tensors with grid coordinates.

``open_dataset(path, resolution=85, indices=slice(0, 1000))`` reads only the samples asked for, strided
from the native grid (see ``sampling``), from a petrov HDF5 file or an FNO ``.mat`` file (chosen by the
extension), and returns a [`GridDataset`][] with ``x (N, *grid, c_in)``, ``y (N, *grid_out, c_out)``
(one channel for generated and FNO files, the stored channels for imported ones) and
coordinates ``(*grid, d)`` from ``petrov.grids.layout.grid_coordinates``.

Inverse Darcy (``kind="darcy-inverse"``, or a darcy-inverse file): ``x = u`` at ``resolution`` and
``y = a`` strided to ``resolution`` and then average-pooled to ``coarse_resolution`` (``sampling.average_pool``,
the Galerkin Transformer's target: 141 -> 36 or 71). The input noise is not added here: the trainer
normalises ``x`` point-wise and then calls ``normalizers.add_noise`` with the file's ``noise`` attribute.

Trajectory kinds (``burgers-trajectory``): the snapshots are stored and loaded as the channels of ``y``,
``(N, n, T + 1)`` with ``y[..., k] = u(., t_k)``.

NaN or inf in a file's data is an error (a ValueError naming the sample), not a warning: it only arises from an
unfinished or damaged file, and training on it would silently produce NaN losses.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch.utils.data import Dataset

from ..common.host import to_numpy
from ..grids.layout import grid_coordinates
from .fno_files import open_mat
from .grid_files import FORMAT_VERSION
from .recipes import get_recipe
from .sampling import allowed_resolutions, average_pool, grid_strides, pool_kernel
from .storage import StoredData, open_stored
from .windows import Window


def open_source(path: str | os.PathLike) -> StoredData:
    """Open a dataset file for reading: ``.mat`` -> FNO reader, anything else -> petrov HDF5 (refused
    if written in a newer format than this petrov reads)."""
    path = Path(path)
    if path.suffix.lower() == ".mat":
        return open_mat(path)
    src = open_stored(path)
    try:
        _check_format_version(src)
    except BaseException:
        src.close()
        raise
    return src


def _check_format_version(src: StoredData) -> None:
    """ValueError for a file whose ``format_version`` this petrov cannot read: one from a newer petrov
    (its layout may differ, so reading it could give wrong data without an error), or a damaged value.
    Files without the attribute are older ones (version 1).  Only the attribute is read."""
    version = src.attrs.get("format_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"{src.path}: attribute format_version = {version!r} is not a whole number >= 1; the "
                         f"file's attributes were edited or the file is damaged: restore it or regenerate the file")
    if version > FORMAT_VERSION:
        raise ValueError(f"{src.path} has format_version {version}: it was written by a newer petrov, and this one "
                         f"reads format version {FORMAT_VERSION} at most; upgrade petrov to read it")


def as_indices(indices: Any, n: int) -> np.ndarray:
    """Sample indices from ``None`` (all), a slice, a range, an int or an integer sequence/array/tensor.

    Negative entries count from the end as in Python; out-of-range entries, and a slice reaching past
    the end (Python would shorten it silently), are an IndexError.
    """
    if indices is None:
        return np.arange(n)
    if isinstance(indices, slice):
        for bound in (indices.start, indices.stop):
            if bound is not None and not -n <= bound <= n:
                raise IndexError(f"indices {_slice_text(indices)} reach past the {n} samples (0..{n - 1}); "
                                 f"choose a slice within them")
        return np.arange(n)[indices]
    if isinstance(indices, (int, np.integer)) and not isinstance(indices, bool):
        indices = [indices]
    if isinstance(indices, torch.Tensor):
        indices = to_numpy(indices)
    idx = np.asarray(list(indices) if isinstance(indices, range) else indices)
    if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        raise ValueError(f"indices must be a slice, range or 1-D integer sequence, got {indices!r}")
    idx = idx.astype(np.int64)
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise IndexError(f"sample index {int(idx[bad][0])} out of range for a dataset of {n} samples")
    return np.where(idx < 0, idx + n, idx)


def _slice_text(s: slice) -> str:
    text = f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}"
    return text + (f":{s.step}" if s.step is not None else "")


def resolve_kind(src: StoredData, kind: str | None) -> str:
    """The kind to load the file as: the file's own, or another kind storing the same fields."""
    if kind is None or kind == src.kind:
        return src.kind
    recipe, own = get_recipe(kind), get_recipe(src.kind)
    if recipe.family != own.family:
        raise ValueError(f"{src.path} holds {src.kind!r} data; it cannot be loaded as {kind!r}")
    return kind


class GridDataset(Dataset):
    """Samples on a uniform grid, in memory, channels-last.

    ``x``: ``(N, *grid, c_in)``; ``y``: ``(N, *grid_out, c_out)`` (``grid_out == grid`` except for the
    inverse problem's pooled target); ``coords``/``coords_out``: ``(*grid, d)``/``(*grid_out, d)``.
    ``indices`` are the samples' numbers in the file (for per-sample seeded noise).
    """

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        kind: str,
        periodic: bool,
        native_resolution: int,
        indices: np.ndarray,
        attrs: dict[str, Any] | None = None,
        coarse_resolution: int | None = None,
        cells: bool = False,
        axis_grids: tuple[str, ...] = (),
        fields: list[str] | None = None,
    ):
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"x and y hold different numbers of samples: {x.shape[0]} vs {y.shape[0]}")
        self.x, self.y = x, y
        self.kind = kind
        self.periodic = periodic
        self.cells = cells
        self.native_resolution = native_resolution
        self.indices = np.asarray(indices)
        self.attrs = dict(attrs or {})
        self.coarse_resolution = coarse_resolution
        self.grid = tuple(x.shape[1:-1])
        self.grid_out = tuple(y.shape[1:-1])
        self.resolution = self.grid[0]
        self.axis_grids, self.fields = tuple(axis_grids), list(fields or [])
        self.domain = series_domain(kind, self.attrs)
        self.coords = _coordinates(self.grid, periodic, cells, self.axis_grids, x.dtype, self.domain)
        self.coords_out = (
            self.coords if self.grid_out == self.grid
            else grid_coordinates(self.grid_out, periodic, dtype=x.dtype, cells=cells)
        )

    @property
    def axis_periodic(self) -> tuple[bool, ...]:
        """Whether each grid axis is periodic."""
        return _axis_periodic(self)

    @property
    def noise(self) -> float:
        """The input-noise level recorded in the file (0 if none)."""
        return float(self.attrs.get("noise", 0.0))

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __repr__(self) -> str:
        return (f"GridDataset(kind={self.kind!r}, n={len(self)}, x={tuple(self.x.shape)}, "
                f"y={tuple(self.y.shape)}, periodic={self.periodic})")


class LazyGridDataset(Dataset):
    """The samples of [`open_dataset`][] read from the file when asked for (``lazy=True``): no sample
    is held in memory, a DataLoader reads one batch at a time, and under torchrun each rank reads only
    the samples of its shard.  ``__getitem__(k) -> (x, y)`` and the attributes of [`GridDataset`][]
    (``coords``, ``grid``, ``grid_out``, ``periodic``, ``indices``, ``kind``, ``attrs``, ``noise``, ...)
    but ``x``/``y``; the file is opened on first use in each process (DataLoader workers each open their
    own)."""

    def __init__(self, path: Path, read: dict[str, Any], meta: dict[str, Any], dtype: torch.dtype):
        self.path, self._read, self.dtype = Path(path), read, dtype
        self._src, self._pid = None, None
        self.kind, self.periodic, self.native_resolution = meta["kind"], meta["periodic"], meta["native_resolution"]
        self.indices, self.attrs = np.asarray(meta["indices"]), dict(meta["attrs"])
        self.coarse_resolution, self.cells = meta["coarse_resolution"], meta["cells"]
        self.axis_grids, self.fields = tuple(meta["axis_grids"]), list(meta["fields"])
        x, y = self[0]
        self.grid, self.grid_out = tuple(x.shape[:-1]), tuple(y.shape[:-1])
        self.resolution = self.grid[0]
        self.domain = series_domain(self.kind, self.attrs)
        self.coords = _coordinates(self.grid, self.periodic, self.cells, self.axis_grids, dtype, self.domain)
        self.coords_out = self.coords if self.grid_out == self.grid else grid_coordinates(
            self.grid_out, self.periodic, dtype=dtype, cells=self.cells)

    @property
    def noise(self) -> float:
        return float(self.attrs.get("noise", 0.0))

    @property
    def axis_periodic(self) -> tuple[bool, ...]:
        """Whether each grid axis is periodic."""
        return _axis_periodic(self)

    def _source(self) -> StoredData:
        if self._src is None or self._pid != os.getpid():
            self._src, self._pid = open_source(self.path), os.getpid()
        return self._src

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_src"] = state["_pid"] = None
        return state

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int):
        x, y = _read_fields(self._source(), [int(self.indices[k])], **self._read)
        return torch.from_numpy(x[0]).to(self.dtype), torch.from_numpy(y[0]).to(self.dtype)

    def __repr__(self) -> str:
        return f"LazyGridDataset({str(self.path)!r}, kind={self.kind!r}, n={len(self)}, grid={self.grid})"


def fields_per_state(dataset: Any) -> int:
    """F, the fields of one state of a dataset's trajectories: the length of its ``fields`` (a time-series
    file names them), 1 for every other file (one field per state, or no trajectory)."""
    return max(1, len(getattr(dataset, "fields", None) or []))


def series_domain(kind: str, attrs: dict[str, Any]) -> tuple[tuple[float, float], ...] | None:
    """The box a time-series file's grid covers (its ``domain`` attribute: ``((lo, hi), ...)`` per axis), where
    it is not the unit box; None for every other kind, whose coordinates are on the unit box whatever domain an
    imported file records.  A time series' models see its physical coordinates: a periodic axis of length L
    enters them as (cos, sin)(2 pi x / L), and the model's ``domain`` must be this one."""
    if kind != "time-series" or "domain" not in attrs:
        return None
    box = tuple((float(lo), float(hi)) for lo, hi in json.loads(attrs["domain"]))
    return None if all(pair == (0.0, 1.0) for pair in box) else box


def _coordinates(grid: tuple[int, ...], periodic: bool, cells: bool, axis_grids: tuple[str, ...],
                 dtype: torch.dtype, domain: tuple[tuple[float, float], ...] | None = None) -> torch.Tensor:
    """Coordinates ``(*grid, d)`` on the unit box (or ``domain``): of the one grid kind, or of each axis's own
    (``axis_grids``)."""
    if not axis_grids or len(set(axis_grids)) == 1 and axis_grids[0] == ("cells" if cells else
                                                                        "periodic" if periodic else "nodes"):
        return grid_coordinates(grid, periodic, dtype=dtype, cells=cells, domain=domain)
    axes = [grid_coordinates((n,), kind == "periodic", dtype=dtype, cells=kind == "cells",
                             domain=None if domain is None else (domain[axis],))[..., 0]
            for axis, (n, kind) in enumerate(zip(grid, axis_grids))]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)


def _axis_periodic(dataset: Any) -> tuple[bool, ...]:
    if dataset.axis_grids:
        return tuple(kind == "periodic" for kind in dataset.axis_grids)
    return (bool(dataset.periodic),) * len(dataset.grid)


def _read_fields(src: StoredData, idx: Any, inverse: bool, stride: int | tuple[int, ...], coarse: int | None,
                 window: Window | None = None) -> tuple[Any, Any]:
    """The model's input and target of samples ``idx``: ``(x, y)`` float32 arrays with a channel axis
    (the inverse problem: x = the stored u, y = the stored a pooled to ``coarse``; trajectories: the
    ``window``'s given states and the whole window; a time series: flattened state-major, channel
    ``s * F + f`` field f of state s, by default the first state and the whole series)."""
    if inverse:
        return src.read_channels("y", idx, stride), read_pooled(src, idx, stride, coarse)[..., None]
    if window is not None or src.time_series:
        window = window or Window()
        x, y = window.apply(src.read_channels("y", idx, stride), str(src.path), field_axis=src.time_series)
        return np.ascontiguousarray(x), np.ascontiguousarray(y)
    return src.read_channels("x", idx, stride), src.read_channels("y", idx, stride)


def open_dataset(
    path: str | os.PathLike,
    *,
    resolution: int | tuple[int, ...] | None = None,
    indices: Any = None,
    coarse_resolution: int | None = None,
    kind: str | None = None,
    dtype: torch.dtype = torch.float32,
    lazy: bool = False,
    window: Window | None = None,
) -> GridDataset | LazyGridDataset:
    """Load samples ``indices`` (default: all complete ones) of a dataset file at ``resolution`` points per
    axis (default native; one number per axis for a rectangular grid, an int there meaning that many points
    along the first axis with the others strided alike where that is a sub-grid), strided from the native
    grid (averaged over blocks of cells on a cell-centred grid); ValueError listing the allowed resolutions
    if it is not reachable. ``kind`` reads a file as another kind of its family (e.g. a Darcy file or FNO
    ``piececonst`` file as ``"darcy-inverse"``); ``coarse_resolution`` sets the inverse problem's target grid
    (default: the file's attribute, else 36).  ``dtype``: the floating dtype of ``x``, ``y`` and the
    coordinates.  ``lazy=True``: nothing is read now; a [`LazyGridDataset`][] reads each sample when
    asked for.  Selecting no samples is a ValueError.  ``window``: trajectory files only, which states are
    the input and the target ([`Window`][petrov.datasets.windows.Window]; default: the stored input and the
    whole trajectory; a time-series file's window comes flattened state-major, ``(N, *grid, W * F)``, channel
    ``s * F + f`` field f of state s, and by default its first state and the whole series).
    """
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a floating torch.dtype such as torch.float32, got {type(dtype).__name__} "
                        f"{dtype!r}")
    if not dtype.is_floating_point:  # an integer dtype would truncate the data without an error
        raise ValueError(f"dtype must be a floating torch.dtype such as torch.float32, got {dtype}")
    with open_source(path) as src:
        kind = resolve_kind(src, kind)
        recipe = get_recipe(kind)
        native = src.native_resolution
        stride = grid_strides(src.grid_shape, src.grid_kinds, resolution)
        stride = stride[0] if len(set(stride)) == 1 else stride  # one stride for every axis, as before
        resolution = native if resolution is None else resolution
        if recipe.inverse and src.cells:
            raise ValueError(f"{src.path}: the inverse problem pools node grids; a cell-centred file cannot be "
                             f"read as {kind!r}")
        if src.n_complete < src.n_samples:
            warnings.warn(
                f"{src.path} is incomplete ({src.n_complete} of {src.n_samples} samples); "
                f"loading the complete ones (rerun the generation to finish it)",
                stacklevel=2,
            )
        try:
            idx = as_indices(indices, src.n_complete)
        except IndexError as err:
            raise IndexError(f"{src.path}: {err}") from None
        if not len(idx):
            shown = _slice_text(indices) if isinstance(indices, slice) else repr(indices)
            raise ValueError(f"{src.path}: indices {shown} select no samples (the file has {src.n_complete} complete "
                             f"ones); select at least one")
        attrs = dict(src.attrs)
        if recipe.inverse:
            coarse_resolution = target_grid(recipe, attrs, coarse_resolution)
            pool_kernel(resolution, coarse_resolution)  # fail before reading anything
            attrs.setdefault("noise", recipe.params_cls().noise)
            attrs["coarse_resolution"] = coarse_resolution
        elif coarse_resolution is not None:
            raise ValueError(f"coarse_resolution applies to 'darcy-inverse' only, not {kind!r}")
        if window is not None:
            if recipe.snapshots is None:
                raise ValueError(f"{src.path} holds {kind!r} samples, not trajectories: a window of states "
                                 f"(data.history, data.first_state, data.states) applies to trajectory files only")
            window.bounds(src.n_states, str(src.path))  # fail before reading anything
        read = {"inverse": recipe.inverse, "stride": stride, "coarse": coarse_resolution, "window": window}
        meta = {"kind": kind, "periodic": src.periodic, "native_resolution": native, "indices": idx, "attrs": attrs,
                "coarse_resolution": coarse_resolution if recipe.inverse else None, "cells": src.cells,
                "axis_grids": src.axis_grids, "fields": src.fields}
        if lazy:
            return LazyGridDataset(Path(path), read, meta, dtype)
        x, y = _read_fields(src, idx, **read)
        return GridDataset(torch.from_numpy(x).to(dtype), torch.from_numpy(y).to(dtype), **meta)


def target_grid(recipe: Any, attrs: Mapping[str, Any], requested: int | None = None) -> int:
    """The inverse problem's target grid: ``requested``, else the file's ``coarse_resolution``
    attribute, else the recipe's default (the one rule for loaders and normalizers)."""
    if requested is not None:
        return int(requested)
    return int(attrs.get("coarse_resolution", recipe.params_cls().coarse_resolution))


def read_pooled(src: StoredData, idx: np.ndarray, stride: int, coarse: int, block: int = 32) -> np.ndarray:
    """The stored input field (a) strided by ``stride`` then average-pooled to ``coarse``, block by block."""
    parts = [average_pool(src.read("x", idx[lo : lo + block], stride), coarse) for lo in range(0, len(idx), block)]
    return np.concatenate(parts) if parts else np.zeros((0, coarse, coarse), np.float32)


def dataset_info(path: str | os.PathLike) -> dict[str, Any]:
    """What a dataset file holds: kind, sample counts, shapes, native and reachable resolutions, attributes.
    For a mesh dataset: ``petrov.datasets.mesh.storage.mesh_info`` (``layout`` = "mesh", node counts per level)."""
    from .mesh.storage import is_mesh_file, mesh_info

    if is_mesh_file(path):
        return mesh_info(path)
    with open_source(path) as src:
        shape = (src.n_samples,) + src.grid_shape
        kinds = src.grid_kinds
        resolutions = (allowed_resolutions(src.native_resolution, src.periodic, src.cells) if not src.native_shape
                       else [[r for r in allowed_resolutions(n, k == "periodic", k == "cells")]
                             for n, k in zip(src.grid_shape, kinds)])
        return {
            "path": str(src.path),
            "source": src.source,
            "kind": src.kind,
            "n_samples": src.n_samples,
            "n_complete": src.n_complete,
            "complete": src.n_complete >= src.n_samples,
            "x_shape": shape + src.channel_shape("x"),
            "y_shape": shape + src.channel_shape("y"),
            "native_resolution": src.native_resolution,
            "native_shape": list(src.grid_shape),
            "grid": kinds[0] if len(set(kinds)) == 1 else "mixed (" + ", ".join(kinds) + ")",
            "resolutions": resolutions,
            "attrs": dict(src.attrs),
        }
