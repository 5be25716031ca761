"""Importing a user's own input/output arrays into a petrov dataset file (``petrov import``).

The result is an ordinary petrov HDF5 file (see ``storage``) of kind ``imported``: ``x`` float32
``(n_samples, *grid, c_in)`` and ``y`` float32 ``(n_samples, *grid, c_out)`` on one uniform grid with
``n`` points per axis (1-D, or 2-D ``n x n``), periodic (``x_i = lo + i (hi - lo)/n``), a node grid
with both boundaries (``x_i = lo + i (hi - lo)/(n - 1)``) or cell-centred (``x_i = lo + (i + 1/2)(hi - lo)/n``,
the centres of ``n`` cells, as finite-volume solvers and PDEBench's Darcy files store them; such a file
loads at ``n/k`` cells per axis, averaged over blocks of ``k`` cells, see ``sampling``). It then loads at strided resolutions
(``open_dataset``), fits normalizers and trains through ``data.path`` exactly like a generated file.

Sources (each of ``x``, ``y`` and the optional per-axis coordinates is one array):

- ``FILE.npy`` (memory-mapped), ``FILE.npz:KEY``;
- ``FILE.h5:PATH`` / ``.hdf5`` / any HDF5 file (``PATH`` a dataset inside, e.g. PDEBench's ``tensor``);
- ``FILE.mat:VAR``, MATLAB v5 (``scipy.io.loadmat``) or v7.3 (HDF5 via h5py, read lazily; MATLAB's
  column-major arrays appear with reversed axes there, so the axes are reversed back and both versions
  take the axis order MATLAB (and ``loadmat``) shows);
- an in-memory array (numpy, or anything with ``shape``, ``dtype`` and numpy-style slicing).

Axis order: a string with one letter per array axis, ``N`` samples, ``X`` (and ``Y`` for 2-D) the grid
axes, optionally ``C`` channels: ``"NX"``, ``"XN"``, ``"NXY"``, ``"NCXY"``, ``"NXYC"``, ``"XYN"``...
The default is samples first without channels (``"NX"`` for 2-D arrays, ``"NXY"`` for 3-D).

Samples are read and written a chunk at a time (slices along the sample axis), so HDF5, ``.npy`` and
v7.3 sources larger than memory are streamed. The file is written to a temporary file in the output
directory, flushed to disk and renamed, so an interrupted import never leaves a partial dataset under the
final name. Every problem found on the way in is a ValueError / KeyError / FileNotFoundError naming it.

An FNO benchmark ``.mat`` file (Burgers, Darcy, Navier-Stokes: ``fno_files``) becomes a petrov file of its
own kind with [`import_fno`][] (``petrov import --fno FILE.mat``): the same samples as ``open_dataset`` reads
from the ``.mat`` (a Navier-Stokes ``y = [a, u]`` along time), stored one sample per chunk, so that a sample
is read without touching the rest (MATLAB's arrays keep a sample's values one every N apart).

Meshes with nodal fields (``petrov import --mesh``) are imported by ``petrov.datasets.mesh.importing``.
"""
from __future__ import annotations

import contextlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np
import scipy.io

from ..common.files import atomic_path
from ..common.path_checks import require_file
from ..common.outputs import check_outputs, output_file
from .fno_files import mat_format, open_mat
from .grid_files import default_chunk_size, grid_attrs, grid_layout, stored_bytes
from .hdf5_files import open_h5
from .recipes import ImportedParams, get_recipe
from .write_path import fill

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


def _shape(src: ArraySource) -> dict[str, int]:
    return dict(zip(src.axes, src.array.shape[::-1] if src.reversed_axes else src.array.shape))


def _check_dtype(src: ArraySource) -> None:
    dtype = np.dtype(src.array.dtype)
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer) or dtype == bool):
        raise ValueError(f"{src.label} has dtype {dtype}; only real numbers can be imported "
                         f"(split complex data into real and imaginary channels)")


def _read_block(src: ArraySource, lo: int, hi: int) -> np.ndarray:
    """Samples ``lo..hi-1`` as float32 in the stored order ``(n, *grid, c)`` (channel axis always present)."""
    own = src.axes[::-1] if src.reversed_axes else src.axes  # the axis order of src.array itself
    index = tuple(slice(lo, hi) if a == "N" else slice(None) for a in own)
    block = np.asarray(src.array[index])
    order = _canonical(src.axes)
    with np.errstate(over="ignore"):  # values beyond float32 become inf, reported by the finiteness check
        block = np.transpose(block, [own.index(a) for a in order]).astype(np.float32)
    return np.ascontiguousarray(block if "C" in order else block[..., None])


