"""The one write path: a reader never sees a half-written file, a failure keeps the old one and says why.

Every file petrov writes (checkpoints, configs, logs, metrics, figures, HDF5 files, benchmark tables)
goes through [`atomic_path`][]:

1. the writer fills a temporary file ``.NAME.petrov-XXXXXXXX.tmp`` in the target's directory, holding
   an ``flock`` on it while it writes;
2. every error is raised there, a full disk (``ENOSPC``, a quota, the file-size limit) as
   [`NoSpace`][] saying what was needed and what is free; HDF5 errors that h5py reports only when
   it frees an object are caught by [`unraisable_errors`][] and raised too;
3. the file is flushed to disk (``fsync``), given the mode a plain ``open()`` would give
   (``0666 & ~umask``, not ``mkstemp``'s ``0600``) and renamed over the target (``os.replace`` is
   atomic within one file system); the directory entry is synced too, so the rename survives a power cut.

On any failure the temporary file is removed and the target is untouched.  A writer killed outright
(kill -9, power cut) leaves its temporary file behind; the next write into that directory removes it
(its lock is free).  [`atomic_write`][] writes bytes or text this way; [`write_json`][],
[`write_csv`][] the two text formats.  [`exclusive_lock`][] keeps two writers of one target apart;
[`check_writable`][], [`ensure_dir`][], [`require_file`][] and [`require_dir`][] check paths
before the work, with messages that say what is wrong.
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
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locks, no sweeping of temporary files
    fcntl = None

log = logging.getLogger(__name__)

TEMP_INFIX = ".petrov-"
_TEMP_NAME = re.compile(r"^\..+\.petrov-[a-z0-9_]{8}\.tmp$")
# temporary files of petrov 0.1 (no lock held while writing): removed once they are this old
_OLD_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
_OLD_TEMP_AGE = 600.0
SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_WRITE_ERRORS = (OSError, RuntimeError, ValueError)  # what a failed write can come as (h5py: all three)


# --- a full disk ----------------------------------------------------------------------------------

class NoSpace(OSError):
    """A write failed for want of space: the disk, a quota, or the file-size limit (``ulimit -f``).

    The message says which file, how much was needed (when known) and how much is free."""


def format_size(n_bytes: float) -> str:
    """``1_500_000`` -> ``"1.5 MB"`` (decimal units; bytes below 1 kB)."""
    if abs(n_bytes) < 1000:
        return f"{int(n_bytes)} bytes"
    for unit in ("kB", "MB", "GB", "TB"):
        n_bytes /= 1000.0
        if abs(n_bytes) < 1000 or unit == "TB":
            return f"{n_bytes:.3g} {unit}" if n_bytes < 100 else f"{n_bytes:.0f} {unit}"
    raise AssertionError("unreachable")


def free_space(path: str | os.PathLike) -> int | None:
    """Bytes free for this user on the file system holding ``path`` (or its nearest existing parent)."""
    try:
        return shutil.disk_usage(existing_ancestor(Path(path))).free
    except OSError:
        return None


def no_space_message(path: str | os.PathLike, needed: int | None = None, code: int = errno.ENOSPC) -> str:
    """What [`NoSpace`][] says: the cause, the file, needed and free bytes, what to do."""
    path = Path(path)
    if code == errno.EFBIG:
        return (f"file size limit reached writing {path} (the shell's `ulimit -f`); raise the limit or "
                f"write smaller files, then run the command again")
    cause = "disk quota exceeded" if code == errno.EDQUOT else "disk full"
    free = free_space(path.parent)
    sizes = [f"{format_size(needed)} needed" if needed else None,
             f"{format_size(free)} free in {path.parent}" if free is not None else None]
    sizes = ", ".join(s for s in sizes if s)
    return (f"{cause}: cannot write {path}{f' ({sizes})' if sizes else ''}; free some space or choose "
            f"another location, then run the command again")


def _errno(err: BaseException) -> int | None:
    if isinstance(err, OSError) and err.errno is not None:
        return err.errno
    # h5py reports a failed HDF5 write as a RuntimeError or ValueError whose text holds the errno
    # ("... file write failed: ..., errno = 28, error message = 'No space left on device' ...")
    found = re.search(r"\berrno = (\d+)", str(err)) if isinstance(err, _WRITE_ERRORS) else None
    return int(found.group(1)) if found else None


def as_no_space(err: BaseException, path: str | os.PathLike, needed: int | None = None) -> NoSpace | None:
    """``err`` as a [`NoSpace`][] if it is a full disk, quota or file-size limit, else None."""
    if isinstance(err, NoSpace):
        return err
    code = _errno(err)
    if code in SPACE_ERRNOS:
        full = NoSpace(no_space_message(path, needed, code))
        full.errno = code
        return full
    return None


def require_space(path: str | os.PathLike, needed: int) -> None:
    """[`NoSpace`][] now if the file system of ``path`` has less than ``needed`` bytes free: for
    writers that must not meet a full disk half-way (HDF5 cannot be relied on to recover from one);
    [`Unwritable`][] if nothing can be written there at all (a virtual or read-only file system)."""
    free = free_space(Path(path).parent)
    if free is not None and needed > free:
        reason = probe_writable(existing_ancestor(Path(path).parent))
        if reason is not None:
            raise Unwritable(f"cannot write {path}: {reason}; choose a writable location")
        raise NoSpace(no_space_message(path, needed))


@contextlib.contextmanager
def reporting_no_space(path: str | os.PathLike, needed: int | None = None) -> Iterator[None]:
    """Turn a full disk inside the block into [`NoSpace`][] naming ``path`` (other errors pass)."""
    try:
        yield
    except _WRITE_ERRORS as err:
        full = as_no_space(err, path, needed)
        if full is None or full is err:
            raise
        raise full from None


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

    A live writer holds an ``flock`` on its temporary file, so it is never touched.  Temporary files
    of petrov 0.1 (written without a lock) are removed once they are ten minutes old.
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
        old = not _TEMP_NAME.match(name)
        if old and not _OLD_TEMP_NAME.match(name):
            continue
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            if old and time.time() - os.fstat(fd).st_mtime < _OLD_TEMP_AGE:
                continue
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
        except PermissionError:
            raise PermissionError(f"directory {str(directory)!r} is not writable (cannot write {name})") from None
        except OSError as err:
            raise as_no_space(err, directory / name) or err from None
        if fcntl is None:
            return fd, Path(tmp)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            return fd, Path(tmp)
        os.close(fd)  # a sweeper removed it between its creation and our lock: again


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, needed: int | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; if the block succeeds, it becomes ``path``.

    ``with atomic_path("best.pt") as tmp: write(tmp)``.  On an exception the temporary file is
    removed and ``path`` is untouched; a full disk is a [`NoSpace`][] naming ``path`` and, when
    ``needed`` (bytes) is given, how much it needs.  Missing parent folders are created (the one rule
    for every output path); a file where a folder must be is a ``NotADirectoryError``, an unwritable
    folder a ``PermissionError``, an existing directory at ``path`` an ``IsADirectoryError``.
    Temporary files of dead writers in the directory are removed first.
    """
    path = Path(path)
    directory = path.parent
    if not directory.is_dir():
        blocker = existing_ancestor(directory)
        if not blocker.is_dir():
            raise NotADirectoryError(f"cannot write {path}: {str(blocker)!r} is a file, not a directory")
        with reporting_no_space(path):
            directory.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise IsADirectoryError(f"cannot write the file {path}: it is a directory; choose a file name")
    remove_stale_temps(directory)
    fd, tmp = _locked_temp(directory, path.name)
    try:
        with reporting_no_space(path, needed):
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


