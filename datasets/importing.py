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
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..common.files import atomic_path
from ..common.outputs import check_outputs, output_file
from .array_sources import (GRID_KINDS, GRID_LETTERS, MIN_POINTS, ArraySource, axis_sizes, check_dtype, domain_from_coords, first_bad, open_array, parse_axes, parse_domain, parse_spec, read_block)
from .fno_files import open_mat
from .grid_files import default_chunk_size, grid_attrs, grid_layout, stored_bytes
from .recipes import ImportedParams, get_recipe
from .time_series import import_time_series
from .write_path import fill

def _check_pair(x: ArraySource, y: ArraySource) -> tuple[int, int, int, int, int]:
    """(n_samples, dim, n points per axis, x channels, y channels); ValueError naming any mismatch."""
    sx, sy = axis_sizes(x), axis_sizes(y)
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
    if y is None or series:
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
            check_dtype(src)
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
                data[name] = block = read_block(src, lo, hi)
                bad = first_bad(block)
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
