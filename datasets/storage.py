"""HDF5 storage: one file per dataset, written atomically and resumably; strided reads of stored samples.

File layout (h5py): datasets ``x`` and ``y``, float32 ``(n_samples, *grid)``, or ``(n_samples, *grid, c)``
with a trailing channel axis (imported multi-channel data; a trajectory kind's ``y`` with its
``c = T + 1`` snapshots), one sample per HDF5 chunk
(so a read touches only the samples asked for), unwritten samples filled with NaN. Attributes:
``format``/``format_version``, ``kind``, ``family``, ``equation``, every parameter (one attribute each,
plus all of them as JSON in ``params``), ``seed``, ``native_resolution``, ``grid`` ("periodic"/"nodes"; imported files also "cells"),
``dim``, ``solver_settings`` (JSON), ``petrov_version``, ``created`` (UTC ISO time), ``n_samples``,
``n_complete``, ``x_name``/``y_name``, ``chunk_size``.

Imported files (``petrov import``, kind ``imported``) have the same layout except that ``x``/``y`` are
``(n_samples, *grid, channels)`` (attributes ``x_channels``/``y_channels``), and record ``domain`` and
``sources`` (JSON) instead of generation parameters.

Generation writes ``FILE.h5.partial`` in the same directory, chunk by chunk in index order, setting
``n_complete`` and flushing after each chunk, and renames it to ``FILE.h5`` (``os.replace``) when all
samples are written. Rerunning an interrupted generation with the same parameters resumes from
``n_complete``; because sample ``i`` depends only on ``(seed, i)`` the result equals an uninterrupted run.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import logging
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

from petrov.common.config import asdict
from petrov.common.files import exclusive_lock, replace_synced
from petrov.common.progress import progress_bar
from petrov.common.quick import quick_samples
from petrov.common.version import petrov_version
from .darcy import darcy_worker_pool
from .recipes import Recipe, get_recipe
from .sampling import cell_average

FORMAT = "petrov-dataset"
FORMAT_VERSION = 1
MESH_FORMAT = "petrov-mesh-dataset"  # samples on triangle meshes: petrov.datasets.mesh.storage
# Attributes that must match for a partial file to be resumed.
_IDENTITY = ("format_version", "kind", "params", "seed", "native_resolution", "n_samples")

log = logging.getLogger(__name__)


def partial_path(path: str | os.PathLike) -> Path:
    """The temporary file a generation of ``path`` writes to (same directory, so the rename is atomic)."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


