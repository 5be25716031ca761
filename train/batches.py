"""How batches reach the device: ``Batches``, one epoch's ``Batch`` objects.

Two ways, the same batches in the same order -- the sampler's (``DistributedSampler``: a function of
(seed, epoch) only), so a run is reproducible and a distributed run equals one process:

- *resident* (``ResidentSplit``): a grid split whose size fits the device (at most
  ``RESIDENT_FRACTION`` of its free memory) is copied there once: one held in memory (on the CPU it is
  there already), or on a CUDA device one read lazily from its file, block by block (``RESIDENT_BLOCK``
  samples at a time: the host holds one block, never the split; under torchrun every rank reads the
  whole split once, which is what makes it cheap to use any of its samples in any epoch).  Per epoch
  the sampler's order is copied once; a batch is an ``index_select`` there, its coordinates a view of one device copy, and the input noise is looked up
  in a table drawn once (the same draws ``InputNoise`` makes per sample): no host work per step.
- *loader*: ``petrov.train.data``'s DataLoader (samples read per batch: lazily read grid files on the
  CPU, meshes, data too large for the device), in page-locked memory with non-blocking copies on CUDA.

An epoch can start at a later step (``Batches.iterate(start)``: a run resumed where it was stopped,
``petrov.train.preemption``): the same order, its first ``start`` batches left out and not read.

Static shapes (``static=True``: CUDA graphs replay the shapes they captured): the last partial batch is
padded to the full batch size with copies of its own first samples, weighted 0 (``Batch.sample_weight``).
Padding rather than dropping keeps the optimization of an eager run: every sample is seen every epoch, the
number of steps per epoch (the OneCycle schedule) is unchanged, and the step's loss -- the weighted mean
over the real samples -- is the eager step's loss.  The copies are real samples, so their losses are
finite and a zero weight removes them exactly.  Evaluation scores the first ``Batch.n`` rows only.
Point sets (meshes) are padded per batch to its largest mesh, a node count that changes from batch to
batch; with static shapes every batch of a split is padded to the split's largest mesh instead
(``pad_points``: the padding ``collate_points`` adds, more of it -- zero values and quadrature weights,
``mask`` False), which changes no integral a model takes and no relative L² (quadrature-weighted).
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
RESIDENT_BLOCK = 64  # samples read at a time into a resident split from a lazily read file


def fits_on_device(n_bytes: int, device: torch.device, in_memory: bool = True) -> bool:
    """Whether ``n_bytes`` of data may stay on ``device`` (the CPU: data in memory already, never a
    lazily read split)."""
    if device.type != "cuda":
        return in_memory
    free, _ = torch.cuda.mem_get_info(device)
    return n_bytes <= RESIDENT_FRACTION * free


def _blocks(dataset: Any) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """``(first position, x, y)`` of consecutive blocks of ``RESIDENT_BLOCK`` samples of ``dataset``."""
    for lo in range(0, len(dataset), RESIDENT_BLOCK):
        items = [dataset[k] for k in range(lo, min(lo + RESIDENT_BLOCK, len(dataset)))]
        yield lo, torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])


def _on_device(dataset: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``dataset``'s x and y on ``device``: copied whole if in memory, else filled block by block."""
    if hasattr(dataset, "x"):
        return dataset.x.to(device), dataset.y.to(device)
    x = y = None
    for lo, xb, yb in _blocks(dataset):
        if x is None:
            x = torch.empty((len(dataset), *xb.shape[1:]), dtype=xb.dtype, device=device)
            y = torch.empty((len(dataset), *yb.shape[1:]), dtype=yb.dtype, device=device)
        x[lo:lo + len(xb)], y[lo:lo + len(yb)] = xb.to(device), yb.to(device)
    return x, y


class ResidentSplit:
    """An in-memory grid split on ``device``: ``x``, ``y`` ``(N, *grid, c)``, ``coords`` ``(*grid, d)``,
    ``indices`` (file sample numbers), ``periodic``; input noise tables drawn on first use."""

    def __init__(self, dataset: Any, device: torch.device):
        self.device = device
        self.x, self.y = _on_device(dataset, device)
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
            table = torch.empty_like(self.x)
            for lo in range(0, len(table), RESIDENT_BLOCK):  # drawn on the host a block at a time
                ids = self.indices[lo:lo + RESIDENT_BLOCK]
                table[lo:lo + len(ids)] = add_noise(torch.zeros((len(ids), *self.x.shape[1:]), dtype=self.x.dtype),
                                                    1.0, noise.seed, ids).to(self.device)
            self._noise[key] = _TabledNoise(noise.level, table)
        return self._noise[key]


