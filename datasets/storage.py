"""HDF5 storage: one file per dataset, written atomically and resumably; strided reads of stored samples.

File layout (h5py): datasets ``x`` and ``y``, float32 ``(n_samples, *grid)`` (a trajectory kind's ``y``:
``(n_samples, n_snapshots, *grid)``), one sample per HDF5 chunk
(so a read touches only the samples asked for), unwritten samples filled with NaN. Attributes:
``format``/``format_version``, ``kind``, ``family``, ``equation``, every parameter (one attribute each,
plus all of them as JSON in ``params``), ``seed``, ``native_resolution``, ``grid`` ("periodic"/"nodes"),
``dim``, ``solver_settings`` (JSON), ``petrov_version``, ``created`` (UTC ISO time), ``n_samples``,
``n_complete``, ``x_name``/``y_name``, ``chunk_size``.

Generation writes ``FILE.h5.partial`` in the same directory, chunk by chunk in index order, setting
``n_complete`` and flushing after each chunk, and renames it to ``FILE.h5`` (``os.replace``) when all
samples are written. Rerunning an interrupted generation with the same parameters resumes from
``n_complete``; because sample ``i`` depends only on ``(seed, i)`` the result equals an uninterrupted run.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np
from tqdm.auto import tqdm

from ..operators.config import asdict
from .darcy import darcy_worker_pool
from .recipes import Recipe, get_recipe

FORMAT = "petrov-dataset"
FORMAT_VERSION = 1
# Attributes that must match for a partial file to be resumed.
_IDENTITY = ("format_version", "kind", "params", "seed", "native_resolution", "n_samples")


def petrov_version() -> str:
    try:
        return metadata.version("petrov")
    except metadata.PackageNotFoundError:
        return "unknown"


def partial_path(path: str | os.PathLike) -> Path:
    """The temporary file a generation of ``path`` writes to (same directory, so the rename is atomic)."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


