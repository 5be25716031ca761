"""Paths checked before the work: can this folder be written, is there room for this file, does that input exist?

Each check raises one error whose message names the user's path (as written), says why in words and
what to do, so a command fails before its work and not half-way through it:

- [`check_writable`][]: a folder that will be written (or its nearest existing parent, where it would be
  created); [`ensure_dir`][] checks and creates it, the one way an output folder is made;
- [`require_space`][]: room on the disk for a file of a known size;
- [`require_file`][], [`require_dir`][]: inputs that must exist, as a file or as a folder;
- [`probe_writable`][]: whether anything can be created in an existing folder, tried (an empty hidden
  folder made and removed at once), since permissions alone do not tell for root, on a read-only mount
  or in /proc.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .disk_space import (SPACE_ERRNOS, NoSpace, existing_ancestor, free_space, no_space_message, reporting_no_space,
                         shown_ancestor)
from .os_errors import unwritable_reason

PROBE_PREFIX = ".petrov-probe-"


class Unwritable(PermissionError):
    """A folder that cannot be created or written into (a read-only or virtual file system, no
    permission); the message names it, says why in words and what to do."""


def probe_writable(base: str | os.PathLike, shown: str | os.PathLike | None = None) -> str | None:
    """None if a folder can be created in the existing folder ``base``, else why not in words
    ([`unwritable_reason`][petrov.common.os_errors.unwritable_reason], naming ``shown``: ``base`` as the
    user wrote it).  A full disk counts as writable: the writer reports it, with sizes."""
    try:
        probe = tempfile.mkdtemp(prefix=PROBE_PREFIX, dir=base)
    except OSError as err:
        if err.errno in SPACE_ERRNOS:
            return None
        return unwritable_reason(err, base if shown is None else shown)
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return None


def _advice(flag: str | None) -> str:
    return f"choose a writable location with {flag}" if flag else "choose another location"


def check_writable(path: str | os.PathLike, what: str = "directory", flag: str | None = None) -> None:
    """Raise now if the directory ``path`` (or, if it does not exist yet, the nearest existing parent,
    where it would be created) cannot be written: before the work, not after.  A file at ``path`` (or
    at a parent) is a ``NotADirectoryError``, an unwritable directory (no permission, a read-only or
    virtual file system such as /proc) an [`Unwritable`][] (a ``PermissionError``); ``flag``: the
    option that chooses ``path`` (named in the advice)."""
    path = Path(path)
    base = existing_ancestor(path)
    shown = shown_ancestor(path, base)
    if not base.is_dir():
        if base == path.absolute():
            raise NotADirectoryError(f"{what} {str(path)!r} is a file, not a directory; choose a directory")
        raise NotADirectoryError(f"cannot create the {what} {path}: {str(shown)!r} is a file, not a folder; "
                                 f"{_advice(flag)}")
    reason = probe_writable(base, shown)
    if reason is None and not os.access(base, os.W_OK | os.X_OK):
        reason = f"you have no permission to write into {shown}"
    if reason is not None:
        verb = "write into" if base == path.absolute() else "create"
        raise Unwritable(f"cannot {verb} the {what} {path}: {reason}; {_advice(flag)}")


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
        base = existing_ancestor(path)
        raise Unwritable(f"cannot create the {what} {path}: "
                         f"{unwritable_reason(err, shown_ancestor(path, base))}; {_advice(flag)}") from None
    return path


def require_space(path: str | os.PathLike, needed: int, advice: str | None = None, flag: str | None = None) -> None:
    """[`NoSpace`][] now if the file system of ``path`` has less than ``needed`` bytes free (``advice``:
    what to do then; the default fits the cause): for writers that must not meet a full disk half-way
    (HDF5 cannot be relied on to recover from one); [`Unwritable`][] if nothing can be written there at
    all (a virtual or read-only file system reports no free bytes too; ``flag``: the option that chooses
    ``path``)."""
    free = free_space(Path(path).parent)
    if free is not None and needed > free:
        base = existing_ancestor(Path(path).parent)
        reason = probe_writable(base, shown_ancestor(path, base))
        if reason is not None:
            raise Unwritable(f"cannot write {path}: {reason}; {_advice(flag)}")
        raise NoSpace(no_space_message(path, needed, advice=advice))


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


__all__ = ["PROBE_PREFIX", "Unwritable", "check_writable", "ensure_dir", "probe_writable", "require_dir",
           "require_file", "require_space"]