def _first_bad(block: np.ndarray) -> int | None:
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


def _check_pair(x: ArraySource, y: ArraySource) -> tuple[int, int, int, int, int]:
    """(n_samples, dim, n points per axis, x channels, y channels); ValueError naming any mismatch."""
    sx, sy = _shape(x), _shape(y)
    if sx["N"] != sy["N"]:
        raise ValueError(f"{x.label} has {sx['N']} samples but {y.label} has {sy['N']}; they must pair up")
    if sx["N"] < 1:
        raise ValueError(f"{x.label} holds no samples")
    gx = [sx[a] for a in GRID_LETTERS if a in sx]
    gy = [sy[a] for a in GRID_LETTERS if a in sy]
    if gx != gy:
        raise ValueError(f"grid shapes differ: {x.label} is {' x '.join(map(str, gx))}, {y.label} is "
                         f"{' x '.join(map(str, gy))}; petrov stores input and output on one grid (check the axes)")
    if len(set(gx)) != 1:
        raise ValueError(f"the grid is {' x '.join(map(str, gx))}; petrov's 2-D grids are square (n x n): "
                         f"crop or resample the data first")
    if gx[0] < MIN_POINTS:
        raise ValueError(f"the grid has {gx[0]} points per axis; at least {MIN_POINTS} are needed (check the axes)")
    return sx["N"], len(gx), gx[0], sx.get("C", 1), sy.get("C", 1)