# --- one writer per target ------------------------------------------------------------------------

class Locked(RuntimeError):
    """Another process is writing the same target (see [`exclusive_lock`][])."""


@contextlib.contextmanager
def exclusive_lock(target: str | os.PathLike, what: str = "written") -> Iterator[None]:
    """Hold an exclusive lock on ``target`` for the block: writers of one path exclude each other.

    The lock is ``fcntl.flock`` on a small file ``.NAME.lock`` beside ``target`` (which may not exist
    yet), holding the owner's pid; the kernel releases it when the holder exits, even on kill -9, so
    a stale lock file never blocks.  A second writer gets [`Locked`][] at once, naming the pid.
    The holder removes the file when it is done; a writer that locked a file removed meanwhile
    (it checks the inode) tries again on the new one.  Where ``fcntl`` does not exist (Windows) no
    lock is taken.
    """
    if fcntl is None:  # pragma: no cover - not POSIX
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


def lock_holder(target: str | os.PathLike) -> int | None:
    """The pid holding [`exclusive_lock`][] on ``target`` now, None if nobody holds it."""
    if fcntl is None:  # pragma: no cover - not POSIX
        return None
    target = Path(target)
    try:
        fd = os.open(target.with_name(f".{target.name}.lock"), os.O_RDONLY)
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


# --- paths checked before the work ----------------------------------------------------------------

