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
samples are written and the file is closed without error. Rerunning an interrupted generation with the
same parameters resumes from ``n_complete``; because sample ``i`` depends only on ``(seed, i)`` the result
equals an uninterrupted run. A failed write (a full disk: [`NoSpace`][]) stops the
generation with the partial file kept for the rerun. Complete files carry ``content_hash`` (see
``identity``): a run records it to test on the data it trained on.
"""
from __future__ import annotations

import contextlib
import datetime
import io
import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

from ..common.config import asdict
from ..common.files import (
    NoSpace,
    exclusive_lock,
    format_size,
    free_space,
    lock_holder,
    replace_synced,
    reporting_no_space,
    require_file,
    require_space,
    unraisable_errors,
)
from ..common.interrupts import raise_if_interrupted
from ..common.outputs import check_outputs
from ..common.progress import progress_bar
from ..common.version import petrov_version
from .content_hash import ContentHash
from .darcy import darcy_worker_pool, stop_workers
from .recipes import RECIPES, Recipe, get_recipe
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
                    directory: Path, params=None, already_written: int = 0) -> None:
    """Refuse a generation that cannot fit: memory for one chunk (ValueError), disk for the rest of the
    file ([`NoSpace`][]; ``already_written``: bytes of the partial file being resumed)."""
    params = recipe.params_cls() if params is None else params
    points = math.prod(recipe.grid(resolution))
    chunk = chunk_size or default_chunk_size(points)
    # a chunk's x and y in float64, plus one solve's working set (sparse matrix and its factor or
    # multigrid hierarchy, FFT buffers): a generous 2 kB per grid point
    need = points * (16 * chunk + 2048)
    have = _available_memory()
    if have is not None and need > have:
        raise ValueError(
            f"{recipe.name} at resolution {resolution} ({points:,} grid points per sample) needs about "
            f"{format_size(need)} of memory, {format_size(have)} are available; choose a lower "
            f"--resolution (native {recipe.native_resolution}) or a smaller --chunk-size"
        )
    check_disk(file_bytes(recipe, params, resolution, n_samples) - already_written, directory,
               "free some space, or generate fewer samples or a lower resolution")


def check_disk(need: int, directory: Path, advice: str) -> None:
    """[`NoSpace`][] if ``directory`` has fewer than ``need`` bytes free (``advice``: what to do then)."""
    free = free_space(directory)
    if free is not None and need > free:
        raise NoSpace(f"disk full: the dataset needs about {format_size(need)} more on disk, {directory} has "
                      f"{format_size(free)} free; {advice}")


def file_bytes(recipe: Recipe, params, resolution: int, n_samples: int) -> int:
    """About how large the file of ``n_samples`` samples is: float32 x and y, one HDF5 chunk per sample
    and field (about 100 bytes of index each), a few kB of header."""
    values = sum(math.prod(recipe.sample_shape(name, params, resolution)) for name in ("x", "y"))
    return n_samples * (4 * values + 2 * 128) + 2**16


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
    """Open an HDF5 file with clear errors for a missing, a directory, one being written by another
    process, or an unreadable (corrupt, truncated, not HDF5) file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such dataset file: {path}")
    require_file(path, "dataset file")
    try:
        return h5py.File(path, mode, rdcc_nbytes=16 * 2**20)
    except OSError as err:
        if "unable to lock file" in str(err):  # HDF5 locks a file while a writer has it open
            final = path.with_name(path.name[: -len(".partial")]) if path.name.endswith(".partial") else path
            pid = lock_holder(final)
            who = f" (pid {pid})" if pid and pid > 0 else ""
            raise ValueError(f"{path} is being written by another process{who}, e.g. a generation still "
                             f"running; wait for it to finish (`petrov info` shows it then)") from None
        if not h5py.is_hdf5(path):
            raise ValueError(f"{path} is not a readable HDF5 file: it is no HDF5 file at all (petrov datasets "
                             f"are written by `petrov generate` or `petrov import`)") from None
        raise ValueError(f"{path} is not a readable HDF5 file (corrupt or truncated?): {err}") from None


