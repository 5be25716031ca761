"""Reading mesh datasets lazily, one sample per item, and batching point sets with padding.

``open_mesh_dataset(path, level="level2", indices=slice(0, 1000))`` returns a [`MeshDataset`][]: a torch
``Dataset`` that keeps only the per-sample offsets in memory and reads one sample per ``__getitem__``
(the HDF5 file is opened on first use in each process, so DataLoader workers each have their own handle);
``.in_memory()`` reads its samples at once instead (one read per array, ~100x faster than item by item:
what training does with a split unless ``data.lazy``).
An item is a dict of tensors:

    x          (n, c_in)   nodal input (darcy-mesh: a)
    y          (n, c_out)  nodal target (darcy-mesh: u)
    pos        (n, 2)      node coordinates
    weights    (n,)        lumped-mass quadrature weights (sum = |Omega|)
    boundary   (n,) bool   Dirichlet boundary nodes
    triangles  (t, 3)      int64 node indices (counter-clockwise)
    index      int         the sample's number in the file
    position   int         the item's position in the dataset

plus what the dataset's ``transform`` adds (a callable ``item -> dict`` of tensors, per node or of a
fixed shape: a model's per-mesh inputs such as ``mesh_fno``'s grid interpolation or the distance to the
boundary; see
[`petrov.operators.models.sample_transform`][]), computed once per sample and kept.

[`collate_points`][] pads a list of items into the point-set batch every mesh model takes:
``x (b, n, c_in)``, ``y (b, n, c_out)``, ``pos (b, n, 2)``, ``weights (b, n)``, ``mask (b, n)`` (True on
real nodes), ``boundary (b, n)``, ``indices (b,)`` (file sample numbers), ``positions (b,)`` (dataset
positions), all 0/False on padding, ``triangles``: a list of the b ``(t_i, 3)`` tensors (for plotting),
and the transform's tensors: per node ``(n_i, …)`` padded as ``x``, fixed-shape ones stacked.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset

from ..loading import as_indices
from ..hdf5_files import file_attrs, open_h5
from .storage import open_mesh_h5, read_offsets, read_rows, read_sample


class MeshDataset(Dataset):
    """Samples ``indices`` of one variant (mesh level) of a mesh dataset file, read one at a time."""

    def __init__(self, path: str | os.PathLike, variant: str, indices: np.ndarray, offsets: dict[str, np.ndarray],
                 attrs: dict[str, Any], dtype: torch.dtype = torch.float32, transform: Callable | None = None,
                 memory: tuple[dict, dict] | None = None):
        self.path = Path(path)
        self.memory = memory  # (arrays, offsets into them) of read_rows, or None: read from the file
        self.transform = transform
        self._extras: dict[int, dict] = {}  # transform outputs, computed once per sample and process
        self.variant = variant
        self.indices = np.asarray(indices, dtype=np.int64)
        self.offsets = offsets  # of every complete sample of the file (small), not only ours
        self.attrs = attrs
        self.kind = attrs.get("kind")
        self.dtype = dtype
        self._h5 = None
        self._pid = None

    # one handle per process: h5py handles must not cross a fork
    def _group(self):
        if self._h5 is None or self._pid != os.getpid():
            self._h5, self._pid = open_h5(self.path), os.getpid()
        return self._h5[self.variant]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_h5"] = state["_pid"] = None
        return state

    def close(self) -> None:
        if self._h5 is not None and self._pid == os.getpid():
            self._h5.close()
        self._h5 = self._pid = None

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def node_counts(self) -> np.ndarray:
        """(len,) nodes of each sample (from the offsets, nothing read)."""
        return np.diff(self.offsets["node"])[self.indices]

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"item {i} out of range for a MeshDataset of {len(self)} samples")
        index = int(self.indices[i])
        if self.memory is None:
            raw = read_sample(self._group(), index, self.offsets)
        else:
            arrays, offsets = self.memory
            raw = read_sample(arrays, index, offsets)
        bad = [k for k in ("points", "weights", "x", "y") if not np.isfinite(raw[k]).all()]
        if bad:
            raise ValueError(f"{self.path}: sample {index} ({self.variant}) has NaN/Inf in {bad} (an unfinished or "
                             f"corrupt file); regenerate or re-import it")
        item = {
            "x": torch.from_numpy(raw["x"]).to(self.dtype),
            "y": torch.from_numpy(raw["y"]).to(self.dtype),
            "pos": torch.from_numpy(raw["points"]).to(self.dtype),
            "weights": torch.from_numpy(raw["weights"]).to(self.dtype),
            "boundary": torch.from_numpy(raw["boundary"]),
            "triangles": torch.from_numpy(raw["triangles"]),
            "index": index,
            "position": i % len(self),
        }
        if self.transform is not None:
            if index not in self._extras:
                self._extras[index] = self.transform(item)
            item.update(self._extras[index])
        return item

    def with_transform(self, transform: Callable | None) -> "MeshDataset":
        """The same samples, items extended by ``transform(item)`` (a dict of tensors, per node or of a fixed shape)."""
        return self._replace(transform=transform)

    def in_memory(self) -> "MeshDataset":
        """The same samples read into memory now, one read per array over the rows from the first to the
        last of them (a split of consecutive samples: exactly its own); items then touch no file."""
        if self.memory is not None or not len(self):
            return self
        first, stop = int(self.indices.min()), int(self.indices.max()) + 1
        return self._replace(memory=read_rows(self._group(), self.offsets, first, stop))

    def subset(self, indices: Any) -> "MeshDataset":
        """The items ``indices`` (positions in this dataset: a slice, range or integer sequence) as a new
        dataset over the same file (or the same samples in memory); nothing is read."""
        return self._replace(indices=self.indices[as_indices(indices, len(self))])

    def _replace(self, **changes: Any) -> "MeshDataset":
        """A new dataset over the same file with ``changes`` to its constructor's arguments."""
        same = dict(path=self.path, variant=self.variant, indices=self.indices, offsets=self.offsets,
                    attrs=self.attrs, dtype=self.dtype, transform=self.transform, memory=self.memory)
        return MeshDataset(**{**same, **changes})

    def shard(self, rank: int, world_size: int) -> "MeshDataset":
        """Rank ``rank``'s share of ``world_size`` (items rank, rank + world_size, ...; as a
        DistributedSampler without shuffling): each process reads only its own samples."""
        if not (isinstance(world_size, int) and world_size >= 1 and isinstance(rank, int) and 0 <= rank < world_size):
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank!r}, world_size={world_size!r}")
        return self.subset(slice(rank, None, world_size))

    def __repr__(self) -> str:
        counts = self.node_counts
        nodes = f", nodes {counts.min():,}..{counts.max():,}" if len(counts) else ""
        return (f"MeshDataset({str(self.path)!r}, kind={self.kind!r}, level={self.variant!r}, "
                f"samples={len(self)}{nodes})")


