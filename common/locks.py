"""Locks between processes: one writer per target, one read-modify-write of a folder's manifest at a time.

Both are ``fcntl.flock`` locks, which the kernel releases when their holder exits (even on kill -9), so a
lock left behind never blocks.  [`exclusive_lock`][] refuses a second writer of one target at once
([`Locked`][], naming the holder's pid; [`lock_holder`][] asks who holds it); [`folder_lock`][] waits its
turn (a short read-modify-write).  Where ``fcntl`` does not exist (Windows) no lock is taken.
"""
from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator

from .disk_space import existing_ancestor, shown_ancestor
from .os_errors import unwritable_reason

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locks
    fcntl = None


class Locked(RuntimeError):
    """Another process is writing the same target (see [`exclusive_lock`][])."""


def _lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def exclusive_lock(target: str | os.PathLike, what: str = "written") -> Iterator[None]:
    """Hold an exclusive lock on ``target`` for the block: writers of one path exclude each other.

    The lock is ``fcntl.flock`` on a small file ``.NAME.lock`` beside ``target`` (which may not exist
    yet), holding the owner's pid where the disk has room for it (a full disk still locks, without the pid).
    A second writer gets [`Locked`][] at once, naming the pid.  The holder removes the file when it is done;
    a writer that locked a file removed meanwhile (it checks the inode) tries again on the new one.
    A folder where the lock file cannot be made is a ``PermissionError`` saying why.
    """
    if fcntl is None:  # pragma: no cover - not POSIX
        yield
        return
    target = Path(target)
    lock = _lock_path(target)
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            folder = shown_ancestor(lock.parent, existing_ancestor(lock.parent))
            raise PermissionError(f"cannot write {target}: {unwritable_reason(err, folder)}; choose a writable "
                                  f"location") from None
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
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError as err:  # a full disk: the lock holds, its holder's pid goes unsaid
            if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # while still holding it
        os.close(fd)  # releases the lock


def lock_holder(target: str | os.PathLike) -> int | None:
    """The pid holding [`exclusive_lock`][] on ``target`` now, None if nobody holds it."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(_lock_path(Path(target)), os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        text = os.read(fd, 32).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)


@contextlib.contextmanager
def folder_lock(directory: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on the existing folder ``directory`` itself for the block, waiting for it if
    another process holds it (no lock file is left behind): one read-modify-write of a file in it at a time."""
    if fcntl is None:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


__all__ = ["Locked", "exclusive_lock", "folder_lock", "lock_holder"]