@contextlib.contextmanager
def writing_h5(path: str | os.PathLike, mode: str = "w", needed: int | None = None, shown: Any = None,
               **options: Any):
    """An HDF5 file open for writing whose every write error is raised, closed when the block ends.

    h5py reports a failed write (a full disk) only when it frees the object that buffered it, as a
    printed "Exception ignored"; here such errors are raised when the block ends ([`unraisable_errors`][])
    and a full disk is a [`NoSpace`][] naming ``path``. Keep the datasets written in a loop in
    variables and call ``flush()`` where a write must be on disk (it raises too). ``shown``: the path
    to name in errors (the final name of a temporary file; pass ``locking=False`` for one from
    [`atomic_path`][petrov.common.files.atomic_path], whose lock HDF5's own would clash with). Without a chunk
    cache (``rdcc_nbytes=0``, the default here) a failed write raises where it happens; with one, HDF5
    can be left in a state that crashes the interpreter at exit."""
    options.setdefault("rdcc_nbytes", 0)
    with reporting_no_space(shown or path, needed), unraisable_errors():
        h5 = h5py.File(path, mode, **options)
        try:
            yield h5
            h5.flush()
        except BaseException:
            with contextlib.suppress(Exception):  # HDF5 fails again closing it: the first error tells why
                h5.close()
            raise
        h5.close()


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


