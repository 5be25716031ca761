"""One sample per HDF5 group: the datasets ``GROUP/KEY`` of every group seen as one array with a leading
sample axis.

Files that keep each sample in a group of its own (PDEBench's 2-D diffusion-reaction and shallow-water
files: groups ``0000``, ``0001``, ... each holding ``data`` of shape ``(T, X, Y, C)``) are read through a
``GroupStack``: ``stack[lo:hi]`` reads the groups ``lo..hi-1`` (in sorted name order) into one
preallocated array ``(hi - lo, *shape)``, so a chunk of samples costs one copy of its values in memory.
A source spec names such a stack with ``*`` for the group: ``FILE.h5:*/data``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

WILDCARD = "*"


def is_group_pattern(key: str | None) -> bool:
    """Whether a source key names one dataset in every group (``"*/data"``)."""
    return key is not None and key.split("/", 1)[0] == WILDCARD and "/" in key


class GroupStack:
    """The dataset ``inner`` of every group of ``h5`` (sorted by name), as an array-like ``(n_groups, *shape)``
    with numpy-style slicing along the first axis (each group's array must have one shape and dtype)."""

    def __init__(self, h5: h5py.File, inner: str, label: str):
        self.h5, self.inner, self.label = h5, inner, label
        self.groups = sorted(name for name, obj in h5.items() if isinstance(obj, h5py.Group))
        if not self.groups:
            raise ValueError(f"{label}: the file has no groups (one sample per group expected, each holding "
                             f"{inner!r}); name a dataset instead of a '*/{inner}' pattern")
        first = self._dataset(self.groups[0])
        self.dtype, self.sample_shape = first.dtype, tuple(first.shape)
        for name in self.groups:  # shapes are in the metadata: checking every group costs no data
            ds = self._dataset(name)
            if tuple(ds.shape) != self.sample_shape:
                raise ValueError(f"{self.label}: group {name!r} holds {self.inner!r} of shape {tuple(ds.shape)} but "
                                 f"group {self.groups[0]!r} one of {self.sample_shape}; every sample needs one shape")
        self.shape = (len(self.groups), *self.sample_shape)
        self.ndim = len(self.shape)

    def _dataset(self, group: str) -> h5py.Dataset:
        obj = self.h5[group].get(self.inner)
        if not isinstance(obj, h5py.Dataset):
            raise KeyError(f"{self.label}: group {group!r} has no dataset {self.inner!r} (each sample's group needs "
                           f"one); it holds: {', '.join(sorted(self.h5[group].keys())) or 'nothing'}")
        return obj

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> np.ndarray:
        index = index if isinstance(index, tuple) else (index,)
        rows, rest = index[0], index[1:]
        if not isinstance(rows, slice):
            raise TypeError(f"{self.label}: read samples as a slice, got {rows!r}")
        names = self.groups[rows]
        out = np.empty((len(names), *self.sample_shape), dtype=self.dtype)
        for k, name in enumerate(names):
            self._dataset(name).read_direct(out, dest_sel=np.s_[k])
        return out[(slice(None), *rest)] if rest else out


def open_group_stack(path: str | os.PathLike, pattern: str, label: str) -> tuple[GroupStack, h5py.File]:
    """The ``GroupStack`` of ``pattern`` (``"*/KEY"``) in the HDF5 file ``path``, and the open file (to close)."""
    from .hdf5_files import open_h5

    path = Path(path)
    if not h5py.is_hdf5(path):
        raise ValueError(f"{path}: not an HDF5 file; a '{pattern}' pattern (one sample per group) needs one")
    h5 = open_h5(path)
    try:
        return GroupStack(h5, pattern.split("/", 1)[1], label), h5
    except BaseException:
        h5.close()
        raise


__all__ = ["GroupStack", "WILDCARD", "is_group_pattern", "open_group_stack"]
