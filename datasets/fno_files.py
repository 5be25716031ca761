"""Readers for the FNO benchmark files, presented like petrov's own files (``StoredData``).

- ``burgers_data_R10.mat``: keys ``a`` (u0) and ``u`` (u(1)), each ``2048 x 8192`` (samples x points),
  periodic grid ``i/8192``, nu = 0.1.
- ``piececonst_r421_N1024_smooth{1,2}.mat``: keys ``coeff`` (a) and ``sol`` (u), each ``1024 x 421 x 421``,
  node grid of [0, 1]^2.
- ``NavierStokes_V1e-5_N1200_T20.mat`` (v5), ``ns_V1e-3_N5000_T50.mat`` (v7.3), ...: keys ``a`` (w0,
  ``N x 64 x 64``), ``u`` (the vorticity at t = 1..T, ``N x 64 x 64 x T``) and ``t`` (the times), periodic
  grid ``(i/64, j/64)``. Told from Burgers (the same keys) by the rank of ``u``, and presented as kind
  ``navier-stokes``: ``x = a`` and ``y = [a, u]`` along time, ``(N, 64, 64, T + 1)`` with ``y[..., k] = w(t = k)``,
  as ``petrov generate navier-stokes`` stores its trajectories.

Two MATLAB formats occur. v5 (and v7) files load with ``scipy.io.loadmat`` (whole arrays in memory, in
MATLAB's index order). v7.3 files are HDF5 files with a 512-byte MATLAB header as user block, which
h5py opens directly; MATLAB stores arrays column-major, so h5py sees every array with its axes reversed
(``N x 421 x 421`` appears as ``421 x 421 x N``): those are read lazily and transposed back (``.T``), which
gives exactly what ``loadmat`` gives for the same data. Samples are read a block at a time, so a 5000-sample
v7.3 file is never loaded whole (but a MATLAB array keeps a sample's values apart, one value every N, so
reading one sample touches the whole array: ``petrov import --fno`` writes a petrov file, one sample per chunk).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import scipy.io

from .hdf5_files import open_h5
from .storage import StoredData

# kind -> (key of the input field, key of the target field, grid dimension, periodic)
FNO_LAYOUTS: dict[str, tuple[str, str, int, bool]] = {
    "burgers": ("a", "u", 1, True),
    "darcy": ("coeff", "sol", 2, False),
    "navier-stokes": ("a", "u", 2, True),  # u: (N, n, n, T), the target field y = [a, u] along time
}
TRAJECTORIES = {"navier-stokes"}  # kinds whose target holds the input and the later states as channels


class Samples:
    """MATLAB arrays (numpy arrays from ``loadmat``, or h5py datasets of a v7.3 file with reversed axes)
    presented samples-first: one ``(N, *grid)`` array as ``(N, *grid)``, or several concatenated along a
    trailing time axis, ``(N, *grid, channels)`` (a part without one counts as one channel). Indexing reads
    the samples of the first index (a slice) and nothing else; the other indices apply to the result."""

    def __init__(self, parts: list, transposed: bool, dim: int):
        self.parts, self.transposed, self.dim = parts, transposed, dim
        shapes = [tuple(p.shape[::-1] if transposed else p.shape) for p in parts]
        self.shape = shapes[0][: 1 + dim]
        if len(parts) > 1:
            self.shape += (sum(s[1 + dim] if len(s) > 1 + dim else 1 for s in shapes),)
        self.ndim, self.dtype = len(self.shape), np.dtype(np.float32)

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        blocks = [np.asarray(p[..., index[0]]).T if self.transposed else np.asarray(p[index[0]]) for p in self.parts]
        if len(blocks) > 1:
            blocks = np.concatenate([b if b.ndim > 1 + self.dim else b[..., None] for b in blocks], axis=-1)
        else:
            blocks = blocks[0]
        return blocks[(slice(None),) + index[1:]]


def mat_format(path: str | os.PathLike) -> str:
    """``"v7.3"`` (HDF5) or ``"v5"``, from the file itself; ValueError if it is neither."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such .mat file: {path}")
    if h5py.is_hdf5(path):
        return "v7.3"
    with open(path, "rb") as fh:
        header = fh.read(128)
    if len(header) == 128 and header.startswith(b"MATLAB 5.0 MAT-file"):
        return "v5"
    raise ValueError(f"{path} is neither a MATLAB v5 nor a v7.3 (HDF5) .mat file (corrupt or truncated?)")