def default_chunk_size(n_points: int) -> int:
    """Samples per generation chunk: about 4M grid values (32 MB in float64), between 1 and 256."""
    return int(min(256, max(1, 2**22 // n_points)))


def _available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable``), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_resources(recipe: Recipe, resolution: int, n_samples: int, chunk_size: int | None,
                    directory: Path) -> None:
    """Refuse a generation that cannot fit: memory for one chunk, disk for the file (ValueError)."""
    points = math.prod(recipe.grid(resolution))
    chunk = chunk_size or default_chunk_size(points)
    # a chunk's x and y in float64, plus one solve's working set (sparse matrix and its factor or
    # multigrid hierarchy, FFT buffers): a generous 2 kB per grid point
    need = points * (16 * chunk + 2048)
    have = _available_memory()
    if have is not None and need > have:
        raise ValueError(
            f"{recipe.name} at resolution {resolution} ({points:,} grid points per sample) needs about "
            f"{need / 2**30:,.1f} GiB of memory, {have / 2**30:.1f} GiB are available; choose a lower "
            f"--resolution (native {recipe.native_resolution}) or a smaller --chunk-size"
        )
    check_disk(8 * points * n_samples, directory, "generate fewer samples or a lower resolution")  # x, y float32


def check_disk(need: int, directory: Path, advice: str) -> None:
    """ValueError if ``directory`` has fewer than ``need`` bytes free (``advice``: what to do then)."""
    free = shutil.disk_usage(directory).free
    if need > free:
        raise ValueError(f"the dataset needs about {need / 2**30:,.1f} GiB on disk, {directory} has "
                         f"{free / 2**30:.1f} GiB free; {advice}")


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
    clash = sorted(attrs.keys() & plain_params.keys())
    if clash:  # parameters are stored as attributes too, beside the file's own
        raise ValueError(f"{recipe.name} parameters reuse file attribute names {clash}; rename them")
    attrs.update(plain_params)
    return attrs


def _create_partial(tmp: Path, recipe: Recipe, params, attrs: dict, resolution: int, n_samples: int) -> None:
    with h5py.File(tmp, "w") as h5:
        for name in ("x", "y"):
            sample = recipe.sample_shape(name, params, resolution)
            h5.create_dataset(name, shape=(n_samples, *sample), dtype="float32", chunks=(1, *sample),
                              fillvalue=np.nan)
        h5.attrs.update(attrs)


def _complete(path: Path) -> bool:
    with h5py.File(path, "r") as h5:
        attrs = file_attrs(h5)
    return int(attrs.get("n_complete", -1)) >= int(attrs.get("n_samples", 0))



def _resumable(tmp: Path, attrs: dict, identity: tuple[str, ...] = _IDENTITY) -> tuple[bool, str, int | None]:
    """Whether ``tmp`` is an interrupted run of the same generation (the ``identity`` attributes agree),
    if not why, and its chunk size."""
    try:
        with h5py.File(tmp, "r") as h5:
            old = file_attrs(h5)
    except OSError as err:
        return False, f"it cannot be read: {err}; is another generation still writing it?", None
    diff = [f"{k}: {old.get(k)!r} there vs {attrs[k]!r} now" for k in identity if old.get(k) != attrs[k]]
    chunk = old.get("chunk_size")
    return (not diff), "; ".join(diff), (int(chunk) if chunk else None)


def claim_partial(path: Path, attrs: dict, overwrite: bool, identity: tuple[str, ...] = _IDENTITY) -> int | None:
    """Prepare ``path.partial`` for a generation with ``attrs`` (call it holding the path's lock).

    An existing ``path`` is a FileExistsError unless ``overwrite``. A partial file of the same generation
    (same ``identity`` attributes) is kept to be resumed, and its chunk size returned; one of another
    generation is a ValueError, or is deleted with ``overwrite``. Returns None when nothing is resumed
    or the partial file recorded no chunk size.
    """
    tmp = partial_path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it")
    if not tmp.exists():
        return None
    ok, why, old_chunk = _resumable(tmp, attrs, identity)
    if not ok and not overwrite:
        raise ValueError(
            f"{tmp} holds an interrupted generation with different settings ({why}); delete it, "
            f"or pass overwrite=True (--overwrite) to discard it, or rerun with the same settings to resume"
        )
    if not ok:
        tmp.unlink()
        return None
    return old_chunk


def check_generation_args(n_samples: int, seed: int, workers: int, chunk_size: int | None) -> None:
    """ValueError unless n_samples >= 1, seed >= 0, workers >= 0 and chunk_size (if given) >= 1 are integers."""
    for name, value, minimum in (("n_samples", n_samples, 1), ("seed", seed, 0), ("workers", workers, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")


def check_output_dir(path: Path) -> None:
    """FileNotFoundError / PermissionError unless the directory of ``path`` exists and is writable."""
    if not path.parent.is_dir():
        raise FileNotFoundError(f"output directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise PermissionError(f"output directory {path.parent} is not writable; choose another -o")


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
    resolutions can later be loaded by striding. Missing parent folders are created. An existing
    complete ``path`` with the same kind, parameters, seed, resolution and ``n_samples`` is kept as it
    is (nothing to do); any other existing ``path`` is a FileExistsError unless ``overwrite`` (the old
    file is replaced only once the new one is complete). In quick mode (``PETROV_QUICK=1``, see
    :mod:`petrov.common.quick`) at most ``QUICK_SAMPLES`` samples are generated. An existing
    ``path.partial`` with the same kind, parameters, seed, resolution and ``n_samples`` is resumed
    (even with ``overwrite``); one with different settings is a ValueError unless ``overwrite``.
    ``callback(n_complete, n_samples)`` runs after each chunk is on disk. Returns ``Path(path)``.
    Mesh kinds (``darcy-mesh``) take no ``resolution`` and are written by
    ``petrov.datasets.mesh.storage.generate_mesh_dataset``.
    """
    from .mesh.recipes import MESH_RECIPES  # here: the mesh package imports this module
    from .recipes import RECIPES

    if kind not in RECIPES and kind not in MESH_RECIPES:
        raise KeyError(f"{RECIPES.unknown_message(kind)}; mesh kinds: {', '.join(MESH_RECIPES.names())}")
    if kind in MESH_RECIPES:
        from .mesh.storage import generate_mesh_dataset

        if resolution is not None:
            raise ValueError(f"{kind} is a mesh dataset: it has no resolution (its mesh spacing is the h parameter)")
        return generate_mesh_dataset(kind, path, n_samples, seed, overwrite=overwrite, chunk_size=chunk_size,
                                     workers=workers, progress=progress, callback=callback, **params)
    recipe = get_recipe(kind)
    p = recipe.make_params(params)
    resolution = recipe.native_resolution if resolution is None else resolution
    n_samples = quick_samples(n_samples) if isinstance(n_samples, (int, np.integer)) else n_samples
    recipe.validate(p, resolution)
    check_generation_args(n_samples, seed, workers, chunk_size)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)  # the one rule for outputs: parent folders are created
    check_output_dir(path)
    check_resources(recipe, resolution, n_samples, chunk_size, path.parent)
    # one writer per path: a second generation (with --overwrite or not) never touches this one's files
    with exclusive_lock(path, what="generated"):
        return _generate_locked(recipe, p, path, n_samples, resolution, seed, overwrite, chunk_size,
                                workers, progress, callback)


def _generate_locked(recipe, p, path: Path, n_samples: int, resolution: int, seed: int, overwrite: bool,
                     chunk_size: int | None, workers: int, progress: bool, callback) -> Path:
    kind = recipe.name
    tmp = partial_path(path)
    attrs = _attrs_for(recipe, p, resolution, seed, n_samples, chunk_size or 0)
    if path.exists() and not overwrite and _resumable(path, attrs)[0] and _complete(path):
        log.info(f"{path} already holds these {n_samples} samples; nothing to do")
        return path
    old_chunk = claim_partial(path, attrs, overwrite)
    if chunk_size is None:
        # same chunks as an interrupted run, so the file's chunk layout is the same too
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
        log.debug("%s: samples %d..%d of %d in chunks of %d%s", tmp, start, n_samples - 1, n_samples, chunk_size,
                  f" (resumed, {start} already written)" if start else "")
        bar = progress_bar(total=n_samples, initial=start, unit="sample", enabled=progress,
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
    replace_synced(tmp, path)
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
    cells: bool = False  # a cell-centred grid: coarsened by averaging blocks of cells (see sampling)
    _handle: Any = field(default=None, repr=False)

    def read(self, name: str, indices: np.ndarray, stride: int, block_bytes: int = 2**26) -> np.ndarray:
        """Samples ``indices`` (any order, repeats allowed) of field ``"x"``/``"y"``, strided by ``stride``
        along every grid axis: float32 ``(len(indices), *grid)``. Only the samples asked for are read, in
        increasing order (as HDF5 wants), a block of at most ``block_bytes`` of full-resolution samples
        at a time, strided in memory (faster than an HDF5 strided selection). NaN or inf is a ValueError
        naming the file, the field and the first bad sample."""
        ds = self.x if name == "x" else self.y
        indices = np.asarray(indices, dtype=np.int64)
        unique, inverse = np.unique(indices, return_inverse=True)
        channels = self.channel_shape(name)
        block = max(1, block_bytes // (4 * self.native_resolution**self.dim * int(np.prod(channels))))
        grid_sel = (slice(None, None, 1 if self.cells else stride),) * self.dim
        parts = []
        for lo in range(0, len(unique), block):
            rows = unique[lo : lo + block]
            # consecutive runs as slices: h5py's list selection is very slow
            runs = np.split(rows, np.flatnonzero(np.diff(rows) != 1) + 1)
            part = np.concatenate([self._rows(ds, int(r[0]), int(r[-1]) + 1, grid_sel) for r in runs])
            if self.cells:
                part = cell_average(part, stride, 1, self.dim)
            bad = ~np.isfinite(part).reshape(len(rows), -1).all(axis=1)
            if bad.any():
                raise ValueError(
                    f"{self.path}: field {name!r} contains NaN or inf in sample {int(rows[bad][0])} "
                    f"(an unfinished or corrupt file, or bad values in imported data); regenerate or fix it"
                )
            parts.append(part)
        shape = (0,) + (len(range(0, self.native_resolution, stride)),) * self.dim + channels
        data = np.concatenate(parts) if parts else np.zeros(shape, np.float32)
        return data[inverse]

    def channel_shape(self, name: str) -> tuple[int, ...]:
        """``(c,)`` for a field stored with a trailing channel axis (imported files), else ``()``."""
        ds = self.x if name == "x" else self.y
        return () if self.transposed or ds.ndim == 1 + self.dim else tuple(ds.shape[1 + self.dim:])

    def read_channels(self, name: str, indices: np.ndarray, stride: int) -> np.ndarray:
        """:meth:`read` with a channel axis always: float32 ``(len(indices), *grid, c)``."""
        data = self.read(name, indices, stride)
        return data if self.channel_shape(name) else data[..., None]

    def _rows(self, ds, lo: int, hi: int, grid_sel: tuple) -> np.ndarray:
        part = np.asarray(ds[..., lo:hi]).T if self.transposed else np.asarray(ds[lo:hi])
        return np.ascontiguousarray(part[(slice(None),) + grid_sel], dtype=np.float32)

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
        if attrs.get("format") == MESH_FORMAT:
            raise ValueError(f"{path} holds samples on meshes ({attrs.get('kind')}); open it with "
                             f"petrov.datasets.mesh.open_mesh_dataset")
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
            cells=attrs["grid"] == "cells",
            dim=int(attrs.get("dim", recipe.dim)),  # imported files: the dimension is per file
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
