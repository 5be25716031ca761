"""Atomic file writes: a reader never sees a half-written file, and a crash keeps the old one.

Every file petrov writes (checkpoints, configs, logs, metrics, figures, benchmark tables) goes
through :func:`atomic_path`: the writer fills a temporary file in the target's directory, which
is flushed to disk (``fsync``) and renamed over the target (``os.replace`` is atomic within one
file system); the directory entry is synced too, so the rename survives a power cut.  The file
gets the mode a plain ``open()`` would give (``0666 & ~umask``), not ``mkstemp``'s ``0600``.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence


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


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; if the block succeeds, it becomes ``path``.

    ``with atomic_path("best.pt") as tmp: torch.save(obj, tmp)``.  On an exception the temporary
    file is removed and ``path`` is untouched.  Missing parent folders are created (the one rule for
    every output path); an unwritable directory is a ``PermissionError`` naming it.
    """
    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except PermissionError:
        raise PermissionError(f"directory {str(directory)!r} is not writable (cannot write {path.name})") from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        replace_synced(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically; returns the path."""
    with atomic_path(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
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


class Locked(RuntimeError):
    """Another process is writing the same target (see :func:`exclusive_lock`)."""


@contextlib.contextmanager
def exclusive_lock(target: str | os.PathLike, what: str = "written") -> Iterator[None]:
    """Hold an exclusive lock on ``target`` for the block: writers of one path exclude each other.

    The lock is ``fcntl.flock`` on a small file ``.NAME.lock`` beside ``target`` (which may not exist
    yet), holding the owner's pid; the kernel releases it when the holder exits, even on kill -9, so
    a stale lock file never blocks.  A second writer gets :class:`Locked` at once, naming the pid.
    The holder removes the file when it is done; a writer that locked a file removed meanwhile
    (it checks the inode) tries again on the new one.  Where ``fcntl`` does not exist (Windows) no
    lock is taken.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    target = Path(target)
    lock = target.with_name(f".{target.name}.lock")
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            raise PermissionError(f"directory {str(lock.parent)!r} is not writable") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise Locked(
                f"{str(target)!r} is being {what} by another process (pid {holder}); wait for it to "
                "finish or stop it, then run this again"
            ) from None
        try:
            if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                break  # locked the file that is at the path
        except FileNotFoundError:
            pass
        os.close(fd)  # the previous holder removed it between our open and flock: again
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # while still holding it
        os.close(fd)  # releases the lock


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_writable(path: str | os.PathLike, what: str = "directory") -> None:
    """Raise ``PermissionError`` now if the directory ``path`` (or, if it does not exist yet, the
    nearest existing parent, where it would be created) cannot be written: before the work, not after."""
    path = Path(path)
    base = _existing_ancestor(path)
    if not base.is_dir():
        raise NotADirectoryError(f"{what} {str(path)!r} cannot be created: {str(base)!r} is a file, not a "
                                 f"directory; choose a writable directory")
    if not os.access(base, os.W_OK | os.X_OK):
        where = "" if base == path.absolute() else f" (it would be created in {str(base)!r})"
        raise PermissionError(f"{what} {str(path)!r} is not writable{where}; choose another location")


def ensure_dir(path: str | os.PathLike, what: str = "directory") -> Path:
    """Create the directory ``path`` (and parents) after :func:`check_writable`; returns it."""
    check_writable(path, what)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    return path