def _detect(shapes: dict[str, tuple], path: Path) -> str:
    """The kind from the variables' names, and for ``a`` and ``u`` (Burgers or Navier-Stokes) the rank of ``u``."""
    if "a" in shapes and "u" in shapes:
        return "navier-stokes" if len(shapes["u"]) == 4 else "burgers"
    for kind, (kx, ky, _, _) in FNO_LAYOUTS.items():
        if kx in shapes and ky in shapes:
            return kind
    expected = "; ".join(f"{k}: {kx!r} and {ky!r}" for k, (kx, ky, _, _) in FNO_LAYOUTS.items())
    raise KeyError(f"{path} holds variables {sorted(shapes)}; expected the FNO keys ({expected})")


def _check_shapes(kind: str, shape_x: tuple, shape_y: tuple, path: Path) -> tuple[int, int]:
    """(n_samples, native resolution) from MATLAB-order shapes ``(n, *grid)`` (a trajectory's y: ``(n, *grid, T)``)."""
    dim = FNO_LAYOUTS[kind][2]
    grid_y = shape_y[:-1] if kind in TRAJECTORIES else shape_y
    if shape_x != grid_y or len(shape_x) != dim + 1 or len(set(shape_x[1:])) != 1 or 0 in shape_y:
        want = f"(samples, {' x '.join(['n'] * dim)})"
        raise ValueError(f"{path}: expected arrays of shapes {want} and {want[:-1]} x T) for {kind}, got {shape_x} "
                         f"and {shape_y}" if kind in TRAJECTORIES else
                         f"{path}: expected two arrays of equal shape {want} for {kind}, got {shape_x} and {shape_y}")
    return int(shape_x[0]), int(shape_x[1])


def open_mat(path: str | os.PathLike) -> StoredData:
    """Open an FNO Burgers or Darcy .mat file (v5 or v7.3); the kind is recognised from its keys."""
    path = Path(path)
    fmt = mat_format(path)
    handle: Any = None
    if fmt == "v7.3":
        handle = open_h5(path)
        try:
            arrays = {k: v for k, v in handle.items() if isinstance(v, h5py.Dataset)}
            kind = _detect({k: () for k in handle} | {k: v.shape[::-1] for k, v in arrays.items()}, path)
            kx, ky, dim, periodic = FNO_LAYOUTS[kind]
            if kx not in arrays or ky not in arrays:
                raise ValueError(f"{path}: {kx!r}/{ky!r} are not numeric arrays")
            x, y = arrays[kx], arrays[ky]
            n, res = _check_shapes(kind, x.shape[::-1], y.shape[::-1], path)
        except BaseException:
            handle.close()
            raise
    else:
        try:  # whole file: scipy's header scan (whosmat) does not notice a truncated file
            data = scipy.io.loadmat(path)
        except Exception as err:  # scipy raises several types for damaged files
            raise ValueError(f"{path}: cannot read the MATLAB v5 file (corrupt or truncated?): {err}") from err
        kind = _detect({k: np.shape(v) for k, v in data.items() if not k.startswith("__")}, path)
        kx, ky, dim, periodic = FNO_LAYOUTS[kind]
        x, y = np.asarray(data[kx]), np.asarray(data[ky])
        n, res = _check_shapes(kind, x.shape, y.shape, path)
    transposed = fmt == "v7.3"
    if kind in TRAJECTORIES:  # y = [a, u] along time, both read samples-first
        x, y, transposed = Samples([x], transposed, dim), Samples([x, y], transposed, dim), False
    attrs = {
        "format": f"fno-mat-{fmt}",
        "kind": kind,
        "native_resolution": res,
        "grid": "periodic" if periodic else "nodes",
        "n_samples": n,
        "n_complete": n,
        "x_name": kx,
        "y_name": ky,
    }
    return StoredData(
        path=path, kind=kind, native_resolution=res, periodic=periodic, dim=dim, n_samples=n, n_complete=n,
        attrs=attrs, x=x, y=y, transposed=transposed, source=attrs["format"], _handle=handle,
    )


def read_mat(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Both fields of an FNO .mat file as float32 arrays in MATLAB index order, e.g. ``{"coeff": (N, 421, 421),
    "sol": ...}``, ``{"a": (N, 64, 64), "u": (N, 64, 64, T)}`` (whole arrays; prefer ``open_dataset`` to read a
    subset at a lower resolution)."""
    with open_mat(path) as src:
        idx = np.arange(src.n_samples)
        y = src.read("y", idx, 1)
        return {src.attrs["x_name"]: src.read("x", idx, 1),
                src.attrs["y_name"]: y[..., 1:] if src.kind in TRAJECTORIES else y}