def mesh_levels(attrs: dict[str, Any]) -> list[str]:
    return json.loads(attrs["levels"])


def _variant(levels: Sequence[str], level: str | int | None, path: Path) -> str:
    if level is None:
        if len(levels) == 1:
            return levels[0]
        raise ValueError(f"{path} stores each sample on several meshes; choose level= one of {list(levels)}")
    name = f"level{level}" if isinstance(level, (int, np.integer)) and not isinstance(level, bool) else level
    if name not in levels:
        raise ValueError(f"{path} has no mesh level {name!r}; it has {list(levels)}")
    return name


def open_mesh_dataset(path: str | os.PathLike, level: str | int | None = None, indices: Any = None, *,
                      dtype: torch.dtype = torch.float32, transform: Callable | None = None) -> MeshDataset:
    """Samples ``indices`` (default: every complete one; a slice, range or integer sequence) of mesh level
    ``level`` (a name such as ``"level2"`` or ``"remesh"``, or r for ``"level{r}"``; may be omitted for a
    file with one mesh per sample) as a lazily read [`MeshDataset`][]."""
    path = Path(path)
    with open_mesh_h5(path) as h5:
        attrs = file_attrs(h5)
        variant = _variant(mesh_levels(attrs), level, path)
        n = int(attrs["n_complete"])
        if n < int(attrs["n_samples"]):
            warnings.warn(f"{path} is incomplete ({n} of {attrs['n_samples']} samples); loading the complete ones "
                          f"(rerun the generation to finish it)", stacklevel=2)
        offsets = read_offsets(h5[variant], n)
    return MeshDataset(path, variant, as_indices(indices, n), offsets, attrs, dtype, transform)


def collate_points(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pad items of [`MeshDataset`][] (different node counts) into one point-set batch (module docstring)."""
    if not isinstance(samples, Sequence) or isinstance(samples, (str, bytes)):
        raise TypeError(f"collate_points takes a list of MeshDataset items (dicts), got {type(samples).__name__}")
    if not samples:
        raise ValueError("collate_points needs at least one sample")
    for k, s in enumerate(samples):  # names only: nothing is read
        if not isinstance(s, Mapping):
            raise TypeError(f"collate_points: item {k} is a {type(s).__name__}, not a MeshDataset item (a dict)")
        missing = sorted(_ITEM_KEYS - {"position"} - s.keys())  # "position": optional, defaults to k
        if missing:
            raise ValueError(f"collate_points: item {k} lacks {missing}; items are what MeshDataset gives "
                             f"(x, y, pos, weights, boundary, triangles, index)")
    batch = {name: pad_sequence([s[name] for s in samples], batch_first=True)
             for name in ("x", "y", "pos", "weights", "boundary")}
    batch["mask"] = pad_sequence([torch.ones(len(s["x"]), dtype=torch.bool) for s in samples], batch_first=True)
    batch["indices"] = torch.tensor([int(s["index"]) for s in samples], dtype=torch.long)
    batch["positions"] = torch.tensor([int(s.get("position", k)) for k, s in enumerate(samples)], dtype=torch.long)
    batch["triangles"] = [s["triangles"] for s in samples]
    for name in samples[0].keys() - _ITEM_KEYS:  # the transform's tensors: per node, or of one shape (stacked)
        batch[name] = pad_sequence([s[name] for s in samples], batch_first=True)
    return batch


_ITEM_KEYS = {"x", "y", "pos", "weights", "boundary", "triangles", "index", "position"}


__all__ = ["MeshDataset", "collate_points", "mesh_levels", "open_mesh_dataset"]