def import_arrays(
    output: str | os.PathLike,
    x: Any,
    y: Any = None,
    *,
    grid: str,
    x_axes: str | None = None,
    y_axes: str | None = None,
    domain: Any = None,
    coords: Sequence[Any] | None = None,
    overwrite: bool = False,
    chunk_size: int | None = None,
    description: str | None = None,
    progress: bool = False,
    **series: Any,
) -> Path:
    """Write input ``x`` and target ``y`` into the petrov dataset file ``output`` (kind ``imported``).

    ``x``/``y``: arrays or source specs (``"in.npy"``, ``"data.npz:a"``, ``"pde.h5:tensor"``,
    ``"fno.mat:coeff"``, or ``(file, key)``); ``x_axes``/``y_axes`` their axis order (module docstring;
    ``y_axes`` defaults to ``x_axes`` when the ranks match). ``grid``: ``"periodic"``, ``"nodes"`` or ``"cells"``.
    ``domain``: ``(lo, hi)`` or one per axis (default ``[0, 1]``); ``coords``: optional per-axis 1-D
    coordinate arrays/specs, checked to be uniform and used for (or checked against) the domain.
    The model sees unit-box coordinates as for generated data; the domain is recorded (attribute
    ``domain``). An existing ``output`` is a FileExistsError unless ``overwrite``. Returns ``Path(output)``. No
    ``y`` (a ``T`` in ``x_axes``; ``fields``, ``dt`` allowed): a time series, ``time_series.import_time_series``."""
    if y is None or series:  # a time series (its own module imports this one)
        from .time_series import import_time_series

        return import_time_series(output, x, axes=x_axes, grid=grid, domain=domain, coords=coords, overwrite=overwrite,
                                  chunk_size=chunk_size, description=description, progress=progress, **series)
    if grid not in GRID_KINDS:
        raise ValueError(f"grid must be one of {GRID_KINDS} (periodic: x_i = i/n; nodes: x_i = i/(n-1)), got {grid!r}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    output = output_file(output)  # the one rule for outputs: missing folders are created
    check_outputs(output.parent, "import", [output.name], overwrite=overwrite, scope="file", flag="-o")
    with contextlib.ExitStack() as stack:
        xs = open_array(x, what="x")
        stack.callback(xs.close)
        ys = open_array(y, what="y")
        stack.callback(ys.close)
        for src in (xs, ys):
            if src.file and output.exists() and os.path.samefile(src.file, output):
                raise ValueError(f"the output {output} is the source file of {src.label}; choose another name")
            _check_dtype(src)
        xs.axes = parse_axes(x_axes, xs.array.ndim, xs.label)
        y_default = y_axes if y_axes is not None else (x_axes if x_axes and len(x_axes) == ys.array.ndim else None)
        ys.axes = parse_axes(y_default, ys.array.ndim, ys.label)
        n, dim, res, cx, cy = _check_pair(xs, ys)
        periodic = grid == "periodic"
        box = parse_domain(domain, dim)
        if coords is not None:
            if len(coords) != dim:
                raise ValueError(f"coords: give one 1-D coordinate array per grid axis ({dim}), got {len(coords)}")
            found = domain_from_coords(coords, res, periodic, cells=grid == "cells")
            if domain is not None and not np.allclose(found, box, rtol=1e-4, atol=1e-8):
                raise ValueError(f"the coordinates span {found} but domain is {box}; "
                                 f"for a {grid} grid (check --grid: periodic grids exclude the right end, "
                                 f"cell centres lie half a cell inside the domain)")
            box = found
        chunk = chunk_size or default_chunk_size(res**dim * max(cx, cy))
        attrs = grid_attrs(get_recipe("imported"), ImportedParams(), res, 0, n, chunk)
        del attrs["seed"]  # nothing random
        attrs.update(
            grid=grid, dim=dim, x_channels=cx, y_channels=cy, domain=json.dumps(box),
            equation=description or attrs["equation"],
            sources=json.dumps({name: {"file": s.file, "key": s.key, "axes": s.axes}
                                for name, s in (("x", xs), ("y", ys))}),
        )
        check_outputs(output.parent, "import", [output.name], overwrite=overwrite, scope="file", flag="-o")
        return _write_atomically(output, xs, ys, attrs, progress)


def import_fno(output: str | os.PathLike, source: str | os.PathLike, *, overwrite: bool = False,
               chunk_size: int | None = None, progress: bool = False) -> Path:
    """Write the FNO ``.mat`` file ``source`` into the petrov dataset file ``output`` of the file's own kind
    (``burgers``, ``darcy``, ``navier-stokes``; fields with a channel axis, ``attrs["sources"]`` naming the
    file; no generation parameters are known: ``params`` is empty). Returns ``Path(output)``."""
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    output = output_file(output)
    check_outputs(output.parent, "import", [output.name], overwrite=overwrite, scope="file", flag="-o")
    if Path(source).exists() and output.exists() and os.path.samefile(source, output):
        raise ValueError(f"the output {output} is the source file; choose another name")
    with open_mat(source) as src:
        grid = "N" + GRID_LETTERS[: src.dim]
        xs, ys = (ArraySource(f"{name} ({source})", field, grid + ("C" if src.channel_shape(name) else ""),
                              file=str(source), reversed_axes=src.transposed)
                  for name, field in (("x", src.x), ("y", src.y)))
        n, dim, res, cx, cy = _check_pair(xs, ys)
        recipe = get_recipe(src.kind)
        attrs = grid_attrs(get_recipe("imported"), ImportedParams(), res, 0, n, chunk_size or default_chunk_size(
            res**dim * max(cx, cy)))
        del attrs["seed"]  # nothing random here
        attrs.update(kind=recipe.name, family=recipe.family, equation=recipe.description, x_name=src.attrs["x_name"],
                     y_name=src.attrs["y_name"], grid=recipe.grid_kind, dim=dim, x_channels=cx, y_channels=cy,
                     sources=json.dumps({"file": str(source), "format": src.source}))
        return _write_atomically(output, xs, ys, attrs, progress)


def _checked_blocks(xs: ArraySource, ys: ArraySource, n: int):
    """The block source of the write path: the samples of the sources a chunk at a time, each checked finite."""

    def blocks(start: int, chunk: int, stack):
        for lo in range(start, n, chunk):
            hi = min(lo + chunk, n)
            data = {}
            for name, src in (("x", xs), ("y", ys)):
                data[name] = block = _read_block(src, lo, hi)
                bad = _first_bad(block)
                if bad is not None:
                    raise ValueError(f"{src.label} has NaN/Inf (or values beyond float32) in sample "
                                     f"{lo + bad} (the first bad one); fix or drop such samples first")
            yield lo, hi, data

    return blocks


def _write_atomically(output: Path, xs: ArraySource, ys: ArraySource, attrs: dict, progress: bool) -> Path:
    n, res, dim = attrs["n_samples"], attrs["native_resolution"], attrs["dim"]
    shapes = {name: (*(res,) * dim, attrs[f"{name}_channels"]) for name in ("x", "y")}
    # HDF5's own file lock would clash with the temporary file's (nobody else opens it anyway)
    layout = grid_layout(shapes, shown=output, locking=False)
    with atomic_path(output, stored_bytes(shapes, n)) as tmp:  # each writer its own temp file: always whole
        layout.create(tmp, attrs)
        fill(tmp, layout, _checked_blocks(xs, ys, n), n, attrs["chunk_size"], progress=progress, desc="import",
             shown=output, locking=False)
    return output


__all__ = ["GRID_KINDS", "MIN_POINTS", "domain_from_coords", "import_arrays", "import_fno", "open_array",
           "parse_axes", "parse_domain", "parse_spec"]