def h5_image(arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> bytes:
    """The bytes of a small HDF5 file holding ``arrays`` and ``attrs``, made in memory (write them with
    [`atomic_write`][petrov.common.files.atomic_write]: a full disk is then an ordinary, reported write error)."""
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        for key, value in arrays.items():
            h5.create_dataset(key, data=value)
        h5.attrs.update(attrs)
    return buffer.getvalue()


def claimed_now() -> h5py.h5p.PropDCID:
    """Dataset creation properties that allocate (and fill) all of a dataset's chunks when it is
    created: the disk space is claimed up front, so a disk filling up later cannot fail a write."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    return dcpl


def _create_partial(tmp: Path, recipe: Recipe, params, attrs: dict, resolution: int, n_samples: int) -> None:
    needed = file_bytes(recipe, params, resolution, n_samples)
    require_space(tmp, needed)  # HDF5 is left in a state that can crash the interpreter by a full disk
    try:
        with writing_h5(tmp, "w", needed) as h5:
            for name in ("x", "y"):
                sample = recipe.sample_shape(name, params, resolution)
                h5.create_dataset(name, shape=(n_samples, *sample), dtype="float32", chunks=(1, *sample),
                                  fillvalue=np.nan, dcpl=claimed_now())
            h5.attrs.update(attrs)
            # fixed sizes, all made now: later they are rewritten in place, never needing new space
            h5.attrs["n_complete"] = np.int64(0)
            h5.attrs["hash_chain"] = np.bytes_(ContentHash().state)
            h5.attrs["content_hash"] = np.bytes_(ContentHash.BLANK)
    except BaseException:
        tmp.unlink(missing_ok=True)  # nothing written yet: no partial file to keep
        raise


def _resumable(tmp: Path, attrs: dict, identity: tuple[str, ...] = _IDENTITY) -> tuple[bool, str, int | None]:
    """Whether ``tmp`` is an interrupted run of the same generation (the ``identity`` attributes agree),
    if not why, and its chunk size."""
    try:
        with open_h5(tmp) as h5:
            old = file_attrs(h5)
    except ValueError as err:
        return False, f"it cannot be read: {err}", None
    diff = [f"{k}: {old.get(k)!r} there vs {attrs[k]!r} now" for k in identity if old.get(k) != attrs[k]]
    chunk = old.get("chunk_size")
    return (not diff), "; ".join(diff), (int(chunk) if chunk else None)


def already_generated(path: Path, attrs: dict, identity: tuple[str, ...] = _IDENTITY) -> bool:
    """Whether ``path`` is a complete file of the same generation (rerunning it is a no-op)."""
    if not path.is_file() or not _resumable(path, attrs, identity)[0]:
        return False
    with open_h5(path) as h5:
        done = file_attrs(h5)
    return int(done.get("n_complete", -1)) >= int(done.get("n_samples", 0))


def claim_partial(path: Path, attrs: dict, overwrite: bool, identity: tuple[str, ...] = _IDENTITY) -> int | None:
    """Prepare ``path.partial`` for a generation with ``attrs`` (call it holding the path's lock).

    An existing ``path`` is a FileExistsError unless ``overwrite``. A partial file of the same generation
    (same ``identity`` attributes) is kept to be resumed, and its chunk size returned; one of another
    generation (or one that cannot be read) is a ValueError, or is deleted with ``overwrite``. Returns
    None when nothing is resumed or the partial file recorded no chunk size.
    """
    tmp = partial_path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it")
    if not tmp.exists():
        return None
    ok, why, old_chunk = _resumable(tmp, attrs, identity)
    if not ok and not overwrite:
        unreadable = why.startswith("it cannot be read")
        what = "cannot be resumed" if unreadable else "holds an interrupted generation with different settings"
        raise ValueError(f"{tmp} {what} ({why}); delete it, or pass overwrite=True (--overwrite) to discard it"
                         + ("" if unreadable else ", or rerun with the same settings to resume"))
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
    """Create the directory of ``path`` (the one rule for outputs: parent folders are created); a
    PermissionError unless it is writable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(path.parent, os.W_OK):
        raise PermissionError(f"output directory {path.parent} is not writable; choose another -o")


def generate_grid_dataset(
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
    """Generate ``n_samples`` samples of the grid kind ``kind`` at native ``resolution`` into ``path``
    (the grid half of [`petrov.datasets.generate_dataset`][], whose docstring holds the rules; quick
    mode is applied there, once for both halves)."""
    recipe = get_recipe(kind)
    p = recipe.make_params(params)
    resolution = recipe.native_resolution if resolution is None else resolution
    recipe.validate(p, resolution)
    check_generation_args(n_samples, seed, workers, chunk_size)

    path = Path(path)
    check_output_dir(path)
    attrs = _attrs_for(recipe, p, resolution, seed, n_samples, chunk_size or 0)
    if not overwrite and already_generated(path, attrs):
        log.info(f"{path} already holds these {n_samples} samples; nothing to do")
        return path
    check_outputs(path.parent, "generate", [path.name], overwrite=overwrite, scope="file", flag="-o")
    tmp = partial_path(path)
    check_resources(recipe, resolution, n_samples, chunk_size, path.parent, p,
                    already_written=tmp.stat().st_size if tmp.is_file() else 0)
    # one writer per path: a second generation (with --overwrite or not) never touches this one's files
    with exclusive_lock(path, what="generated"):
        check_outputs(path.parent, "generate", [path.name], overwrite=overwrite, scope="file", flag="-o")
        return _generate_locked(recipe, p, path, attrs, n_samples, resolution, seed, overwrite, chunk_size,
                                workers, progress, callback)


def _generate_locked(recipe, p, path: Path, attrs: dict, n_samples: int, resolution: int, seed: int,
                     overwrite: bool, chunk_size: int | None, workers: int, progress: bool, callback) -> Path:
    tmp = partial_path(path)
    old_chunk = claim_partial(path, attrs, overwrite)
    if chunk_size is None:
        # same chunks as the interrupted run, so the file's chunk layout is the same too
        chunk_size = old_chunk
    if chunk_size is None:
        chunk_size = default_chunk_size(int(np.prod(recipe.grid(resolution))))
    attrs["chunk_size"] = int(chunk_size)
    if not tmp.exists():
        _create_partial(tmp, recipe, p, attrs, resolution, n_samples)
    try:
        _fill_partial(recipe, p, tmp, n_samples, resolution, seed, chunk_size, workers, progress, callback)
    except NoSpace as err:
        raise NoSpace(f"{err}; the samples written so far are kept in {tmp}: the same command resumes "
                      f"from there") from None
    with reporting_no_space(path):
        replace_synced(tmp, path)
    return path


def _fill_partial(recipe, p, tmp: Path, n_samples: int, resolution: int, seed: int, chunk_size: int,
                  workers: int, progress: bool, callback) -> None:
    """Produce and write the samples from the partial file's ``n_complete`` on; each chunk's data are
    flushed (errors raised) before the counter and the content hash that claim them."""
    kind = recipe.name
    per_sample = file_bytes(recipe, p, resolution, 1)
    with contextlib.ExitStack() as stack:
        h5 = stack.enter_context(writing_h5(tmp, "r+"))
        # one pool for the whole run: starting spawn workers costs seconds, not to be paid per chunk
        pool = stack.enter_context(darcy_worker_pool(workers)) if workers and recipe.uses_workers else 0
        if pool:
            stack.push(lambda failed, *_: stop_workers(pool) if failed else None)  # on an error: stop at once
        start = int(h5.attrs["n_complete"])
        chain = h5.attrs.get("hash_chain")
        digest = ContentHash(_plain(chain)) if chain is not None or start == 0 else None  # None: 0.1 partial
        log.debug("%s: samples %d..%d of %d in chunks of %d%s", tmp, start, n_samples - 1, n_samples, chunk_size,
                  f" (resumed, {start} already written)" if start else "")
        fields = {"x": h5["x"], "y": h5["y"]}  # held: their write errors surface at flush(), not when freed
        stack.callback(fields.clear)  # freed before the file closes, even when an error keeps this frame
        bar = progress_bar(total=n_samples, initial=start, unit="sample", enabled=progress,
                           desc=f"{kind} n={resolution}")
        with bar:
            for lo in range(start, n_samples, chunk_size):
                raise_if_interrupted()
                hi = min(lo + chunk_size, n_samples)
                x, y = recipe.produce(p, resolution, seed, np.arange(lo, hi), pool)
                arrays = {}
                for name, arr in (("x", x), ("y", y)):
                    arr = np.asarray(arr)
                    expected = (hi - lo, *recipe.sample_shape(name, p, resolution))
                    if arr.shape != expected:
                        raise RuntimeError(f"{kind} recipe returned {name} of shape {arr.shape}, expected {expected}")
                    if not np.isfinite(arr).all():
                        raise RuntimeError(f"{kind}: non-finite values in {name} for samples {lo}..{hi - 1}")
                    arrays[name] = arr.astype(np.float32)
                with reporting_no_space(tmp, (n_samples - lo) * per_sample):
                    for name, arr in arrays.items():
                        fields[name][lo:hi] = arr
                    h5.flush()  # the data reach the file before the counter that claims them
                    if digest is not None:
                        digest.update(arrays["x"], arrays["y"])
                        h5.attrs.modify("hash_chain", np.bytes_(digest.state))
                    h5.attrs.modify("n_complete", np.int64(hi))
                    h5.flush()
                bar.update(hi - lo)
                if callback is not None:
                    callback(hi, n_samples)
        with reporting_no_space(tmp):
            if digest is not None:
                h5.attrs.modify("content_hash", np.bytes_(digest.value))
            if "hash_chain" in h5.attrs:
                del h5.attrs["hash_chain"]  # the chain's state; the file is complete


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
        """[`read`][] with a channel axis always: float32 ``(len(indices), *grid, c)``."""
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


def _attribute_error(path: Path, name: str, value: Any, why: str) -> ValueError:
    return ValueError(f"{path}: attribute {name} = {value!r} {why}; the file's attributes were edited or the "
                      f"file is damaged: restore the attribute or regenerate the file")


def stored_layout(path: Path, attrs: dict[str, Any], x_shape: tuple, y_shape: tuple) -> dict[str, Any]:
    """kind, grid, dimension and sample counts from a file's attributes, checked against the stored
    arrays (ValueError naming the attribute that does not fit)."""
    for name in ("kind", "native_resolution", "grid", "n_samples", "n_complete"):
        if name not in attrs:
            raise ValueError(f"{path}: attribute {name!r} is missing; the file is damaged or was not written "
                             f"by petrov: regenerate it")
    if attrs["kind"] not in RECIPES:
        raise _attribute_error(path, "kind", attrs["kind"], f"is not a dataset kind ({', '.join(RECIPES.names())})")
    recipe = get_recipe(attrs["kind"])
    if attrs["grid"] not in ("periodic", "nodes", "cells"):
        raise _attribute_error(path, "grid", attrs["grid"], "is not 'periodic', 'nodes' or 'cells'")
    numbers = {}
    for name in ("native_resolution", "n_samples", "n_complete", "dim"):
        value = attrs.get(name, recipe.dim)  # imported files: the dimension is per file
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _attribute_error(path, name, value, "is not a whole number >= 0")
        numbers[name] = value
    dim, res, n = numbers["dim"], numbers["native_resolution"], numbers["n_samples"]
    for field_name, shape in (("x", tuple(x_shape)), ("y", tuple(y_shape))):
        if shape[:1] != (n,):
            raise _attribute_error(path, "n_samples", n, f"does not match the stored {field_name} of shape {shape}")
        if dim not in (1, 2) or shape[1 : 1 + dim] != (res,) * dim:
            name, value = ("dim", dim) if dim not in (1, 2) or len(shape) < 1 + dim else ("native_resolution", res)
            raise _attribute_error(path, name, value, f"does not match the stored {field_name} of shape {shape}")
    if numbers["n_complete"] > n:
        raise _attribute_error(path, "n_complete", numbers["n_complete"], f"is more than n_samples = {n}")
    return {"kind": attrs["kind"], "native_resolution": res, "periodic": attrs["grid"] == "periodic",
            "cells": attrs["grid"] == "cells", "dim": dim, "n_samples": n, "n_complete": numbers["n_complete"]}


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
        layout = stored_layout(path, attrs, h5["x"].shape, h5["y"].shape)
        return StoredData(path=path, attrs=attrs, x=h5["x"], y=h5["y"], _handle=h5, **layout)
    except BaseException:
        h5.close()
        raise
