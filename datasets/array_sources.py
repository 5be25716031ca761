"""The arrays a user imports, wherever they live: [`open_array`][] opens one (``.npy``, ``.npz:KEY``, an HDF5
dataset ``FILE.h5:PATH``, a MATLAB variable ``FILE.mat:VAR`` of v5 or v7.3, or an in-memory array) as an
[`ArraySource`][] read in blocks of samples; the axis strings that say which axis is which
([`parse_axes`][]); the box a grid covers, given ([`parse_domain`][]) or read from its coordinates
([`domain_from_coords`][], which refuses a grid that is not uniform).  ``petrov import`` of input/output
pairs (``importing``) and of time series (``time_series``) both read their sources here.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np
import scipy.io

from ..common.path_checks import require_file
from .fno_files import mat_format
from .hdf5_files import open_h5


GRID_KINDS = ("periodic", "nodes", "cells")
MIN_POINTS = 4  # per grid axis: smaller grids cannot be strided or hold a Fourier mode
GRID_LETTERS = "XY"


@dataclass
class ArraySource:
    """One array to import: ``array`` in its own axis order ``axes``; ``label`` names it in messages."""

    label: str
    array: Any
    axes: str = ""
    file: str | None = None
    key: str | None = None
    reversed_axes: bool = False  # MATLAB v7.3 seen through h5py
    _handle: Any = field(default=None, repr=False)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


# --- opening sources -----------------------------------------------------------------------------


def parse_spec(spec: str | os.PathLike) -> tuple[Path, str | None]:
    """``"data.npz:a"`` -> ``(Path("data.npz"), "a")``; an existing file (or a name without ``:``) has no key."""
    text = os.fspath(spec)
    if os.path.exists(text) or ":" not in text:
        return Path(text), None
    file, _, key = text.rpartition(":")
    return Path(file), key


def _hdf5_datasets(h5: h5py.File) -> list[str]:
    names: list[str] = []
    h5.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def _need_key(path: Path, key: str | None, keys: Sequence[str], what: str) -> None:
    present = ", ".join(sorted(keys)) or "none"
    if key is None:
        raise ValueError(f"{path} holds several arrays; name one as {path}:KEY ({what} present: {present})")
    if key not in keys:
        raise KeyError(f"{path} has no {what[:-1]} {key!r}; {what} present: {present}")


def _check_npy_header(path: Path) -> None:
    """ValueError unless ``path`` starts with numpy's magic string (numpy would talk of pickles or of no data)."""
    with open(path, "rb") as f:
        head = f.read(len(np.lib.format.MAGIC_PREFIX))
    if not head:
        raise ValueError(f"{path} is empty (0 bytes), not a .npy file; write the array into it again (numpy.save)")
    if head != np.lib.format.MAGIC_PREFIX:
        raise ValueError(f"{path} is not a .npy file (it does not start with the .npy header); write the array "
                         f"with numpy.save, or give the file the suffix of its format (.npz, .mat, .h5)")


def open_array(spec: Any, key: str | None = None, what: str = "array") -> ArraySource:
    """Open one array from a source spec (``FILE``, ``FILE:KEY`` or ``(FILE, KEY)``) or wrap an array."""
    if isinstance(spec, tuple):
        spec, key = spec
    elif isinstance(spec, (str, os.PathLike)) and key is None:
        spec, key = parse_spec(spec)
    if not isinstance(spec, (str, os.PathLike)):
        if not (hasattr(spec, "shape") and hasattr(spec, "dtype")):
            raise ValueError(f"{what} must be an array or a file spec (FILE or FILE:KEY), got {type(spec).__name__}")
        return ArraySource(label=f"{what} (in-memory array)", array=spec)
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(f"{what}: no such file: {path}")
    require_file(path, what)
    label = f"{what} ({path}{':' + key if key else ''})"
    suffix = path.suffix.lower()
    if suffix == ".npy":
        if key:
            raise ValueError(f"{path} is a .npy file holding one array; drop the ':{key}'")
        _check_npy_header(path)
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, EOFError, OSError) as err:
            raise ValueError(f"{path}: cannot read the .npy file (corrupt, truncated or object array?): {err}") from None
        return ArraySource(label, array, file=str(path))
    if suffix == ".npz":
        try:
            archive = np.load(path, allow_pickle=False)
        except Exception as err:  # OSError, ValueError, zipfile.BadZipFile, EOFError for damaged files
            raise ValueError(f"{path}: cannot read the .npz file (corrupt or truncated?): {err}") from None
        with archive:
            _need_key(path, key, archive.files, "arrays")
            try:
                return ArraySource(label, archive[key], file=str(path), key=key)
            except Exception as err:  # zipfile, zlib and numpy each raise their own type for damage
                raise ValueError(f"{path}: cannot read array {key!r} of the .npz file (corrupt or truncated?): "
                                 f"{type(err).__name__}: {err}") from None
    if suffix == ".mat" and mat_format(path) == "v5":
        try:
            data = scipy.io.loadmat(path)
        except Exception as err:  # scipy raises several types for damaged files
            raise ValueError(f"{path}: cannot read the MATLAB v5 file (corrupt or truncated?): {err}") from err
        _need_key(path, key, [k for k in data if not k.startswith("__")], "variables")
        return ArraySource(label, data[key], file=str(path), key=key)
    if not h5py.is_hdf5(path):
        raise ValueError(f"{path}: unknown format; import .npy, .npz, .mat (v5 or v7.3) or HDF5 files")
    h5 = open_h5(path)
    try:
        _need_key(path, key, _hdf5_datasets(h5), "datasets")
        return ArraySource(label, h5[key], file=str(path), key=key, reversed_axes=suffix == ".mat", _handle=h5)
    except BaseException:
        h5.close()
        raise


