"""Output folders: which files petrov wrote there and for which command, and the one rule every command follows.

A folder petrov writes into keeps a small manifest, ``.petrov-outputs.json``:

    {"format": "petrov-outputs", "version": 1, "files": {"best.pt": "train", "metrics.json": "train", ...}}

so petrov can tell its own files from a user's.  [`claim_outputs`][] is the rule, the same for
``train``, ``evaluate``, ``invert``, ``generate`` and ``import``:

- a command never writes over another command's outputs (``petrov evaluate RUN --out RUN`` would
  replace the training's ``metrics.json``): refused, ``--overwrite`` or not;
- a folder that holds files petrov did not write for this command (a user's, another command's) is
  refused unless ``overwrite``; with ``overwrite`` the files the command writes replace those of the
  same name and the others stay.  Once a folder is the command's own, a user's file beside its
  outputs (notes) is left alone, and only one of the same name as an output needs ``overwrite``;
- what the command wrote there before is removed when it claims the folder again (unless it
  resumes), so a folder never mixes two invocations' results (the plots of an earlier evaluation
  beside new metrics);
- a command writing one file into a shared folder (``generate``, ``import``: ``scope="file"``, checked
  by [`check_outputs`][] alone, no manifest written into a data folder) checks that file only: an
  existing one needs ``overwrite``, another command's output is refused.

Hidden entries (locks, temporary files, the manifest) and sub-folders holding their own manifest are
never counted as a user's files.

[`output_file`][] checks an output file's path before the work and creates its folders: a name too
long for the temporary files written beside it, a file where a folder must be and an unwritable folder
are each one line naming the user's path; [`require_writable`][] does the same for a file written in
place (a partial file being resumed).
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .disk_space import existing_ancestor, reporting_no_space, shown_ancestor
from .files import TEMP_INFIX, write_json
from .locks import folder_lock
from .path_checks import Unwritable, check_writable, ensure_dir, probe_writable

MANIFEST = ".petrov-outputs.json"
FORMAT = "petrov-outputs"
# the most bytes a name petrov writes beside an output adds to it: ".NAME.petrov-XXXXXXXX.tmp"
# (atomic writes; "NAME.partial" and ".NAME.lock" add less)
NAME_ROOM = len(".") + len(TEMP_INFIX) + 8 + len(".tmp")


class OutputConflict(FileExistsError):
    """An output folder or file that the rule refuses (the message says which files and what to do)."""


def read_manifest(directory: str | os.PathLike) -> dict[str, str]:
    """``{file name: command}`` of the outputs petrov recorded in ``directory`` (empty if none)."""
    directory = Path(directory)
    try:
        doc = json.loads((directory / MANIFEST).read_text())
        files = doc["files"] if doc.get("format") == FORMAT else {}
        return {str(k): str(v) for k, v in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _is_output_folder(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def _listing(directory: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(directory) if not n.startswith("."))
    except FileNotFoundError:
        return []


def _shown(names: Iterable[str], limit: int = 4) -> str:
    names = list(names)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


@dataclass(frozen=True)
class Claim:
    """A folder claimed by [`claim_outputs`][]: ``directory`` exists and its manifest names ``files``
    as ``command``'s; ``removed``: the earlier outputs of the command taken away."""

    directory: Path
    command: str
    files: tuple[str, ...]
    removed: tuple[str, ...] = ()


def _refuse_theirs(directory: Path, owners: dict[str, str], command: str, names: Iterable[str], flag: str) -> None:
    theirs = [n for n in names if (directory / n).exists() and owners.get(n, command) != command]
    if theirs:
        raise OutputConflict(
            f"{directory / theirs[0]} was written by `petrov {owners[theirs[0]]}`; `petrov {command}` does not "
            f"write over another command's outputs: choose another {flag}")


def _check_file(target: Path, command: str, overwrite: bool, flag: str) -> None:
    if target.parent.exists() and not target.parent.is_dir():
        raise NotADirectoryError(f"cannot write {target}: {str(target.parent)!r} is a file, not a directory")
    if target.is_dir():
        raise IsADirectoryError(f"{flag} {target} is a directory; give the output file's name "
                                f"(e.g. {target / 'data.h5'})")
    _refuse_theirs(target.parent, read_manifest(target.parent), command, [target.name], flag)
    if target.exists() and not overwrite:
        raise OutputConflict(f"{target} already exists; pass --overwrite (overwrite=True in Python) to replace it")