def existing_ancestor(path: Path) -> Path:
    """``path`` (made absolute) or its nearest parent that exists."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class Unwritable(PermissionError):
    """A folder that cannot be created or written into (a read-only or virtual file system, no
    permission); the message names it, says why in words and what to do."""


def _file_system_type(path: Path) -> str | None:
    """The type of the file system mounted at or above ``path`` (``"proc"``, ``"sysfs"``, ...), from
    ``/proc/self/mounts``; None where unknown."""
    try:
        with open("/proc/self/mounts") as fh:
            mounts = [line.split()[1:3] for line in fh if len(line.split()) >= 3]
    except OSError:
        return None
    path = str(path.absolute())
    best = ("", None)
    for point, kind in mounts:
        point = point.replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, kind)
    return best[1]


_VIRTUAL_FS = {"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "securityfs", "configfs", "pstore", "bpf",
               "tracefs", "efivarfs", "devpts", "mqueue", "hugetlbfs", "fusectl"}


def unwritable_reason(err: OSError, base: str | os.PathLike) -> str:
    """Why nothing can be created in the existing folder ``base``, in words (from the ``err`` that
    creating something there raised), without the raw errno text."""
    base = Path(base)
    kind = _file_system_type(base)
    if kind in _VIRTUAL_FS:
        return f"{base} is on the system's virtual {kind} file system, where no files or folders can be made"
    if err.errno == errno.EROFS:
        return f"{base} is on a read-only file system"
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"you have no permission to create anything in {base}"
    if err.errno == errno.ENOENT:
        return f"{base} does not accept new files or folders"
    if err.errno == errno.ENAMETOOLONG:
        return "the name is longer than the file system allows"
    words = os.strerror(err.errno).lower() if err.errno else (str(err) or type(err).__name__)
    return f"{words} (in {base})"


def probe_writable(base: str | os.PathLike) -> str | None:
    """None if a folder can be created in the existing folder ``base`` (tried: an empty hidden folder
    made and removed at once, since permissions alone do not tell, e.g. for root, on a read-only mount or
    in /proc), else why not in words ([`unwritable_reason`][])."""
    try:
        probe = tempfile.mkdtemp(prefix=f"{TEMP_INFIX}probe-", dir=base)
    except OSError as err:
        if err.errno in SPACE_ERRNOS:  # writable but full: the writer reports that, with sizes
            return None
        return unwritable_reason(err, base)
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return None


def check_writable(path: str | os.PathLike, what: str = "directory", flag: str | None = None) -> None:
    """Raise now if the directory ``path`` (or, if it does not exist yet, the nearest existing parent,
    where it would be created) cannot be written: before the work, not after.  A file at ``path`` (or
    at a parent) is a ``NotADirectoryError``, an unwritable directory (no permission, a read-only or
    virtual file system such as /proc) an [`Unwritable`][] (a ``PermissionError``); ``flag``: the
    option that chooses ``path`` (named in the advice)."""
    path = Path(path)
    base = existing_ancestor(path)
    if not base.is_dir():
        if base == path.absolute():
            raise NotADirectoryError(f"{what} {str(path)!r} is a file, not a directory; choose a directory")
        raise NotADirectoryError(f"{what} {str(path)!r} cannot be created: {str(base)!r} is a file, not a "
                                 f"directory; choose a writable directory")
    advice = f"choose a writable location with {flag}" if flag else "choose another location"
    if not os.access(base, os.W_OK | os.X_OK):
        where = "" if base == path.absolute() else f" (it would be created in {str(base)!r})"
        raise Unwritable(f"{what} {str(path)!r} is not writable{where}; {advice}")
    reason = probe_writable(base)
    if reason is not None:
        verb = "write into" if base == path.absolute() else "create"
        raise Unwritable(f"cannot {verb} the {what} {path}: {reason}; {advice}")


def ensure_dir(path: str | os.PathLike, what: str = "directory", flag: str | None = None) -> Path:
    """Create the directory ``path`` (and parents) after [`check_writable`][]; returns it.  The one
    way an output folder is made: a failure is an [`Unwritable`][] (or [`NoSpace`][]) naming ``path``,
    why in words and ``flag``, never the bare errno text."""
    check_writable(path, what, flag)
    path = Path(path)
    try:
        with reporting_no_space(path):
            path.mkdir(parents=True, exist_ok=True)
    except NoSpace:
        raise
    except FileExistsError:
        raise NotADirectoryError(f"{what} {str(path)!r} is a file, not a directory; choose a directory") from None
    except OSError as err:  # e.g. a mount that changed since the check
        advice = f"choose a writable location with {flag}" if flag else "choose another location"
        raise Unwritable(f"cannot create the {what} {path}: "
                         f"{unwritable_reason(err, existing_ancestor(path))}; {advice}") from None
    return path


def require_file(path: str | os.PathLike, what: str = "file") -> Path:
    """``path`` if it is an existing file; else ``FileNotFoundError`` / ``IsADirectoryError`` saying so."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{what} {str(path)!r} is a directory, not a file; give the file's path")
    if not path.exists():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist")
    return path


def require_dir(path: str | os.PathLike, what: str = "directory") -> Path:
    """``path`` if it is an existing directory; else ``FileNotFoundError`` / ``NotADirectoryError``."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{what} {str(path)!r} is a file, not a directory; give the directory's path")
    if not path.exists():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist")
    return path


def serialized(write: Any) -> bytes:
    """The bytes ``write(buffer)`` puts into an in-memory buffer (``torch.save``, ``savefig``): a
    writer that cannot report a full disk itself fills memory, and [`atomic_write`][] the file."""
    buffer = io.BytesIO()
    write(buffer)
    return buffer.getvalue()
