"""The identity of a dataset file's content: what a run records so that it tests on the data it trained on.

Generated and imported files carry a content hash, ``content_hash = "sha256:..."``: a chain over the
samples in index order, ``h_0 = sha256("petrov-dataset")``, ``h_{i+1} = sha256(h_i || x_i || y_i)``
with ``x_i``, ``y_i`` the stored float32 bytes.  A chain (not one hash over everything) because a
generation is written chunk by chunk and resumed: the partial file keeps ``h`` after its
``n_complete`` samples in ``hash_chain``, so the hash does not depend on how the work was split.
Two files generated with the same kind, parameters, seed and size have the same hash.

:func:`data_identity` is that hash plus a hash of the file's attributes (``created``, versions and
the chunking left out), or, for files without a content hash (FNO ``.mat``, files of petrov 0.1),
size, modification time and the attribute hash (mesh files too).  :func:`identity_change` says how two
differ.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

SEED = b"petrov-dataset"
# attributes that change whenever a file is written, not when its data change
_VOLATILE = {"created", "petrov_version", "chunk_size", "hash_chain", "content_hash", "n_complete"}


class ContentHash:
    """The sample chain of the module docstring; ``state`` (hex) continues a resumed file's chain."""

    BLANK = " " * len("sha256:" + "0" * 64)  # the attribute's place, kept until the file is complete

    def __init__(self, state: str | None = None):
        self.digest = bytes.fromhex(state) if state else hashlib.sha256(SEED).digest()

    def update(self, x: np.ndarray, y: np.ndarray) -> None:
        """Add the samples of the blocks ``x``, ``y`` ``(k, ...)`` (float32, as stored), in order."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.ascontiguousarray(y, dtype=np.float32)
        for xi, yi in zip(x, y):
            h = hashlib.sha256(self.digest)
            h.update(xi.tobytes())
            h.update(yi.tobytes())
            self.digest = h.digest()

    @property
    def state(self) -> str:
        return self.digest.hex()

    @property
    def value(self) -> str:
        return "sha256:" + self.digest.hex()


def attrs_hash(attrs: Mapping[str, Any]) -> str:
    """A hash of the attributes that describe the data (not when or by what it was written)."""
    kept = {k: v for k, v in attrs.items() if k not in _VOLATILE}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def data_identity(path: str | os.PathLike) -> dict[str, Any]:
    """What identifies the content of the dataset file ``path`` (see the module docstring)."""
    from .loading import open_source
    from .mesh.storage import is_mesh_file, open_mesh_h5
    from .storage import file_attrs

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


__all__ = ["ContentHash", "attrs_hash", "data_identity", "identity_change"]
