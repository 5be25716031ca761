"""The identity of a dataset file's content: what a run records so that it tests on the data it trained on.

Generated, merged and imported files, on grids and on meshes, carry a content hash,
``content_hash = "sha256:..."``, a chain over the samples ([`petrov.datasets.content_hash`][]).

[`data_identity`][] is that hash plus a hash of the file's attributes (``created``, versions and
the chunking left out), or, for files without a content hash (FNO ``.mat``, files of petrov 0.1, mesh
files of petrov 0.2.0 and before), size, modification time and the attribute hash.
[`identity_change`][] says how two differ, [`check_data_unchanged`][] refuses a file whose content changed.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from .content_hash import attrs_hash
from .loading import open_source
from .mesh.storage import is_mesh_file, open_mesh_h5
from .hdf5_files import file_attrs


def data_identity(path: str | os.PathLike) -> dict[str, Any]:
    """What identifies the content of the dataset file ``path`` (see the module docstring)."""
    path = Path(path)
    if is_mesh_file(path):
        with open_mesh_h5(path) as h5:
            attrs = file_attrs(h5)
    else:
        with open_source(path) as src:
            attrs = dict(src.attrs)
    identity: dict[str, Any] = {"attrs": attrs_hash(attrs), "n_complete": int(attrs.get("n_complete", 0) or 0)}
    if str(attrs.get("content_hash", "")).strip():
        identity["content"] = str(attrs["content_hash"])
    else:
        stat = path.stat()
        identity.update(size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    if "seed" in attrs:
        identity["seed"] = attrs["seed"]  # for the message only
    return identity


def identity_change(recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> str | None:
    """None if ``current`` is the recorded content (or nothing was recorded), else what differs."""
    if not recorded:
        return None
    keys = ("content", "attrs", "n_complete", "size", "mtime_ns")
    changed = [k for k in keys if recorded.get(k) != current.get(k)]
    if not changed:
        return None
    if recorded.get("seed") != current.get("seed"):
        return f"it now holds seed {current.get('seed')}, the run's data had seed {recorded.get('seed')}"
    names = {"content": "its samples", "attrs": "its attributes", "n_complete": "its number of samples",
             "size": "its size", "mtime_ns": "its modification time"}
    return "; ".join(f"{names[k]} changed" for k in changed[:2])


class DataChanged(ValueError):
    """The run's data file is not the one it started on (regenerated, replaced, edited)."""


def check_data_unchanged(path: str, recorded: dict | None, when: str, advice: str) -> None:
    """[`DataChanged`][] if the data file ``path`` no longer holds the content ``recorded`` (None: nothing
    recorded, nothing to check)."""
    if recorded is None:
        return
    why = identity_change(recorded, data_identity(path))
    if why:
        raise DataChanged(f"the data file {path} changed {when} ({why}); {advice}")


__all__ = ["DataChanged", "check_data_unchanged", "data_identity", "identity_change"]
