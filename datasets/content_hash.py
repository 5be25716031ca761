"""The content hash of a dataset file: a chain over its samples, ``h_{i+1} = sha256(h_i || x_i || y_i)``.

``h_0 = sha256("petrov-dataset")``, ``x_i``, ``y_i`` the stored float32 bytes of sample i, in index order
(a mesh file: every stored array of sample i, as ``petrov.datasets.mesh.storage`` lists them).
A chain (not one hash over everything) because a generation is written chunk by chunk and resumed: the
partial file keeps ``h`` after its ``n_complete`` samples in ``hash_chain`` (and that count in
``hash_chain_samples``), so the hash does not depend
on how the work was split (chunks, resumed runs, shards merged), and two files generated with the same
kind, parameters, seed and size have the same hash. [`attrs_hash`][] hashes the attributes that
describe the data. What a run records of a file ([`petrov.datasets.identity.data_identity`][]) is
built on both.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import numpy as np

SEED = b"petrov-dataset"
# attributes that change whenever a file is written, not when its data change
VOLATILE = {"created", "petrov_version", "chunk_size", "hash_chain", "hash_chain_samples", "content_hash",
            "n_complete"}


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
            self.add(xi, yi)

    def add(self, *arrays: np.ndarray) -> None:
        """Add one sample made of ``arrays`` (their bytes as stored, in the order given)."""
        h = hashlib.sha256(self.digest)
        for array in arrays:
            h.update(np.ascontiguousarray(array).data)
        self.digest = h.digest()

    @property
    def state(self) -> str:
        return self.digest.hex()

    @property
    def value(self) -> str:
        return "sha256:" + self.digest.hex()


def attrs_hash(attrs: Mapping[str, Any]) -> str:
    """A hash of the attributes that describe the data (not when or by what it was written)."""
    kept = {k: v for k, v in attrs.items() if k not in VOLATILE}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


__all__ = ["VOLATILE", "ContentHash", "attrs_hash"]
