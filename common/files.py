"""The one write path: a reader never sees a half-written file, a failure keeps the old one and says why.

Every file petrov writes (checkpoints, configs, logs, metrics, figures, HDF5 files, benchmark tables)
goes through [`atomic_path`][]:

1. the writer fills a temporary file ``.NAME.petrov-XXXXXXXX.tmp`` in the target's directory, holding
   an ``flock`` on it while it writes;
2. every error is raised there, a full disk (``ENOSPC``, a quota, the file-size limit) as
   [`NoSpace`][petrov.common.disk_space.NoSpace] saying what was needed and what is free; HDF5 errors
   that h5py reports only when it frees an object are caught by [`unraisable_errors`][] and raised too;
3. the file is flushed to disk (``fsync``), given the mode a plain ``open()`` would give
   (``0666 & ~umask``, not ``mkstemp``'s ``0600``) and renamed over the target (``os.replace`` is
   atomic within one file system); the directory entry is synced too, so the rename survives a power cut
   ([`replace_synced`][], also the last step of the dataset files written in place).

On any failure the temporary file is removed and the target is untouched.  A writer killed outright
(kill -9, power cut) leaves its temporary file behind; the next write into that directory removes it
(its lock is free).  [`atomic_write`][] writes bytes or text this way; [`write_json`][],
[`write_csv`][] the two text formats.  Locks between writers are in [`petrov.common.locks`][], the
checks made before the work in [`petrov.common.path_checks`][].
"""
from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import logging
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .disk_space import as_no_space, existing_ancestor, reporting_no_space, shown_ancestor
from .os_errors import unwritable_reason

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locks, no sweeping of temporary files
    fcntl = None

log = logging.getLogger(__name__)

TEMP_INFIX = ".petrov-"
_TEMP_NAME = re.compile(r"^\..+\.petrov-[a-z0-9_]{8}\.tmp$")


@contextlib.contextmanager
def unraisable_errors() -> Iterator[None]:
    """Raise, when the block ends, the first error Python could only print while the block ran.

    An error in a destructor cannot be raised where it happens; Python prints "Exception ignored in
    ..." and goes on.  h5py reports a failed HDF5 write that way when it frees the dataset object
    that buffered it, so a full disk would otherwise go unnoticed and a broken file be renamed into
    place.  Inside the block such errors are collected (not printed) and the first is raised at the
    end; if the block raises, its own exception wins.
    """
    caught: list[BaseException] = []
    previous = sys.unraisablehook, sys.excepthook
    sys.unraisablehook = lambda u: caught.append(u.exc_value) if u.exc_value is not None else None
    # Cython (h5py) prints the full traceback of such an error through sys.excepthook first
    sys.excepthook = lambda kind, value, tb: caught.append(value)
    try:
        yield
    finally:
        sys.unraisablehook, sys.excepthook = previous
    if caught:
        raise caught[0]


# --- temporary files ------------------------------------------------------------------------------

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_file(path: str | os.PathLike) -> None:
    """Flush ``path``'s data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush the directory entry list of ``path`` (where the platform allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_synced(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """fsync ``tmp``, rename it to ``path`` and sync the directory: the last step of every atomic write."""
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


def remove_stale_temps(directory: str | os.PathLike) -> list[Path]:
    """Remove the temporary files of writers that died in ``directory`` (their lock is free); returns them.

    A live writer holds an ``flock`` on its temporary file, so it is never touched; only names petrov
    gives its temporary files (``.NAME.petrov-XXXXXXXX.tmp``) are looked at.
    """
    if fcntl is None:
        return []
    directory = Path(directory)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        if not _TEMP_NAME.match(name):
            continue
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its writer is alive
            with contextlib.suppress(OSError):
                if os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False)):
                    os.unlink(path)  # while holding the lock: a new writer cannot have taken it
                    removed.append(path)
        finally:
            os.close(fd)
    if removed:
        log.debug("removed temporary files left by interrupted writers: %s", ", ".join(p.name for p in removed))
    return removed


def _locked_temp(directory: Path, name: str) -> tuple[int, Path]:
    """A new temporary file for ``name`` in ``directory``, locked by the returned descriptor."""
    while True:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name}{TEMP_INFIX}", suffix=".tmp", dir=directory)
        except OSError as err:
            if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                folder = shown_ancestor(directory, existing_ancestor(directory))
                raise PermissionError(f"cannot write {directory / name}: {unwritable_reason(err, folder)}; "
                                      f"choose a writable location") from None
            raise as_no_space(err, directory / name) or err from None
        if fcntl is None:
            return fd, Path(tmp)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            return fd, Path(tmp)
        os.close(fd)  # a sweeper removed it between its creation and our lock: again


@contextlib.contextmanager
def _naming(path: Path, tmp: Path) -> Iterator[None]:
    """An operating-system error of the block that names no file (``os.fsync(fd)``) or the temporary one
    names ``path``, the file the user asked for."""
    try:
        yield
    except OSError as err:
        if err.strerror is not None and (err.filename is None or Path(os.fsdecode(err.filename)) == tmp):
            err.filename, err.filename2 = str(path), None
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, needed: int | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; if the block succeeds, it becomes ``path``.

    ``with atomic_path("best.pt") as tmp: write(tmp)``.  On an exception the temporary file is
    removed and ``path`` is untouched; a full disk is a [`NoSpace`][petrov.common.disk_space.NoSpace]
    naming ``path`` and, when ``needed`` (bytes) is given, how much it needs; any other operating-system
    error names ``path`` too (not the temporary file).  Missing parent folders are created (the one rule
    for every output path); a file where a folder must be is a ``NotADirectoryError``, an unwritable
    folder a ``PermissionError``, an existing directory at ``path`` an ``IsADirectoryError``.
    Temporary files of dead writers in the directory are removed first.
    """
    path = Path(path)
    directory = path.parent
    if not directory.is_dir():
        blocker = existing_ancestor(directory)
        if not blocker.is_dir():
            raise NotADirectoryError(f"cannot write {path}: {str(shown_ancestor(path, blocker))!r} is a file, not a "
                                     f"folder; choose another location")
        with reporting_no_space(path):
            directory.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise IsADirectoryError(f"cannot write the file {path}: it is a directory; choose a file name")
    remove_stale_temps(directory)
    fd, tmp = _locked_temp(directory, path.name)
    try:
        with reporting_no_space(path, needed), _naming(path, tmp):
            yield tmp
            os.chmod(tmp, 0o666 & ~_umask())
            replace_synced(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        os.close(fd)  # after the unlink: a sweeper never sees the file unlocked


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically; returns the path."""
    data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_path(path, needed=len(data)) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """``obj`` as indented JSON (one trailing newline), written atomically."""
    return atomic_write(path, json.dumps(obj, indent=2) + "\n")


def write_csv(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]], fields: Sequence[str]) -> Path:
    """``rows`` as CSV under the header ``fields`` (keys outside it are left out; floats are written
    with ``repr``, so they read back exactly), written atomically."""
    sink = io.StringIO()
    writer = csv.DictWriter(sink, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write(path, sink.getvalue())


def serialized(write: Any) -> bytes:
    """The bytes ``write(buffer)`` puts into an in-memory buffer (``torch.save``, ``savefig``): a
    writer that cannot report a full disk itself fills memory, and [`atomic_write`][] the file."""
    buffer = io.BytesIO()
    write(buffer)
    return buffer.getvalue()


__all__ = ["TEMP_INFIX", "atomic_path", "atomic_write", "fsync_dir", "fsync_file", "remove_stale_temps",
           "replace_synced", "serialized", "unraisable_errors", "write_csv", "write_json"]
