"""An operating-system error in words: which file or stream, what went wrong, what to do.

An ``OSError`` that no check put into words ("[Errno 28] No space left on device") becomes one line
naming the file (or the standard output or error, when a print failed) and the cause, with advice
that fits the cause ([`os_error_message`][]):

- ``ENOSPC``, ``EDQUOT``, ``EFBIG``: a full disk, a quota, the file-size limit, with the space free
  where it is known ([`petrov.common.disk_space.no_space_message`][]);
- ``EROFS``: a read-only file system; ``EACCES``, ``EPERM``: permissions;
- ``EIO``: the device failed; ``ENAMETOOLONG``: a name longer than the file system allows;
- ``ENOTDIR``, ``EISDIR``, ``ENOENT``, ``EMFILE``: a file where a folder must be and the reverse, a
  missing path, too many open files; any other: the system's words for it.

[`unwritable_reason`][] says why nothing can be created in a folder (a read-only or virtual file
system such as /proc, no permission), for the checks made before the work.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from .disk_space import (SPACE_ERRNOS, existing_ancestor, format_size, free_space, no_space_message,
                         shown_ancestor)

VIRTUAL_FS = {"proc", "sysfs", "cgroup", "cgroup2", "debugfs", "securityfs", "configfs", "pstore", "bpf",
              "tracefs", "efivarfs", "devpts", "mqueue", "hugetlbfs", "fusectl"}
SPACE_CAUSES = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file size limit reached"}


def file_system_type(path: str | os.PathLike) -> str | None:
    """The type of the file system mounted at or above ``path`` (``"proc"``, ``"tmpfs"``, ...), from
    ``/proc/self/mounts``; None where unknown."""
    try:
        with open("/proc/self/mounts") as fh:
            mounts = [line.split()[1:3] for line in fh if len(line.split()) >= 3]
    except OSError:
        return None
    path = str(Path(path).absolute())
    best = ("", None)
    for point, kind in mounts:
        point = point.replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, kind)
    return best[1]


def _words(code: int | None, err: BaseException) -> str:
    return os.strerror(code).lower() if code else (str(err) or type(err).__name__)


def unwritable_reason(err: OSError, base: str | os.PathLike) -> str:
    """Why nothing can be created in the existing folder ``base`` (as the user wrote it), in words,
    from the ``err`` that creating something there raised; without the raw errno text."""
    kind = file_system_type(base)
    if kind in VIRTUAL_FS:
        return f"{base} is on the system's virtual {kind} file system, where no files or folders can be made"
    if err.errno == errno.EROFS:
        return f"{base} is on a read-only file system"
    if err.errno in (errno.EACCES, errno.EPERM):
        return f"you have no permission to create anything in {base}"
    if err.errno == errno.ENOENT:
        return f"{base} does not accept new files or folders"
    if err.errno == errno.ENAMETOOLONG:
        return "the name is longer than the file system allows"
    return f"{_words(err.errno, err)} (in {base})"


def display_path(path: str | os.PathLike) -> str:
    """``path`` relative to the working folder when it lies inside it (as a user would have written it),
    else as it is."""
    path = os.fsdecode(path)
    if os.path.isabs(path):
        with contextlib.suppress(ValueError):
            if os.path.commonpath([path, os.getcwd()]) == os.getcwd():
                return os.path.relpath(path)
    return path


def _name_max(path: Path) -> int:
    try:
        return int(os.pathconf(existing_ancestor(path), "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _short(text: str, keep: int = 24) -> str:
    return text if len(text) <= 2 * keep + 3 else f"{text[:keep]}...{text[-keep:]}"


def _too_long(path: Path) -> str:
    """Which name of ``path`` is longer than its file system allows, or that the whole path is too long."""
    limit = _name_max(path)
    for part in path.parts:
        if len(os.fsencode(part)) > limit:
            return (f"the name {_short(part)!r} is {len(os.fsencode(part))} bytes long, the file system allows "
                    f"{limit}")
    return f"the path is {len(os.fsencode(str(path.absolute())))} bytes long, more than the system allows"


def _file_in_the_way(path: Path) -> Path | None:
    """The nearest parent of ``path`` that exists and is not a folder (as the user wrote it), if any."""
    base = existing_ancestor(path.parent)
    return None if base.is_dir() else shown_ancestor(path, base)


def _is_regular(path: str | os.PathLike) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def stream_message(err: OSError, stream: str, target: str | None) -> str:
    """One line for a failed write to the standard output or error (``stream``: "standard output"),
    ``target`` the file it goes to (None for a pipe or a terminal)."""
    code = err.errno
    into = f" to {target}" if target else ""
    elsewhere = "send it to a file on a disk with free space, or to /dev/null to discard it"
    if code in SPACE_ERRNOS and target and _is_regular(target):
        folder = Path(target).parent
        free = free_space(folder) if code == errno.ENOSPC else None
        sizes = f" ({format_size(free)} free in {folder})" if free is not None else ""
        return (f"{SPACE_CAUSES[code]}: cannot write the {stream} to {target}{sizes}; free some space or send "
                f"the output elsewhere, then run the command again")
    if code in SPACE_ERRNOS:
        return f"cannot write the {stream}{into}: no space left on the device; {elsewhere}"
    if code == errno.EIO:
        return (f"cannot write the {stream}{into}: input/output error (the terminal, disk or network file "
                f"system it goes to failed or went away); send it to a file and run the command again")
    return f"cannot write the {stream}{into}: {_words(code, err)}; send it elsewhere and run the command again"


def os_error_message(err: OSError, path: str | os.PathLike | None = None) -> str:
    """One line for ``err`` naming ``path`` (default: the error's own file name), the cause in words
    and what to do; without "[Errno N]"."""
    code = err.errno
    path = err.filename if path is None else path
    if path is None:
        return f"{_words(code, err)}; check the files and folders the command reads and writes"
    shown = Path(display_path(path))
    if code in SPACE_ERRNOS:
        return no_space_message(shown, code=code)
    if code == errno.EROFS:
        return f"cannot write {shown}: the file system holding it is read-only; choose a writable location"
    if code in (errno.EACCES, errno.EPERM):
        return (f"cannot access {shown}: {_words(code, err)}; check the permissions of {shown} and of its "
                f"folders (ls -ld), or choose another location")
    if code == errno.EIO:
        return (f"cannot read or write {shown}: input/output error (the disk or network file system under it "
                f"failed or went away); check the device (dmesg) and run the command again")
    if code == errno.ENAMETOOLONG:
        return f"cannot use {_short(str(shown), 40)}: {_too_long(shown)}; choose a shorter name"
    if code == errno.ENOTDIR:
        blocker = _file_in_the_way(shown)
        what = f"{str(blocker)!r} is a file, not a folder" if blocker else "a part of it is a file, not a folder"
        return f"cannot use {shown}: {what}; choose another path"
    if code == errno.EISDIR:
        return f"{shown} is a directory, not a file; give a file's path"
    if code == errno.ENOENT:
        return f"{shown} does not exist; check the path"
    if code in (errno.EMFILE, errno.ENFILE):
        return (f"cannot open {shown}: too many open files; raise the limit (`ulimit -n`) or close other "
                f"programs, then run the command again")
    return f"cannot use {shown}: {_words(code, err)}"


__all__ = ["VIRTUAL_FS", "display_path", "file_system_type", "os_error_message", "stream_message", "unwritable_reason"]
