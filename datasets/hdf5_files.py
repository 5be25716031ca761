"""HDF5 files with clear errors: opening for reading, writing with every write error raised, attributes as
plain Python values, small files made in memory, datasets whose disk space is claimed up front.

petrov's dataset files come in two formats, told apart by the ``format`` attribute: ``FORMAT`` (samples
on grids: ``petrov.datasets.grid_files``) and ``MESH_FORMAT`` (samples on triangle meshes:
``petrov.datasets.mesh.storage``).
"""
from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..common.disk_space import reporting_no_space
from ..common.files import unraisable_errors
from ..common.locks import lock_holder
from ..common.path_checks import require_file

FORMAT = "petrov-dataset"
MESH_FORMAT = "petrov-mesh-dataset"
PARTIAL_SUFFIX = ".partial"


def partial_path(path: str | os.PathLike) -> Path:
    """The temporary file a generation of ``path`` writes to (same directory, so the rename is atomic)."""
    path = Path(path)
    return path.with_name(path.name + PARTIAL_SUFFIX)


def plain(value: Any) -> Any:
    """h5py attribute values back to plain Python (bytes -> str, numpy scalars -> int/float)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def file_attrs(h5: h5py.File | h5py.Group) -> dict[str, Any]:
    """All attributes of an open file (or group) as plain Python values (JSON attributes stay strings)."""
    return {k: plain(v) for k, v in h5.attrs.items()}


def open_h5(path: str | os.PathLike, mode: str = "r") -> h5py.File:
    """Open an HDF5 file with clear errors for a missing (or unfinished: only ``FILE.partial`` there), a
    directory, one being written by another process, or an unreadable (corrupt, truncated, not HDF5) file."""
    path = Path(path)
    if not path.exists():
        tmp = partial_path(path)
        if not path.name.endswith(PARTIAL_SUFFIX) and tmp.is_file():
            raise FileNotFoundError(unfinished(path, tmp))
        raise FileNotFoundError(f"no such dataset file: {path}")
    require_file(path, "dataset file")
    try:
        return h5py.File(path, mode, rdcc_nbytes=16 * 2**20)
    except OSError as err:
        if "unable to lock file" in str(err):  # HDF5 locks a file while a writer has it open
            final = path.with_name(path.name[: -len(PARTIAL_SUFFIX)]) if path.name.endswith(PARTIAL_SUFFIX) else path
            pid = lock_holder(final)
            who = f" (pid {pid})" if pid and pid > 0 else ""
            raise ValueError(f"{path} is being written by another process{who}, e.g. a generation still "
                             f"running; wait for it to finish (`petrov info` shows it then)") from None
        if not h5py.is_hdf5(path):
            raise ValueError(f"{path} is not a readable HDF5 file: it is no HDF5 file at all (petrov datasets "
                             f"are written by `petrov generate` or `petrov import`)") from None
        raise ValueError(f"{path} is not a readable HDF5 file (corrupt or truncated?): {err}") from None


def unfinished(path: Path, tmp: Path) -> str:
    """Why ``path`` is not there while its partial file ``tmp`` is: a write still running, or one that
    stopped, with how many samples ``tmp`` holds and how to finish it (its attributes say whether it is a
    shard's)."""
    pid = lock_holder(path)
    if pid:
        who = f" (pid {pid})" if pid > 0 else ""
        return (f"{path} is not finished yet: another process{who} is writing it into {tmp}; wait for it to "
                f"finish")
    try:
        with h5py.File(tmp, "r") as h5:
            attrs = file_attrs(h5)
        held = f" holds {int(attrs['n_complete'])} of its {int(attrs['n_samples'])} samples"
    except Exception:  # damaged or not a dataset: the message names the file all the same
        attrs, held = {}, " holds an interrupted write"
    if "shard_start" in attrs:
        part = (f"--shard {attrs['shard']}" if attrs.get("shard")
                else f"--indices {attrs['shard_start']}:{attrs.get('shard_stop', '')}")
        how = f"rerun its `petrov generate ... {part}` command with the same arguments (generate_dataset in Python)"
    else:
        how = ("rerun the `petrov generate` (or `petrov merge`) command that wrote it with the same arguments "
               "(generate_dataset or merge_shards in Python)")
    return f"{path} is unfinished: {tmp}{held}; {how} to finish it: it resumes from there"


def file_format(h5: h5py.File) -> str | None:
    """The ``format`` attribute of an open file (``FORMAT``, ``MESH_FORMAT``, or None for another file)."""
    fmt = h5.attrs.get("format")
    return fmt.decode() if isinstance(fmt, bytes) else fmt


@contextlib.contextmanager
def writing_h5(path: str | os.PathLike, mode: str = "w", needed: int | None = None, shown: Any = None,
               **options: Any):
    """An HDF5 file open for writing whose every write error is raised, closed when the block ends.

    h5py reports a failed write (a full disk) only when it frees the object that buffered it, as a
    printed "Exception ignored"; here such errors are raised when the block ends (``unraisable_errors``)
    and a full disk is a ``NoSpace`` naming ``path``. Keep the datasets written in a loop in
    variables and call ``flush()`` where a write must be on disk (it raises too). ``shown``: the path
    to name in errors (the final name of a temporary file; pass ``locking=False`` for one from
    ``petrov.common.files.atomic_path``, whose lock HDF5's own would clash with). Without a chunk
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


def h5_image(arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> bytes:
    """The bytes of a small HDF5 file holding ``arrays`` and ``attrs``, made in memory (write them with
    ``petrov.common.files.atomic_write``: a full disk is then an ordinary, reported write error)."""
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


__all__ = ["FORMAT", "MESH_FORMAT", "claimed_now", "file_attrs", "file_format", "h5_image", "open_h5",
           "partial_path", "plain", "unfinished", "writing_h5"]
