"""Time series on grids (kind ``time-series``): several fields, ``S`` equally spaced states per sample, on a
1-D or 2-D grid that may be rectangular, with per-axis periodicity.

The stored file is an ordinary grid file (``grid_files``: one sample per chunk, written to a temporary file
and renamed, ``content_hash``):

- ``y`` float32 ``(N, *grid, S, F)``: the ``S >= 2`` states of ``F >= 1`` fields (this rank even for F = 1);
- ``x`` float32 ``(N, *grid, F)``: the first state, ``y[:, ..., 0, :]``;
- attributes ``dim``, ``fields`` (JSON list of the F names), ``time_steps`` = S - 1, ``native_shape`` (JSON:
  points per grid axis), ``native_resolution`` (the largest of them), ``axis_grids`` (JSON: "periodic",
  "nodes" or "cells" per axis), ``grid`` (their common value, else "mixed"), ``domain`` (JSON ``[lo, hi]``
  per axis), ``dt`` (the time between stored states, where the source gives it) and ``sources`` (JSON).

A source is a ``SeriesSource``: one or more arrays (``FieldPart``), each in its own axis order, a string
of the letters ``N`` (samples), ``T`` (time), ``X`` (and ``Y``) grid axes and ``C`` (several fields in one
array), e.g. ``"NTXYC"`` (PDEBench), ``"NXYT"`` (FNO's Navier-Stokes arrays with a sample axis first).
``import_time_series`` makes one from the user's arrays (``petrov import --series``); ``pdebench`` and
``the_well`` from those files' own layouts (``petrov import --from``). Samples are read, checked and
written a chunk at a time: the memory held is about one chunk of float32 states plus the source's block.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import h5py
import numpy as np

from ..common.files import atomic_path
from ..common.outputs import check_outputs, output_file
from .hdf5_files import open_h5
from .grid_files import default_chunk_size, grid_attrs, grid_layout, stored_bytes
from .array_sources import (GRID_KINDS, GRID_LETTERS, MIN_POINTS, ArraySource, check_dtype, axis_sizes, domain_from_coords,
                        open_array, parse_domain, parse_spec)
from .recipes import ImportedParams, get_recipe
from .sample_groups import is_group_pattern, open_group_stack
from .write_path import fill

KIND = "time-series"
SERIES_LETTERS = "NTC" + GRID_LETTERS


@dataclass
class FieldPart:
    """One source array holding the fields ``names``; ``source.axes`` its axis order (N, T, X[, Y], and C
    for several fields; a tensor field's second component axis is D, flattened with C, C slower)."""

    source: ArraySource
    names: list[str]

    @property
    def channels(self) -> int:
        shape = axis_sizes(self.source)
        return shape.get("C", 1) * shape.get("D", 1)


@dataclass
class SeriesSource:
    """A time series to import: its ``parts`` (fields in order), per-axis ``axis_grids`` and ``domain``, the
    time step ``dt`` (None: unknown), ``sources`` (recorded as JSON) and ``file``, what messages name."""

    file: str
    parts: list[FieldPart]
    axis_grids: list[str]
    domain: list[list[float]]
    dt: float | None = None
    sources: dict = field(default_factory=dict)
    handles: list = field(default_factory=list, repr=False)

    @property
    def fields(self) -> list[str]:
        return [name for part in self.parts for name in part.names]

    def close(self) -> None:
        for part in self.parts:
            part.source.close()
        for h in self.handles:
            h.close()
        self.handles.clear()


# --- axes, grids and time -----------------------------------------------------------------------------


def parse_series_axes(axes: str | None, ndim: int, label: str) -> str:
    """Validate the axis order of a time-series array of rank ``ndim``: N, T, X (and Y), optionally C."""
    if not axes:
        raise ValueError(f"{label}: give the axis order of a time series (e.g. NTXYC, NTXY, NXYT): N samples, "
                         f"T time, X/Y grid axes, C fields")
    spec = str(axes).upper()
    letters, grid = set(spec), "".join(a for a in spec if a in GRID_LETTERS)
    problems = []
    if len(spec) != ndim:
        problems.append(f"it has {len(spec)} letters for an array with {ndim} axes")
    if letters - set(SERIES_LETTERS):
        problems.append(f"unknown letters {sorted(letters - set(SERIES_LETTERS))}")
    if len(letters) != len(spec):
        problems.append("a letter repeats")
    for need, what in (("N", "samples"), ("T", "time")):
        if need not in spec:
            problems.append(f"it needs one {need} ({what})")
    if sorted(grid) not in (["X"], ["X", "Y"]):
        problems.append("the grid axes must be X (1-D) or X and Y (2-D)")
    if problems:
        raise ValueError(f"axes {axes!r} for {label}: {'; '.join(problems)}. Use N for samples, T for time, X/Y "
                         f"for grid axes and C for fields, in the array's order, e.g. NTXYC, NTXY, NXYT")
    return spec


def parse_axis_grids(grid: str | Sequence[str] | None, dim: int, where: str) -> list[str]:
    """``"periodic"`` for every axis, or one of ``GRID_KINDS`` per axis -> a list of ``dim`` kinds."""
    kinds = [grid] * dim if isinstance(grid, str) else list(grid or [])
    if len(kinds) == 1 and dim > 1:
        kinds = kinds * dim
    if len(kinds) != dim or any(k not in GRID_KINDS for k in kinds):
        raise ValueError(f"{where}: grid must be one of {', '.join(GRID_KINDS)}, or one per grid axis ({dim}), "
                         f"got {grid!r}")
    return kinds


def time_step(times: Any, states: int, label: str) -> float:
    """The step of uniformly spaced ``times``, whose first ``states`` entries are the stored states' times
    (PDEBench keeps one time more than states in some files); ValueError naming ``label`` otherwise."""
    t = np.asarray(times, dtype=float).reshape(-1)
    if states < 2:
        raise ValueError(f"{label}: the samples hold {states} state in time; a time series needs at least 2")
    if t.size not in (states, states + 1):
        raise ValueError(f"{label}: expected {states} times (one per stored state), got {t.size}")
    step = np.diff(t[:states])
    if not np.isfinite(t).all() or not (step > 0).all():
        raise ValueError(f"{label}: the times must be finite and increasing")
    dt = (t[states - 1] - t[0]) / (states - 1)
    if not np.allclose(step, dt, rtol=1e-3, atol=0):
        raise ValueError(f"{label}: the states are not equally spaced in time (steps from {step.min():.6g} to "
                         f"{step.max():.6g}); petrov stores equally spaced states only: resample them first")
    return float(dt)


def grid_domain(coords: Sequence[Any], sizes: Sequence[int], kinds: Sequence[str]) -> list[list[float]]:
    """``[lo, hi]`` per grid axis from 1-D coordinates (specs or arrays), checked uniform (``domain_from_coords``)."""
    return domain_from_coords(coords, list(sizes), [k == "periodic" for k in kinds], [k == "cells" for k in kinds])


# --- reading and checking -------------------------------------------------------------------------------


def series_shape(series: SeriesSource) -> tuple[int, tuple[int, ...], int]:
    """``(n_samples, grid shape, states)`` of ``series``; ValueError naming the part that does not fit."""
    if not series.parts:
        raise ValueError(f"{series.file}: no time-dependent fields to import")
    first = None
    for part in series.parts:
        shape = axis_sizes(part.source)
        dims = (shape["N"], tuple(shape[a] for a in GRID_LETTERS if a in shape), shape["T"])
        if part.channels != len(part.names):
            raise ValueError(f"{part.source.label} holds {part.channels} fields but {len(part.names)} names were "
                             f"given ({', '.join(part.names)}); give one name per field")
        if first is None:
            first = (part, dims)
            continue
        for what, mine, theirs in (("samples", dims[0], first[1][0]), ("grid points", dims[1], first[1][1]),
                                   ("states (the time length)", dims[2], first[1][2])):
            if mine != theirs:
                raise ValueError(f"{part.source.label} has {mine} {what} but {first[0].source.label} has {theirs}; "
                                 f"every field of a time series needs the same")
    n, grid, states = first[1]
    label = first[0].source.label
    if n < 1:
        raise ValueError(f"{label} holds no samples")
    if states < 2:
        raise ValueError(f"{label} holds {states} state in time; a time series needs at least 2 (check the axes)")
    if min(grid) < MIN_POINTS:
        raise ValueError(f"{label}: the grid is {' x '.join(map(str, grid))}; at least {MIN_POINTS} points per "
                         f"axis are needed (check the axes)")
    names = series.fields
    if len(set(names)) != len(names):
        raise ValueError(f"{series.file}: field names repeat ({', '.join(names)}); give distinct names")
    if len(series.axis_grids) != len(grid) or len(series.domain) != len(grid):
        raise ValueError(f"{series.file}: {len(grid)} grid axes but {len(series.axis_grids)} grid kinds and "
                         f"{len(series.domain)} domain bounds")
    return n, grid, states


def read_part(part: FieldPart, lo: int, hi: int, out: np.ndarray, pieces: int = 4) -> None:
    """Samples ``lo..hi-1`` of ``part`` into ``out`` float32 ``(hi - lo, *grid, S, channels)``, read in about
    ``pieces`` slices of samples (the source's values held at once: about ``1/pieces`` of ``out``)."""
    src = part.source
    own = src.axes[::-1] if src.reversed_axes else src.axes  # the axis order of src.array itself
    order = "N" + "".join(a for a in GRID_LETTERS if a in own) + "T" + "".join(a for a in "CD" if a in own)
    step = -(-(hi - lo) // pieces)
    for a in range(lo, hi, step):
        b = min(a + step, hi)
        index = tuple(slice(a, b) if letter == "N" else slice(None) for letter in own)
        block = np.transpose(np.asarray(src.array[index]), [own.index(letter) for letter in order])
        target = out[a - lo : b - lo]
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float32: inf, found by the finiteness check
            target[...] = block.reshape(target.shape) if "D" in own else block if "C" in own else block[..., None]
        del block  # before the next slice is read: one slice of the source in memory


def first_bad(y: np.ndarray) -> tuple[int, int] | None:
    """``(sample, field)`` of the first non-finite value of a block ``(k, *grid, S, F)``, None if all finite."""
    good = np.isfinite(y).all(axis=tuple(range(1, y.ndim - 1)))  # (k, F)
    if good.all():
        return None
    k, f = np.argwhere(~good)[0]
    return int(k), int(f)


def _blocks(series: SeriesSource, n: int, grid: tuple[int, ...], states: int):
    """The write path's block source: ``x``/``y`` of a chunk of samples, each field checked finite."""
    offsets = np.cumsum([0] + [len(p.names) for p in series.parts])

    def blocks(start: int, chunk: int, stack):
        for lo in range(start, n, chunk):
            hi = min(lo + chunk, n)
            y = np.empty((hi - lo, *grid, states, offsets[-1]), np.float32)
            for part, a, b in zip(series.parts, offsets[:-1], offsets[1:]):
                read_part(part, lo, hi, y[..., a:b])
            bad = first_bad(y)
            if bad is not None:
                k, f = bad
                part = next(p for p, a, b in zip(series.parts, offsets[:-1], offsets[1:]) if a <= f < b)
                raise ValueError(f"{part.source.label}: field {series.fields[f]!r} has NaN/Inf (or values beyond "
                                 f"float32) in sample {lo + k} (the first bad one); fix or drop such samples first")
            block, y = {"x": np.ascontiguousarray(y[..., 0, :]), "y": y}, None
            yield lo, hi, block
            del block  # the writer frees its reference too: the next block is made with this one gone

    return blocks


# --- writing ----------------------------------------------------------------------------------------------


def write_time_series(output: str | os.PathLike, series: SeriesSource, *, overwrite: bool = False,
                      chunk_size: int | None = None, description: str | None = None, progress: bool = False) -> Path:
    """Write ``series`` into the petrov file ``output`` of kind ``time-series`` (module docstring): checked
    whole before anything is written, then a chunk of ``chunk_size`` samples at a time (default: about 4M
    values); nothing is left at ``output`` (nor a temporary file) if any check fails. Returns ``Path(output)``."""
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    output = output_file(output)
    for part in series.parts:
        check_dtype(part.source)
        if part.source.file and output.exists() and os.path.samefile(part.source.file, output):
            raise ValueError(f"the output {output} is the source file of {part.source.label}; choose another name")
    n, grid, states = series_shape(series)
    fields = series.fields
    chunk = chunk_size or default_chunk_size(math.prod(grid) * states * len(fields))
    attrs = grid_attrs(get_recipe(KIND), ImportedParams(), max(grid), 0, n, chunk)
    del attrs["seed"]  # nothing random
    kinds = series.axis_grids
    attrs.update(
        dim=len(grid), fields=json.dumps(fields), time_steps=states - 1, native_shape=json.dumps(list(grid)),
        axis_grids=json.dumps(kinds), grid=kinds[0] if len(set(kinds)) == 1 else "mixed",
        domain=json.dumps(series.domain), sources=json.dumps(series.sources), x_channels=len(fields),
        y_channels=len(fields), equation=description or attrs["equation"],
    )
    if series.dt is not None:
        attrs["dt"] = float(series.dt)
    shapes = {"x": (*grid, len(fields)), "y": (*grid, states, len(fields))}
    check_outputs(output.parent, "import", [output.name], overwrite=overwrite, scope="file", flag="-o")
    layout = grid_layout(shapes, shown=output, locking=False)  # HDF5's own lock would clash with the temp file's
    with atomic_path(output, stored_bytes(shapes, n)) as tmp:
        layout.create(tmp, attrs)
        fill(tmp, layout, _blocks(series, n, grid, states), n, chunk, progress=progress, desc="import", shown=output,
             locking=False)
    return output


# --- the user's arrays --------------------------------------------------------------------------------------


def open_series_array(spec: Any, what: str) -> tuple[ArraySource, bool]:
    """Open one array of a time series: a spec as ``open_array`` takes it, or ``FILE.h5:*/KEY`` (one sample
    per group, ``GroupStack``). Returns it and whether it is a stack."""
    if isinstance(spec, (str, os.PathLike)):
        path, key = parse_spec(spec)
        if is_group_pattern(key):
            if not path.exists():
                raise FileNotFoundError(f"{what}: no such file: {path}")
            label = f"{what} ({path}:{key})"
            stack, h5 = open_group_stack(path, key, label)
            return ArraySource(label, stack, file=str(path), key=key, _handle=h5), True
    return open_array(spec, what=what), False


def _default_names(sources: list[ArraySource]) -> list[list[str]]:
    """Field names where none are given: an array's key (its last path part) for one field per array, else
    ``u`` (one field) or ``u0, u1, ...``."""
    if len(sources) > 1:
        return [[(s.key or f"u{i}").rsplit("/", 1)[-1]] for i, s in enumerate(sources)]
    channels = axis_sizes(sources[0]).get("C")
    return [["u"] if channels is None else [f"u{c}" for c in range(channels)]]


def import_time_series(
    output: str | os.PathLike,
    arrays: Any,
    *,
    axes: str,
    grid: str | Sequence[str],
    fields: Sequence[str] | None = None,
    domain: Any = None,
    coords: Sequence[Any] | None = None,
    dt: float | None = None,
    overwrite: bool = False,
    chunk_size: int | None = None,
    description: str | None = None,
    progress: bool = False,
) -> Path:
    """Write the user's time series into the petrov file ``output`` of kind ``time-series``.

    ``arrays``: one array or source spec holding every field (``C`` in ``axes``, or a single field), or a
    list of them, one field each. Specs as ``import_arrays`` takes
    them, plus ``"FILE.h5:*/KEY"``: the dataset ``KEY`` of every group, one sample per group (then ``axes``
    has no ``N``). ``axes``: the arrays' axis order (module docstring; one string for all of them).
    ``fields``: one name per field (default: the arrays' keys, or ``u``/``u0, u1, ...``). ``grid``: a grid
    kind for every axis or one per axis; ``domain``/``coords``: as for ``import_arrays``, per axis (a
    rectangular grid may have other lengths per axis); ``dt``: the time between stored states, recorded.
    Returns ``Path(output)``; an existing ``output`` is a FileExistsError unless ``overwrite``."""
    output = output_file(output)
    check_outputs(output.parent, "import", [output.name], overwrite=overwrite, scope="file", flag="-o")
    specs = list(arrays) if isinstance(arrays, (list, tuple)) else [arrays]
    if not specs:
        raise ValueError("give at least one array of the time series")
    if dt is not None and not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt (the time between stored states) must be a finite number > 0, got {dt!r}")
    with contextlib.ExitStack() as stack:
        sources = []
        for i, spec in enumerate(specs):
            src, grouped = open_series_array(spec, what=f"array {i + 1}" if len(specs) > 1 else "time series")
            stack.callback(src.close)
            src.axes = parse_series_axes(("N" if grouped else "") + axes if axes else None, src.array.ndim, src.label)
            if len(specs) > 1 and "C" in src.axes:
                raise ValueError(f"{src.label}: one array per field has no C axis; give axes without C, or one "
                                 f"array holding every field")
            sources.append(src)
        names = _default_names(sources) if fields is None else _split_names(list(fields), sources)
        shape = axis_sizes(sources[0])
        dim = sum(a in shape for a in GRID_LETTERS)
        kinds = parse_axis_grids(grid, dim, "the time series")
        box = parse_domain(domain, dim)
        if coords is not None:
            if len(coords) != dim:
                raise ValueError(f"coords: give one 1-D coordinate array per grid axis ({dim}), got {len(coords)}")
            found = grid_domain(coords, [shape[a] for a in GRID_LETTERS[:dim]], kinds)
            if domain is not None and not np.allclose(found, box, rtol=1e-4, atol=1e-8):
                raise ValueError(f"the coordinates span {found} but domain is {box} (check --grid: periodic grids "
                                 f"exclude the right end, cell centres lie half a cell inside the domain)")
            box = found
        series = SeriesSource(
            file=str(sources[0].file or "the arrays"), parts=[FieldPart(s, n) for s, n in zip(sources, names)],
            axis_grids=kinds, domain=box, dt=dt,
            sources={"format": "arrays", "arrays": [{"file": s.file, "key": s.key, "axes": s.axes} for s in sources]})
        return write_time_series(output, series, overwrite=overwrite, chunk_size=chunk_size, description=description,
                                 progress=progress)


def _split_names(names: list[str], sources: list[ArraySource]) -> list[list[str]]:
    """The given field names, split among the arrays (one per field, in order)."""
    counts = [axis_sizes(s).get("C", 1) for s in sources]
    if len(names) != sum(counts):
        raise ValueError(f"fields: {len(names)} names ({', '.join(names)}) for {sum(counts)} fields in the arrays "
                         f"({', '.join(s.label for s in sources)}); give one name per field")
    bounds = np.cumsum([0] + counts)
    return [names[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def series_of_file(path: str | os.PathLike, option: str, files: str,
                   read: Callable[[h5py.File, Path], SeriesSource]) -> SeriesSource:
    """``read(h5, path)`` on the HDF5 file ``path`` (a format's reader, ``--from NAME``): the series it returns
    holds the file open (its arrays are read lazily) and closes it with itself; a failing ``read`` closes it at
    once.  A missing file, or one that is not HDF5, is one line naming ``option`` or what ``files`` are."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{option}: no such file: {path}")
    if not h5py.is_hdf5(path):
        raise ValueError(f"{path}: not an HDF5 file; {files} are HDF5 (.hdf5, .h5)")
    h5 = open_h5(path)
    try:
        series = read(h5, path)
    except BaseException:
        h5.close()
        raise
    series.handles.append(h5)
    return series


__all__ = ["series_of_file", "FieldPart", "KIND", "SeriesSource", "first_bad", "grid_domain", "import_time_series",
           "open_series_array", "parse_axis_grids", "parse_series_axes", "read_part", "series_shape", "time_step",
           "write_time_series"]