def default_chunk_size(n_points: int) -> int:
    """Samples per generation chunk: about 4M grid values (32 MB in float64), between 1 and 256."""
    return int(min(256, max(1, 2**22 // n_points)))


def _plain(value: Any) -> Any:
    """h5py attribute values back to plain Python (bytes -> str, numpy scalars -> int/float)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def file_attrs(h5: h5py.File) -> dict[str, Any]:
    """All attributes of an open file as plain Python values (JSON attributes stay strings)."""
    return {k: _plain(v) for k, v in h5.attrs.items()}


def open_h5(path: str | os.PathLike, mode: str = "r") -> h5py.File:
    """Open an HDF5 file with clear errors for a missing or unreadable (corrupt, truncated) file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such dataset file: {path}")
    try:
        return h5py.File(path, mode, rdcc_nbytes=16 * 2**20)
    except OSError as err:
        raise ValueError(f"{path} is not a readable HDF5 file (corrupt or truncated?): {err}") from None


def _attrs_for(recipe: Recipe, params, resolution: int, seed: int, n_samples: int, chunk_size: int) -> dict:
    plain_params = asdict(params)
    attrs: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": recipe.name,
        "family": recipe.family,
        "equation": recipe.description,
        "params": json.dumps(plain_params, sort_keys=True),
        "seed": int(seed),
        "native_resolution": int(resolution),
        "grid": recipe.grid_kind,
        "dim": recipe.dim,
        "solver_settings": json.dumps(recipe.solver_settings(params), sort_keys=True),
        "petrov_version": petrov_version(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "n_samples": int(n_samples),
        "n_complete": 0,
        "x_name": recipe.x_name,
        "y_name": recipe.y_name,
        "chunk_size": int(chunk_size),
    }
    attrs.update(plain_params)
    return attrs


def _create_partial(tmp: Path, recipe: Recipe, params, attrs: dict, resolution: int, n_samples: int) -> None:
    with h5py.File(tmp, "w") as h5:
        for name in ("x", "y"):
            sample = recipe.sample_shape(name, params, resolution)
            h5.create_dataset(name, shape=(n_samples, *sample), dtype="float32", chunks=(1, *sample),
                              fillvalue=np.nan)
        h5.attrs.update(attrs)


def _resumable(tmp: Path, attrs: dict) -> tuple[bool, str, int | None]:
    """Whether ``tmp`` is an interrupted run of the same generation, if not why, and its chunk size."""
    try:
        with h5py.File(tmp, "r") as h5:
            old = file_attrs(h5)
    except OSError as err:
        return False, f"it cannot be read: {err}; is another generation still writing it?", None
    diff = [f"{k}: {old.get(k)!r} there vs {attrs[k]!r} now" for k in _IDENTITY if old.get(k) != attrs[k]]
    chunk = old.get("chunk_size")
    return (not diff), "; ".join(diff), (int(chunk) if chunk else None)


def generate_dataset(
    kind: str,
    path: str | os.PathLike,
    n_samples: int,
    resolution: int | None = None,
    seed: int = 0,
    *,
    overwrite: bool = False,
    chunk_size: int | None = None,
    workers: int = 0,
    progress: bool = True,
    callback: Callable[[int, int], None] | None = None,
    **params: Any,
) -> Path:
    """Generate ``n_samples`` samples of dataset ``kind`` at native ``resolution`` into the HDF5 file ``path``.

    ``params`` are the kind's parameters (see ``recipes``; unknown names are a ValueError listing the
    valid ones). ``resolution`` defaults to the kind's native grid (Burgers 8192, Darcy 421); lower
    resolutions can later be loaded by striding. An existing ``path`` is a FileExistsError unless
    ``overwrite`` (the old file is replaced only once the new one is complete). An existing
    ``path.partial`` with the same kind, parameters, seed, resolution and ``n_samples`` is resumed
    (even with ``overwrite``); one with different settings is a ValueError unless ``overwrite``.
    ``callback(n_complete, n_samples)`` runs after each chunk is on disk. Returns ``Path(path)``.
    """
    recipe = get_recipe(kind)
    p = recipe.make_params(params)
    resolution = recipe.native_resolution if resolution is None else resolution
    recipe.validate(p, resolution)
    for name, value, minimum in (("n_samples", n_samples, 1), ("seed", seed, 0), ("workers", workers, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")

    path = Path(path)
    tmp = partial_path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"output directory {path.parent} does not exist")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it")

    attrs = _attrs_for(recipe, p, resolution, seed, n_samples, chunk_size or 0)
    if tmp.exists():
        ok, why, old_chunk = _resumable(tmp, attrs)
        if not ok and not overwrite:
            raise ValueError(
                f"{tmp} holds an interrupted generation with different settings ({why}); delete it, "
                f"or pass overwrite=True (--overwrite) to discard it, or rerun with the same settings to resume"
            )
        if not ok:
            tmp.unlink()
        elif chunk_size is None:
            # same chunks as the interrupted run, so the file's chunk layout is the same too
            chunk_size = old_chunk
    if chunk_size is None:
        chunk_size = default_chunk_size(int(np.prod(recipe.grid(resolution))))
    attrs["chunk_size"] = int(chunk_size)
    if not tmp.exists():
        _create_partial(tmp, recipe, p, attrs, resolution, n_samples)

    with contextlib.ExitStack() as stack:
        h5 = stack.enter_context(h5py.File(tmp, "r+"))
        # one pool for the whole run: starting spawn workers costs seconds, not to be paid per chunk
        pool = stack.enter_context(darcy_worker_pool(workers)) if workers and recipe.uses_workers else 0
        start = int(h5.attrs["n_complete"])
        bar = tqdm(total=n_samples, initial=start, unit="sample", disable=not progress,
                   desc=f"{kind} n={resolution}")
        with bar:
            for lo in range(start, n_samples, chunk_size):
                hi = min(lo + chunk_size, n_samples)
                x, y = recipe.produce(p, resolution, seed, np.arange(lo, hi), pool)
                for name, arr in (("x", x), ("y", y)):
                    arr = np.asarray(arr)
                    expected = (hi - lo, *recipe.sample_shape(name, p, resolution))
                    if arr.shape != expected:
                        raise RuntimeError(f"{kind} recipe returned {name} of shape {arr.shape}, expected {expected}")
                    if not np.isfinite(arr).all():
                        raise RuntimeError(f"{kind}: non-finite values in {name} for samples {lo}..{hi - 1}")
                    h5[name][lo:hi] = arr.astype(np.float32)
                h5.flush()  # the data reach the file before the counter that claims them
                h5.attrs["n_complete"] = hi
                h5.flush()
                bar.update(hi - lo)
                if callback is not None:
                    callback(hi, n_samples)
    os.replace(tmp, path)
    return path


# --- reading -------------------------------------------------------------------------------------


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
    _handle: Any = field(default=None, repr=False)

    def read(self, name: str, indices: np.ndarray, stride: int, block_bytes: int = 2**26) -> np.ndarray:
        """Samples ``indices`` (any order, repeats allowed) of field ``"x"``/``"y"``, strided by ``stride``
        along every grid axis (the last ``dim`` axes): float32 ``(len(indices), *sample)``. Only the samples
        asked for are read, in increasing order (as HDF5 wants), a block of at most ``block_bytes`` of
        full-resolution samples at a time, strided in memory (faster than an HDF5 strided selection). NaN is a
        ValueError."""
        ds = self.x if name == "x" else self.y
        indices = np.asarray(indices, dtype=np.int64)
        unique, inverse = np.unique(indices, return_inverse=True)
        per_sample = 4 * int(np.prod(ds.shape)) // max(1, ds.shape[-1 if self.transposed else 0])
        block = max(1, block_bytes // per_sample)
        grid_sel = (slice(None, None, stride),) * self.dim
        parts = []
        for lo in range(0, len(unique), block):
            rows = unique[lo : lo + block]
            # consecutive runs as slices: h5py's list selection is very slow
            runs = np.split(rows, np.flatnonzero(np.diff(rows) != 1) + 1)
            part = np.concatenate([self._rows(ds, int(r[0]), int(r[-1]) + 1, grid_sel) for r in runs])
            bad = np.isnan(part).reshape(len(rows), -1).any(axis=1)
            if bad.any():
                raise ValueError(
                    f"{self.path}: field {name!r} contains NaN in sample {int(rows[bad][0])} "
                    f"(an unfinished or corrupt file); regenerate it"
                )
            parts.append(part)
        lead = () if self.transposed else tuple(ds.shape[1 : ds.ndim - self.dim])  # e.g. snapshots
        shape = (0, *lead) + (len(range(0, self.native_resolution, stride)),) * self.dim
        data = np.concatenate(parts) if parts else np.zeros(shape, np.float32)
        return data[inverse]

    def _rows(self, ds, lo: int, hi: int, grid_sel: tuple) -> np.ndarray:
        part = np.asarray(ds[..., lo:hi]).T if self.transposed else np.asarray(ds[lo:hi])
        return np.ascontiguousarray(part[(Ellipsis,) + grid_sel], dtype=np.float32)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> "StoredData":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_stored(path: str | os.PathLike) -> StoredData:
    """Open a petrov HDF5 dataset file (complete or ``.partial``) for reading."""
    path = Path(path)
    h5 = open_h5(path)
    try:
        attrs = file_attrs(h5)
        if attrs.get("format") != FORMAT:
            raise ValueError(f"{path} is an HDF5 file but not a petrov dataset (no format={FORMAT!r} attribute)")
        missing = [k for k in ("x", "y") if k not in h5]
        if missing:
            raise KeyError(f"{path} is missing dataset(s) {missing}; the file is corrupt, regenerate it")
        recipe = get_recipe(attrs["kind"])
        return StoredData(
            path=path,
            kind=attrs["kind"],
            native_resolution=int(attrs["native_resolution"]),
            periodic=attrs["grid"] == "periodic",
            dim=recipe.dim,
            n_samples=int(attrs["n_samples"]),
            n_complete=int(attrs["n_complete"]),
            attrs=attrs,
            x=h5["x"],
            y=h5["y"],
            _handle=h5,
        )
    except BaseException:
        h5.close()
        raise