# --- axes and validation -------------------------------------------------------------------------


def parse_axes(axes: str | None, ndim: int, label: str) -> str:
    """Validate an axis-order string for an array of rank ``ndim`` (default: ``N`` then the grid axes)."""
    if axes is None:
        if ndim not in (2, 3):
            raise ValueError(f"{label} has {ndim} axes; give its axis order (e.g. NXYC, NCXY, XN)")
        return "N" + GRID_LETTERS[: ndim - 1]
    spec = str(axes).upper()
    letters = set(spec)
    grid = "".join(a for a in spec if a in GRID_LETTERS)
    problems = []
    if len(spec) != ndim:
        problems.append(f"it has {len(spec)} letters for an array with {ndim} axes")
    if letters - set("NC" + GRID_LETTERS):
        problems.append(f"unknown letters {sorted(letters - set('NC' + GRID_LETTERS))}")
    if len(letters) != len(spec):
        problems.append("a letter repeats")
    if spec.count("N") != 1:
        problems.append("it needs exactly one N (samples)")
    if sorted(grid) not in (["X"], ["X", "Y"]):
        problems.append("the grid axes must be X (1-D) or X and Y (2-D)")
    if problems:
        raise ValueError(f"axes {axes!r} for {label}: {'; '.join(problems)}. Use N for samples, X/Y for grid "
                         f"axes and C for channels, in the array's order, e.g. NX, XN, NXY, NCXY, NXYC")
    return spec


def _canonical(axes: str) -> str:
    """The stored order: samples, grid axes in X, Y order, channels."""
    return "N" + "".join(a for a in GRID_LETTERS if a in axes) + ("C" if "C" in axes else "")


def axis_sizes(src: ArraySource) -> dict[str, int]:
    """Axis letter -> its length in ``src`` (in the axis order the user gave)."""
    return dict(zip(src.axes, src.array.shape[::-1] if src.reversed_axes else src.array.shape))


def check_dtype(src: ArraySource) -> None:
    """ValueError unless ``src`` holds real numbers (what a float32 dataset can store)."""
    dtype = np.dtype(src.array.dtype)
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer) or dtype == bool):
        raise ValueError(f"{src.label} has dtype {dtype}; only real numbers can be imported "
                         f"(split complex data into real and imaginary channels)")


def read_block(src: ArraySource, lo: int, hi: int) -> np.ndarray:
    """Samples ``lo..hi-1`` as float32 in the stored order ``(n, *grid, c)`` (channel axis always present)."""
    own = src.axes[::-1] if src.reversed_axes else src.axes  # the axis order of src.array itself
    index = tuple(slice(lo, hi) if a == "N" else slice(None) for a in own)
    block = np.asarray(src.array[index])
    order = _canonical(src.axes)
    with np.errstate(over="ignore"):  # values beyond float32 become inf, reported by the finiteness check
        block = np.transpose(block, [own.index(a) for a in order]).astype(np.float32)
    return np.ascontiguousarray(block if "C" in order else block[..., None])


