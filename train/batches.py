"""How batches reach the device: ``Batches``, one epoch's ``Batch`` objects.

Two ways, the same batches in the same order -- the sampler's (``DistributedSampler``: a function of
(seed, epoch) only), so a run is reproducible and a distributed run equals one process:

- *resident* (``ResidentSplit``): a grid split held in memory as tensors whose size fits the device
  (at most ``RESIDENT_FRACTION`` of its free memory; always on the CPU, where it is in memory
  already) is copied there once.  Per epoch the sampler's order is copied once; a batch is an
  ``index_select`` there, its coordinates a view of one device copy, and the input noise is looked up
  in a table drawn once (the same draws ``InputNoise`` makes per sample): no host work per step.
- *loader*: ``petrov.train.data``'s DataLoader (samples read per batch: lazily read grid files, meshes,
  data too large for the device), in page-locked memory with non-blocking copies on CUDA.

Static shapes (``static=True``: CUDA graphs replay the shapes they captured): the last partial batch is
padded to the full batch size with copies of its own first samples, weighted 0 (``Batch.sample_weight``).
Padding rather than dropping keeps the optimization of an eager run: every sample is seen every epoch, the
number of steps per epoch (the OneCycle schedule) is unchanged, and the step's loss -- the weighted mean
over the real samples -- is the eager step's loss.  The copies are real samples, so their losses are
finite and a zero weight removes them exactly.  Evaluation scores the first ``Batch.n`` rows only.
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import torch

from ..datasets import InputNoise
from ..datasets.noise import add_noise
from .data import Batch, data_loader, is_point_data, sample_ids, to_batch
from .data import batches as loader_batches

# the share of the device's free memory a resident split may take (the rest: the model's activations)
RESIDENT_FRACTION = 0.25


def fits_on_device(n_bytes: int, device: torch.device) -> bool:
    """Whether ``n_bytes`` of data may stay on ``device`` (the CPU: the data are in memory already)."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return n_bytes <= RESIDENT_FRACTION * free


class ResidentSplit:
    """An in-memory grid split on ``device``: ``x``, ``y`` ``(N, *grid, c)``, ``coords`` ``(*grid, d)``,
    ``indices`` (file sample numbers), ``periodic``; input noise tables drawn on first use."""

    def __init__(self, dataset: Any, device: torch.device):
        self.device = device
        self.x, self.y = dataset.x.to(device), dataset.y.to(device)
        self.coords = dataset.coords.to(device)
        self.indices = np.asarray(sample_ids(dataset))
        self.periodic = bool(getattr(dataset, "periodic", False))
        self.resolution = getattr(dataset, "resolution", None)
        self._noise: dict[tuple[float, int], _TabledNoise] = {}
        self._pos: dict[tuple[int, bool], torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self.x)

    def pos(self, b: int, static: bool = False) -> torch.Tensor:
        """The coordinates as a batch ``(b, *grid, d)``: a view, or for CUDA graphs (``static``) one
        contiguous copy per batch size (a captured graph copies its inputs; a view of stride 0 is not
        what it is made for)."""
        key = (b, static)
        if key not in self._pos:
            view = self.coords.unsqueeze(0).expand(b, *self.coords.shape)
            self._pos[key] = view.contiguous() if static else view
        return self._pos[key]

    def noise_for(self, noise: InputNoise) -> Any:
        """``noise`` as a table over this split's samples (apply with a batch's positions); ``noise`` itself
        when it adds nothing."""
        if not noise:
            return noise
        key = (noise.level, noise.seed)
        if key not in self._noise:
            draws = add_noise(torch.zeros(self.x.shape, dtype=self.x.dtype), 1.0, noise.seed, self.indices)
            self._noise[key] = _TabledNoise(noise.level, draws.to(self.device))
        return self._noise[key]