def _check_folder(directory: Path, command: str, names: list[str], overwrite: bool, flag: str, what: str) -> None:
    check_writable(directory, what, flag)
    owners = read_manifest(directory)
    _refuse_theirs(directory, owners, command, names, flag)
    present = [n for n in _listing(directory) if not _is_output_folder(directory / n)]
    ours = {n for n, c in owners.items() if c == command}
    if ours:  # the command's own folder already: only clashes with a user's file count
        foreign = [n for n in present if n in names and n not in ours]
    else:
        foreign = [n for n in present if owners.get(n) != command]
    if foreign and not overwrite:
        raise OutputConflict(
            f"{what} {str(directory)!r} holds files petrov did not write for `petrov {command}` "
            f"({_shown(foreign)}); choose a new or empty {flag}, or pass --overwrite (overwrite=True in Python) "
            f"to write there anyway (files named like its outputs are replaced, the others kept)")


def check_outputs(directory: str | os.PathLike, command: str, names: Iterable[str], *, overwrite: bool = False,
                  scope: str = "folder", flag: str = "--out", what: str = "output directory") -> None:
    """Apply the rule (module docstring) without writing anything: [`OutputConflict`][] if refused
    (``scope="file"``: ``names`` is the one file the command writes into ``directory``; ``what`` names
    the folder in messages)."""
    names = list(names)
    if scope == "file":
        _check_file(Path(directory) / names[0], command, overwrite, flag)
    else:
        _check_folder(Path(directory), command, names, overwrite, flag, what)


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def _short(name: str, keep: int = 24) -> str:
    return name if len(name) <= keep + 3 else f"{name[:keep]}...{name[-8:]}"


def output_file(path: str | os.PathLike, flag: str = "-o", create: bool = True) -> Path:
    """Check the path of an output file before the work and create its missing folders (unless not
    ``create``: a check only); returns it.

    One line naming ``path`` and what to do otherwise: a file or folder name longer than the file system
    allows, counting the ``NAME_ROOM`` bytes of the temporary names petrov writes beside the file
    (ValueError), a file where a folder must be (NotADirectoryError), an unwritable folder
    (PermissionError)."""
    path = Path(path)
    base = existing_ancestor(path.parent)
    limit = _name_max(base if base.is_dir() else base.parent)
    for part in path.parent.parts:
        if len(os.fsencode(part)) > limit:
            raise ValueError(f"cannot write {_short(str(path), 48)}: the folder name {_short(part)!r} is "
                             f"{len(os.fsencode(part))} bytes long, the file system allows {limit}; choose a "
                             f"shorter {flag}")
    size = len(os.fsencode(path.name))
    if size + NAME_ROOM > limit:
        raise ValueError(f"the output file name {_short(path.name)!r} is {size} bytes long; petrov writes "
                         f"temporary files beside it whose names add up to {NAME_ROOM} bytes to it, and the file "
                         f"system allows {limit}: choose a name of at most {limit - NAME_ROOM} bytes for {flag}")
    shown = shown_ancestor(path.parent, base)
    if not base.is_dir():
        raise NotADirectoryError(f"cannot write {path}: {str(shown)!r} is a file, not a folder; choose another {flag}")
    reason = probe_writable(base, shown)
    if reason is None and not os.access(base, os.W_OK | os.X_OK):
        reason = f"you have no permission to write into {shown}"
    if reason is not None:
        raise Unwritable(f"cannot write {path}: {reason}; choose a writable location with {flag}")
    if create:
        with reporting_no_space(path):
            path.parent.mkdir(parents=True, exist_ok=True)
    return path


def require_writable(path: str | os.PathLike, what: str, advice: str) -> None:
    """PermissionError naming ``path`` (``what`` it is) and ``advice`` if the existing file cannot be
    written in place."""
    path = Path(path)
    if path.exists() and not os.access(path, os.W_OK):
        raise PermissionError(f"{what} {path} is read-only; {advice}")


def claim_outputs(directory: str | os.PathLike, command: str, names: Iterable[str], *, overwrite: bool = False,
                  resume: bool = False, flag: str = "--out", what: str = "output directory") -> Claim:
    """Check the rule ([`check_outputs`][]), create the output folder ``directory`` and record ``names``
    as ``command``'s; unless ``resume``, the command's earlier outputs there are removed first.
    Call it once the inputs are validated and just before writing the first output."""
    directory = Path(directory)
    names = tuple(names)
    check_outputs(directory, command, names, overwrite=overwrite, flag=flag, what=what)
    ensure_dir(directory, what, flag)
    with folder_lock(directory):  # one read-modify-write of the manifest at a time
        owners = read_manifest(directory)
        removed = []
        if not resume:
            for name, owner in sorted(owners.items()):
                if owner == command and (directory / name).exists():
                    path = directory / name
                    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
                    removed.append(name)
            owners = {n: c for n, c in owners.items() if c != command or n in names}
        owners.update({n: command for n in names})
        write_json(directory / MANIFEST, {"format": FORMAT, "version": 1, "files": dict(sorted(owners.items()))})
    return Claim(directory, command, names, tuple(removed))


__all__ = ["MANIFEST", "NAME_ROOM", "Claim", "OutputConflict", "check_outputs", "claim_outputs", "output_file",
           "read_manifest", "require_writable"]