class _TabledNoise:
    """``x_hat + level · table[positions]``: ``InputNoise.apply`` with the draws made once."""

    def __init__(self, level: float, table: torch.Tensor):
        self.level, self.table = level, table

    def __bool__(self) -> bool:
        return True

    def apply(self, x_hat: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x_hat + self.level * self.table.index_select(0, positions)


def split_bytes(dataset: Any) -> tuple[int, int]:
    """The bytes of a grid split's inputs and of its targets (a lazily read one: from its first sample)."""
    if hasattr(dataset, "x"):
        return dataset.x.nbytes, dataset.y.nbytes
    x, y = dataset[0]
    return len(dataset) * x.nbytes, len(dataset) * y.nbytes


def resident(dataset: Any, device: torch.device, noise: InputNoise | None = None) -> ResidentSplit | None:
    """``dataset`` on ``device`` if it is a grid split that fits there (with its noise table), else None
    (the loader serves it)."""
    in_memory = hasattr(dataset, "x")
    if is_point_data(dataset) or not hasattr(dataset, "coords") or not (in_memory or device.type == "cuda"):
        return None
    x_bytes, y_bytes = split_bytes(dataset)
    n_bytes = x_bytes + y_bytes + (x_bytes if noise else 0)
    return ResidentSplit(dataset, device) if fits_on_device(n_bytes, device, in_memory) else None


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


def pad_points(b: Batch, n_points: int, node_inputs: tuple[str, ...] = ()) -> Batch:
    """A point-set batch ``b`` with its node axis padded to ``n_points`` nodes: zeros (values, coordinates,
    quadrature weights, the boundary flags; the mask False) in ``x``, ``y``, ``pos``, ``weights``, ``mask``,
    ``boundary`` and the model's per-node inputs ``node_inputs``; its other inputs (one shape per sample)
    as they are."""
    extra = n_points - b.x.shape[1]
    if extra < 0:
        raise ValueError(f"pad_points: the batch has {b.x.shape[1]} nodes, more than the {n_points} to pad to")
    if extra == 0:
        return b
    nodal = {"pos", "weights", "mask", "boundary", *node_inputs}

    def pad(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t, t.new_zeros((t.shape[0], extra, *t.shape[2:]))], dim=1)

    inputs = {k: pad(v) if k in nodal else v for k, v in b.inputs.items()}
    return Batch(pad(b.x), pad(b.y), b.positions, inputs, inputs.get("weights"), n=b.n, sample_ids=b.sample_ids,
                 sample_weight=b.sample_weight)


class Batches:
    """One epoch of batches of ``dataset`` (a ``ResidentSplit`` or any dataset the loader reads) in
    ``sampler``'s order, on ``device`` (``static``: every batch ``batch`` rows and, for point sets, as many
    nodes as the largest mesh of ``dataset``, padded with the model's per-node inputs ``node_inputs``;
    see the module docstring)."""

    def __init__(self, dataset: Any, batch: int, sampler, device: torch.device, *, workers: int = 0,
                 static: bool = False, node_inputs: tuple[str, ...] = ()):
        self.dataset, self.batch, self.sampler, self.device, self.static = dataset, batch, sampler, device, static
        self.workers = workers
        self.node_inputs = tuple(node_inputs)
        self.n_points = int(np.max(dataset.node_counts)) if static and is_point_data(dataset) else None
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
        return self.iterate()

    def iterate(self, start: int = 0) -> Iterator[Batch]:
        """The epoch's batches from batch ``start`` (0: all) on; the ones before are not read."""
        return self._resident(start) if self.resident else self._loaded(start)

    def _resident(self, first: int) -> Iterator[Batch]:
        split, b = self.dataset, self.batch
        order = torch.tensor(list(self.sampler)[first * b:], dtype=torch.long).to(self.device)  # one copy per epoch
        for start in range(0, len(order), b):
            idx = order[start:start + b]
            n = len(idx)
            weight = None
            if self.static and n < b:
                idx, weight = idx.index_select(0, padded_rows(n, b, self.device)), sample_weight(n, b, self.device)
            yield Batch(split.x.index_select(0, idx), split.y.index_select(0, idx), idx,
                        {"pos": split.pos(len(idx), self.static)}, n=n, sample_ids=idx, sample_weight=weight)

    def _loaded(self, first: int) -> Iterator[Batch]:
        rest = list(self.sampler)[first * self.batch:]  # a sampler of the batches left
        loader = self.loader if first == 0 else data_loader(self.dataset, self.batch, rest, self.workers,
                                                            pin=self.device.type == "cuda")
        for raw in loader_batches(loader):
            b = to_batch(raw, self.dataset, self.device, self.coords)
            b.sample_ids = self.ids[b.positions]
            if self.n_points is not None:
                b = pad_points(b, self.n_points, self.node_inputs)
            yield pad_batch(b, self.batch) if self.static else b


__all__ = ["Batches", "RESIDENT_BLOCK", "RESIDENT_FRACTION", "ResidentSplit", "fits_on_device", "pad_batch",
           "pad_points", "resident", "split_bytes"]
