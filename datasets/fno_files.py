"""Readers for the FNO benchmark files, presented like petrov's own files (``StoredData``).

- ``burgers_data_R10.mat``: keys ``a`` (u0) and ``u`` (u(1)), each ``2048 x 8192`` (samples x points),
  periodic grid ``i/8192``, nu = 0.1.
- ``piececonst_r421_N1024_smooth{1,2}.mat``: keys ``coeff`` (a) and ``sol`` (u), each ``1024 x 421 x 421``,
  node grid of [0, 1]^2.

Two MATLAB formats occur. v5 (and v7) files load with ``scipy.io.loadmat`` (whole arrays in memory, in
MATLAB's index order). v7.3 files are HDF5 files with a 512-byte MATLAB header as user block, which
h5py opens directly; MATLAB stores arrays column-major, so h5py sees every array with its axes reversed
(``N x 421 x 421`` appears as ``421 x 421 x N``): those are read lazily and transposed back (``.T``), which
gives exactly what ``loadmat`` gives for the same data.
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
}


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


def _detect(keys, path: Path) -> str:
    for kind, (kx, ky, _, _) in FNO_LAYOUTS.items():
        if kx in keys and ky in keys:
            return kind
    expected = "; ".join(f"{k}: {kx!r} and {ky!r}" for k, (kx, ky, _, _) in FNO_LAYOUTS.items())
    raise KeyError(f"{path} holds variables {sorted(keys)}; expected the FNO keys ({expected})")


def _check_shapes(kind: str, shape_x: tuple, shape_y: tuple, path: Path) -> tuple[int, int]:
    """(n_samples, native resolution) from MATLAB-order shapes ``(n, *grid)``."""
    dim = FNO_LAYOUTS[kind][2]
    if shape_x != shape_y or len(shape_x) != dim + 1 or len(set(shape_x[1:])) != 1:
        raise ValueError(
            f"{path}: expected two arrays of equal shape (samples, {' x '.join(['n'] * dim)}) for {kind}, "
            f"got {shape_x} and {shape_y}"
        )
    return int(shape_x[0]), int(shape_x[1])


def open_mat(path: str | os.PathLike) -> StoredData:
    """Open an FNO Burgers or Darcy .mat file (v5 or v7.3); the kind is recognised from its keys."""
    path = Path(path)
    fmt = mat_format(path)
    handle: Any = None
    if fmt == "v7.3":
        handle = open_h5(path)
        try:
            kind = _detect(set(handle.keys()), path)
            kx, ky, dim, periodic = FNO_LAYOUTS[kind]
            x, y = handle[kx], handle[ky]
            if not (isinstance(x, h5py.Dataset) and isinstance(y, h5py.Dataset)):
                raise ValueError(f"{path}: {kx!r}/{ky!r} are not numeric arrays")
            n, res = _check_shapes(kind, x.shape[::-1], y.shape[::-1], path)
        except BaseException:
            handle.close()
            raise
    else:
        try:  # whole file: scipy's header scan (whosmat) does not notice a truncated file
            data = scipy.io.loadmat(path)
        except Exception as err:  # scipy raises several types for damaged files
            raise ValueError(f"{path}: cannot read the MATLAB v5 file (corrupt or truncated?): {err}") from err
        kind = _detect({k for k in data if not k.startswith("__")}, path)
        kx, ky, dim, periodic = FNO_LAYOUTS[kind]
        x, y = np.asarray(data[kx]), np.asarray(data[ky])
        n, res = _check_shapes(kind, x.shape, y.shape, path)
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
        attrs=attrs, x=x, y=y, transposed=(fmt == "v7.3"), source=attrs["format"], _handle=handle,
    )


def read_mat(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Both fields of an FNO .mat file as float32 arrays in MATLAB index order, e.g. ``{"coeff": (N, 421, 421),
    "sol": ...}`` (whole arrays; prefer ``open_dataset`` to read a subset at a lower resolution)."""
    with open_mat(path) as src:
        idx = np.arange(src.n_samples)
        return {src.attrs["x_name"]: src.read("x", idx, 1), src.attrs["y_name"]: src.read("y", idx, 1)}
