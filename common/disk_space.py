"""Free space, and the error a write that runs out of it becomes.

[`free_space`][] is what the file system holding a path (or its nearest existing parent) has free for
this user.  A write that fails for want of space -- the disk (``ENOSPC``), a quota (``EDQUOT``) or the
file-size limit (``EFBIG``, ``ulimit -f``) -- becomes a [`NoSpace`][] saying which file, how much it
needed when known and how much is free ([`no_space_message`][]): [`as_no_space`][] turns one error,
[`reporting_no_space`][] every error of a block.  h5py reports a failed HDF5 write as a RuntimeError or
ValueError whose text holds the errno; [`errno_of`][] reads both kinds.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from pathlib import Path
from typing import Iterator

SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
WRITE_ERRORS = (OSError, RuntimeError, ValueError)  # what a failed write can come as (h5py: all three)


class NoSpace(OSError):
    """A write failed for want of space: the disk, a quota, or the file-size limit (``ulimit -f``).

    The message says which file, how much was needed (when known) and how much is free."""


def format_size(n_bytes: float) -> str:
    """``1_500_000`` -> ``"1.5 MB"`` (decimal units; bytes below 1 kB)."""
    if abs(n_bytes) < 1000:
        return f"{int(n_bytes)} byte{'' if int(n_bytes) == 1 else 's'}"
    for unit in ("kB", "MB", "GB", "TB"):
        n_bytes /= 1000.0
        if abs(n_bytes) < 1000 or unit == "TB":
            return f"{n_bytes:.3g} {unit}" if n_bytes < 100 else f"{n_bytes:.0f} {unit}"
    raise AssertionError("unreachable")


def existing_ancestor(path: Path) -> Path:
    """``path`` (made absolute) or its nearest parent that exists."""
    path = Path(path).absolute()
    while not os.path.exists(path) and path != path.parent:  # a name too long does not exist either
        path = path.parent
    return path


def shown_ancestor(path: str | os.PathLike, ancestor: Path) -> Path:
    """``ancestor`` (absolute, a parent of ``path`` or ``path`` itself) as the user wrote ``path``: ``ro``
    rather than ``/home/me/ro`` for ``path = "ro/run"``."""
    path = Path(path)
    return next((p for p in (path, *path.parents) if p.absolute() == ancestor), ancestor)


def free_space(path: str | os.PathLike) -> int | None:
    """Bytes free for this user on the file system holding ``path`` (or its nearest existing parent)."""
    try:
        return shutil.disk_usage(existing_ancestor(Path(path))).free
    except OSError:
        return None


def no_space_message(path: str | os.PathLike, needed: int | None = None, code: int = errno.ENOSPC,
                     advice: str | None = None) -> str:
    """What [`NoSpace`][] says: the cause, the file, needed and free bytes, what to do (``advice``, else
    the advice that fits the cause)."""
    path = Path(path)
    if code == errno.EFBIG:
        return (f"file size limit reached writing {path} (the shell's `ulimit -f`); raise the limit or "
                f"write smaller files, then run the command again")
    quota = code == errno.EDQUOT
    free = None if quota else free_space(path.parent)  # a quota is used up while the disk has room
    sizes = [f"{format_size(needed)} needed" if needed else None,
             f"{format_size(free)} free in {path.parent}" if free is not None else None]
    sizes = ", ".join(s for s in sizes if s)
    if advice is None:
        what = ("remove some of your files (`quota -s` shows the quota), ask for a larger quota" if quota
                else "free some space")
        advice = f"{what} or choose another location, then run the command again"
    cause = "disk quota exceeded" if quota else "disk full"
    return f"{cause}: cannot write {path}{f' ({sizes})' if sizes else ''}; {advice}"


def errno_of(err: BaseException) -> int | None:
    """The errno of ``err``: an OSError's own, or the one an h5py error's text holds (None if neither)."""
    if isinstance(err, OSError) and err.errno is not None:
        return err.errno
    # h5py reports a failed HDF5 write as a RuntimeError or ValueError whose text holds the errno
    # ("... file write failed: ..., errno = 28, error message = 'No space left on device' ...")
    found = re.search(r"\berrno = (\d+)", str(err)) if isinstance(err, WRITE_ERRORS) else None
    return int(found.group(1)) if found else None


def as_no_space(err: BaseException, path: str | os.PathLike, needed: int | None = None) -> NoSpace | None:
    """``err`` as a [`NoSpace`][] if it is a full disk, quota or file-size limit, else None."""
    if isinstance(err, NoSpace):
        return err
    code = errno_of(err)
    if code in SPACE_ERRNOS:
        full = NoSpace(no_space_message(path, needed, code))
        full.errno = code
        return full
    return None


@contextlib.contextmanager
def reporting_no_space(path: str | os.PathLike, needed: int | None = None) -> Iterator[None]:
    """Turn a full disk inside the block into [`NoSpace`][] naming ``path`` (other errors pass)."""
    try:
        yield
    except WRITE_ERRORS as err:
        full = as_no_space(err, path, needed)
        if full is None or full is err:
            raise
        raise full from None


__all__ = ["NoSpace", "SPACE_ERRNOS", "as_no_space", "errno_of", "existing_ancestor", "format_size", "free_space",
           "no_space_message", "reporting_no_space", "shown_ancestor"]