def first_bad(block: np.ndarray) -> int | None:
    """The index of the first sample of ``block (n, ...)`` with a NaN or inf, None if there is none."""
    bad = ~np.isfinite(block).reshape(len(block), -1).all(axis=1)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def parse_domain(domain: Any, dim: int) -> list[list[float]]:
    """``None`` (unit box), ``(lo, hi)`` for every axis, or one ``(lo, hi)`` per axis -> ``[[lo, hi], ...]``."""
    if domain is None:
        return [[0.0, 1.0] for _ in range(dim)]
    try:
        values = np.asarray(domain, dtype=float)
    except (TypeError, ValueError):  # text, ragged pairs, other objects: numpy's message names no parameter
        raise ValueError(f"domain must be numbers: (lo, hi) or one (lo, hi) per grid axis ({dim}), "
                         f"got {domain!r}") from None
    if values.shape == (2,):
        values = np.tile(values, (dim, 1))
    if values.shape != (dim, 2):
        raise ValueError(f"domain must be (lo, hi) or one (lo, hi) per grid axis ({dim}), got {domain!r}")
    if not np.isfinite(values).all() or not (values[:, 1] > values[:, 0]).all():
        raise ValueError(f"domain bounds must be finite with hi > lo on every axis, got {values.tolist()}")
    return values.tolist()


def _looks_cell_centred(first: float, last: float, h: float) -> bool:
    """Whether points ``first..last`` (step ``h``) end half a step inside round bounds (multiples of
    1/2, e.g. PDEBench's 1/256..255/256 in [0, 1]) while their own ends are not round."""
    def round_(v: float) -> bool:
        return abs(2 * v - round(2 * v)) < 1e-6 * max(1.0, abs(v))
    return not (round_(first) and round_(last)) and round_(first - h / 2) and round_(last + h / 2)


def domain_from_coords(coords: Sequence[Any], n: int | Sequence[int], periodic: bool | Sequence[bool],
                       cells: bool | Sequence[bool] = False) -> list[list[float]]:
    """The domain of uniform per-axis coordinates ``coords[d] (n[d],)``; ValueError if they are not uniform.
    ``n``, ``periodic`` and ``cells`` are one value for every axis or one per axis. Periodic grids end one
    step after the last point, cell-centred ones half a step before the first and after the last point,
    node grids at their first and last points."""
    per_axis = [list(v) if isinstance(v, (list, tuple)) else [v] * len(coords) for v in (n, periodic, cells)]
    domain = []
    for d, (spec, n_d, periodic_d, cells_d) in enumerate(zip(coords, *per_axis)):
        src = open_array(spec, what=f"coordinates of axis {GRID_LETTERS[d]}")
        try:
            c = np.asarray(src.array, dtype=float).reshape(-1)
        finally:
            src.close()
        if c.shape != (n_d,):
            raise ValueError(f"{src.label}: expected {n_d} values (one per grid point), got shape {c.shape}")
        step = np.diff(c)
        if not np.isfinite(c).all() or not (step > 0).all():
            raise ValueError(f"{src.label} must be finite and increasing")
        h = (c[-1] - c[0]) / (n_d - 1)
        if not np.allclose(step, h, rtol=1e-4, atol=0):
            raise ValueError(f"{src.label} are not uniformly spaced (steps from {step.min():.6g} to {step.max():.6g}); "
                             f"petrov stores uniform grids only: interpolate the data to one first")
        if not cells_d and not periodic_d and _looks_cell_centred(c[0], c[-1], h):  # a periodic grid has no ends
            warnings.warn(f"{src.label} run from {c[0]:.6g} to {c[-1]:.6g}, half a step inside [{c[0] - h / 2:g}, "
                          f"{c[-1] + h / 2:g}]: they look like cell centres; if they are, import with grid='cells' "
                          f"(--grid cells)", stacklevel=3)
        if cells_d:
            domain.append([float(c[0] - h / 2), float(c[-1] + h / 2)])
        else:
            domain.append([float(c[0]), float(c[0] + n_d * h) if periodic_d else float(c[-1])])
    return domain


# --- import --------------------------------------------------------------------------------------


__all__ = ["GRID_KINDS", "GRID_LETTERS", "MIN_POINTS", "ArraySource", "axis_sizes", "check_dtype", "domain_from_coords", "first_bad", "open_array", "parse_axes", "parse_domain", "parse_spec", "read_block"]