class _TabledNoise:
    """``x_hat + level · table[positions]``: ``InputNoise.apply`` with the draws made once."""

    def __init__(self, level: float, table: torch.Tensor):
        self.level, self.table = level, table

    def __bool__(self) -> bool:
        return True

    def apply(self, x_hat: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x_hat + self.level * self.table.index_select(0, positions)


def resident(dataset: Any, device: torch.device, noise: InputNoise | None = None) -> ResidentSplit | None:
    """``dataset`` on ``device`` if it is a grid split held in memory that fits there (with its noise
    table), else None (the loader serves it)."""
    if is_point_data(dataset) or not all(hasattr(dataset, k) for k in ("x", "y", "coords")):
        return None
    n_bytes = (dataset.x.nbytes + dataset.y.nbytes) + (dataset.x.nbytes if noise else 0)
    return ResidentSplit(dataset, device) if fits_on_device(n_bytes, device) else None


def padded_rows(n: int, size: int, device: torch.device) -> torch.Tensor:
    """Row indices ``0..n-1`` then ``0, 1, ...`` cyclically up to ``size`` rows."""
    return torch.arange(size, device=device) % n


def sample_weight(n: int, size: int, device: torch.device) -> torch.Tensor:
    """``(size,)``: 1 for the first ``n`` rows, 0 for the padding."""
    return (torch.arange(size, device=device) < n).float()


def pad_batch(b: Batch, size: int) -> Batch:
    """``b`` with its rows repeated cyclically up to ``size`` rows (the extra rows weighted 0)."""
    if b.n >= size:
        return b
    device = b.x.device
    rows = padded_rows(b.n, size, device)

    def pad(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.index_select(0, rows.to(t.device))

    return Batch(pad(b.x), pad(b.y), pad(b.positions), {k: pad(v) for k, v in b.inputs.items()}, pad(b.weights),
                 n=b.n, sample_ids=pad(b.sample_ids), sample_weight=sample_weight(b.n, size, device))


class Batches:
    """One epoch of batches of ``dataset`` (a ``ResidentSplit`` or any dataset the loader reads) in
    ``sampler``'s order, on ``device`` (``static``: every batch ``batch`` rows, see the module docstring)."""

    def __init__(self, dataset: Any, batch: int, sampler, device: torch.device, *, workers: int = 0,
                 static: bool = False):
        self.dataset, self.batch, self.sampler, self.device, self.static = dataset, batch, sampler, device, static
        self.resident = isinstance(dataset, ResidentSplit)
        if not self.resident:
            self.loader = data_loader(dataset, batch, sampler, workers, pin=device.type == "cuda")
            self.ids = sample_ids(dataset)
            self.coords = dataset.coords.to(device) if hasattr(dataset, "coords") else None

    def __len__(self) -> int:
        return -(-len(self.sampler) // self.batch)

    def noise_for(self, noise: InputNoise) -> Any:
        """What applies ``noise`` to these batches' inputs, given ``Batch.sample_ids``."""
        return self.dataset.noise_for(noise) if self.resident else noise

    def __iter__(self) -> Iterator[Batch]:
        return self._resident() if self.resident else self._loaded()

    def _resident(self) -> Iterator[Batch]:
        split, b = self.dataset, self.batch
        order = torch.tensor(list(self.sampler), dtype=torch.long).to(self.device)  # one copy per epoch
        for start in range(0, len(order), b):
            idx = order[start:start + b]
            n = len(idx)
            weight = None
            if self.static and n < b:
                idx, weight = idx.index_select(0, padded_rows(n, b, self.device)), sample_weight(n, b, self.device)
            yield Batch(split.x.index_select(0, idx), split.y.index_select(0, idx), idx,
                        {"pos": split.pos(len(idx), self.static)}, n=n, sample_ids=idx, sample_weight=weight)

    def _loaded(self) -> Iterator[Batch]:
        for raw in loader_batches(self.loader):
            b = to_batch(raw, self.dataset, self.device, self.coords)
            b.sample_ids = self.ids[b.positions]
            yield pad_batch(b, self.batch) if self.static else b


__all__ = ["Batches", "RESIDENT_FRACTION", "ResidentSplit", "fits_on_device", "pad_batch", "resident"]
