"""Gaussian normalizers, point-wise or global (the inverse problem's input noise: [`noise`][]).

``encode(x) = (x - mean) / (std + eps)``, ``decode(z) = z (std + eps) + mean`` (exact inverses), with
``mean``/``std`` of shape ``(*grid, c)`` (point-wise, the FNO/Galerkin Transformer recipe) or scalars
(global). ``std`` is the unbiased sample standard deviation (as ``torch.std``).

Fit on the training split only: ``fit_normalizer(path, "x", indices=range(1000))`` streams the file in
blocks at the native resolution (float64 accumulators, Chan's pairwise update), so the statistics exist
at every resolution; ``at_resolution(r)`` strides them exactly as the data are strided, which equals
fitting at ``r`` directly. For the inverse problem's pooled target the statistics are fitted on the pooled
grid itself and cannot be re-strided (refit for another coarse grid).

F fields per state (channel ``s F + f`` field f of state s): ``fields=F``.  Point-wise statistics are per
channel, so per field already; global ones one per field ``(F,)`` over the channels ``f, f + F, ...``,
broadcast back to any ``(..., S F)``; ``fields=1``: the statistics and saved state as without the option.
Checkpoints: ``to_state()`` (tensors, plain values: ``weights_only=True`` safe), ``from_state`` rebuilds.
"""
from __future__ import annotations

import itertools
import math
import numbers
import os
from typing import Any, Mapping

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from ..common.host import to_numpy
from ..grids.transfer import interpolate_field, prolong, restrict_points
from .windows import Window
from .loading import as_indices, open_source, read_pooled, resolve_kind, target_grid
from .recipes import get_recipe
from .sampling import allowed_resolutions, cell_average, grid_strides, stride_for


def _interpolate_nodes(field: torch.Tensor, resolution: int) -> torch.Tensor:
    """``field (*grid, c)`` on a node grid (``x_i = i/(n-1)`` per axis, 1-D or 2-D) -> the (bi)linear
    interpolant at ``resolution`` nodes per axis ([`petrov.grids.transfer.prolong`][])."""
    ndim = field.dim() - 1
    if ndim not in (1, 2):
        raise ValueError(f"interpolating statistics needs a 1-D or 2-D grid, got {tuple(field.shape[:-1])}")
    z = torch.movedim(field.double(), -1, 0)[None]
    out = prolong(z, (resolution,) * ndim)
    return torch.movedim(out[0], 0, -1).to(field.dtype).contiguous()


def _check_eps(eps: Any) -> float:
    """``eps`` as a float; ValueError unless it is a finite number > 0 (inf would encode everything to 0)."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0 (e.g. 1e-5), got {eps!r}")
    return float(eps)


def _check_floating(x: Any, name: str) -> None:
    """A normalizer's input must be a floating tensor: the statistics cast to an integer dtype would
    truncate (std + eps -> 0, so division by zero)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}; convert it first ({name}.float())")


def check_fields(fields: Any) -> int:
    """``fields`` (fields per state) as an int; ValueError unless it is an integer >= 1."""
    if isinstance(fields, bool) or not isinstance(fields, (int, np.integer)) or fields < 1:
        raise ValueError(f"fields must be an integer >= 1 (fields per state), got {fields!r}")
    return int(fields)


def check_channels(channels: int, fields: int, what: str = "data") -> None:
    """ValueError unless ``channels`` splits into whole states of ``fields`` fields."""
    if channels % fields:
        raise ValueError(f"{what} has {channels} channels, not a whole number of states of {fields} fields "
                         f"(channel s*{fields} + f is field f of state s); check the fields per state")


def _check_state(state: Any) -> None:
    """TypeError unless ``state`` is a mapping (what ``to_state()`` gives)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"a normalizer state must be the dict to_state() gives, got {type(state).__name__}")


class PointwiseGaussianNormalizer:
    """Gaussian normalizer; ``mean``/``std`` ``(*grid, c)`` tensors (point-wise) or 0-d tensors (global).

    ``periodic`` and ``cells`` (the grid kind) drive [`at_resolution`][]; ``strideable=False`` marks
    statistics that are not point values of a finer grid (the pooled inverse target); ``fields``: per state.
    """

    def __init__(self, mean, std, eps: float = 1e-5, *, periodic: bool = False, strideable: bool = True,
                 cells: bool = False, fields: int = 1):
        mean, std = torch.as_tensor(mean), torch.as_tensor(std)
        if mean.shape != std.shape:
            raise ValueError(f"mean and std shapes differ: {tuple(mean.shape)} vs {tuple(std.shape)}")
        if not (torch.isfinite(mean).all() and torch.isfinite(std).all()) or (std < 0).any():
            raise ValueError("normalizer statistics must be finite with std >= 0")
        self.fields = F = check_fields(fields)
        if F > 1 and (mean.shape[-1:] != (F,) if mean.dim() < 2 else mean.shape[-1] % F):
            raise ValueError(f"statistics of {F} fields are ({F},) (global) or (*grid, S*{F}) (point-wise), got "
                             f"{tuple(mean.shape)}")
        self.mean, self.std, self.eps = mean, std, _check_eps(eps)
        self.periodic, self.strideable, self.cells = bool(periodic), bool(strideable), bool(cells)

    def _like(self, mean: torch.Tensor, std: torch.Tensor, **changed: Any) -> "PointwiseGaussianNormalizer":
        """A normalizer of these settings (``changed`` replaced) holding ``mean``/``std``."""
        settings = dict(eps=self.eps, periodic=self.periodic, strideable=self.strideable, cells=self.cells,
                        fields=self.fields)
        return PointwiseGaussianNormalizer(mean, std, **{**settings, **changed})

    @property
    def pointwise(self) -> bool:
        """Statistics per grid point ``(*grid, c)``; else global (a scalar, or one per channel ``(c,)``)."""
        return self.mean.dim() >= 2

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(self.mean.shape[:-1]) if self.pointwise else ()

    def _stats_like(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _check_floating(x, "x")
        if self.pointwise and tuple(x.shape[-self.mean.dim():]) != tuple(self.mean.shape):
            raise ValueError(
                f"data of shape {tuple(x.shape)} does not end with the normalizer's grid {tuple(self.mean.shape)}; "
                f"use at_resolution() for another resolution"
            )
        mean, scale = self.mean, self.std + self.eps
        if self.fields > 1 and not self.pointwise:  # one per field: channel s F + f takes field f's
            check_channels(x.shape[-1] if x.dim() else 0, self.fields)
            mean, scale = (t.repeat(x.shape[-1] // self.fields) for t in (mean, scale))
        return mean.to(x.device, x.dtype), scale.to(x.device, x.dtype)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / (std + eps)`` for ``x (..., *grid, c)``."""
        mean, scale = self._stats_like(x)
        return (x - mean) / scale

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``z (std + eps) + mean``; inverse of [`encode`][]."""
        mean, scale = self._stats_like(z)
        return z * scale + mean

    def reaches(self, resolution: int) -> bool:
        """Whether [`at_resolution`][] can take the statistics to ``resolution`` points per axis:
        global statistics anywhere; pooled ones only their own grid; periodic grids their strided
        sub-grids; node grids any size >= 2 (strided, else interpolated).  The one rule for where a
        trained operator may be evaluated."""
        if not self.pointwise or self.grid[0] == resolution:
            return True
        if not self.strideable:
            return False
        if self.periodic or self.cells:
            return resolution in allowed_resolutions(self.grid[0], self.periodic, self.cells)
        return resolution >= 2

    def at_resolution(self, resolution: int) -> "PointwiseGaussianNormalizer":
        """The normalizer for data at ``resolution`` points per axis: the statistics strided as the data
        are strided (exactly what fitting there gives); on a node grid that is no strided sub-grid
        (e.g. 211 from 141), the mean and std fields (multi)linearly interpolated in physical
        coordinates, so an operator takes inputs at any resolution of its domain."""
        if not self.pointwise or (self.grid and self.grid[0] == resolution):
            return self
        if not self.strideable:
            raise ValueError(
                f"these statistics were fitted on a pooled {self.grid} grid and cannot be strided to "
                f"{resolution}; fit a normalizer at that coarse resolution instead"
            )
        if self.cells:  # block averages, as the data are coarsened (the std so is a scale, not a fit)
            k, n = stride_for(self.grid[0], resolution, False, cells=True), len(self.grid)
            mean, std = (torch.from_numpy(cell_average(to_numpy(t), k, 0, n)).to(t.device) for t in (self.mean, self.std))
            return self._like(mean, std, periodic=False)
        try:
            stride = stride_for(self.grid[0], resolution, self.periodic)
        except ValueError:
            if self.periodic or isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < 2:
                raise
            return self._like(_interpolate_nodes(self.mean, resolution), _interpolate_nodes(self.std, resolution))
        sel = (slice(None, None, stride),) * len(self.grid)
        return self._like(self.mean[sel].clone(), self.std[sel].clone())

    def first_channels(self, k: int) -> "PointwiseGaussianNormalizer":
        """The statistics of the first ``k`` channels (a trajectory's given states, ``history * fields``
        channels: the input's normalizer is its target's first states, so a state has the same units in and
        out); global statistics (one, or one per field) as they are."""
        check_channels(k, self.fields, "the first channels asked for")
        if self.mean.dim() == 0 or (self.fields > 1 and not self.pointwise):
            return self
        return self._like(self.mean[..., :k].clone(), self.std[..., :k].clone())

    def to(self, device=None, dtype=None) -> "PointwiseGaussianNormalizer":
        return self._like(self.mean.to(device, dtype), self.std.to(device, dtype))

    def to_state(self) -> dict[str, Any]:
        state = {"mean": self.mean.detach().cpu(), "std": self.std.detach().cpu(), "eps": self.eps,
                 "periodic": self.periodic, "strideable": self.strideable, "cells": self.cells}
        if self.fields > 1:  # a single field's state stays as it always was
            state["fields"] = self.fields
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PointwiseGaussianNormalizer":
        _check_state(state)
        try:
            return cls(state["mean"], state["std"], state["eps"], periodic=state["periodic"],
                       strideable=state["strideable"], cells=state["cells"], fields=state.get("fields", 1))
        except KeyError as err:
            raise KeyError(f"normalizer state is missing {err.args[0]!r}; was it saved by to_state()?") from None

    @classmethod
    def fit(cls, data: torch.Tensor, *, pointwise: bool = True, eps: float = 1e-5, periodic: bool = False,
            strideable: bool = True, fields: int = 1) -> "PointwiseGaussianNormalizer":
        """Statistics of in-memory samples ``data (N, *grid, c)`` over the sample axis (or all entries; per
        field with ``fields > 1``: over every entry of channels ``f, f + F, ...``, ``(F,)``)."""
        if data.shape[0] < 2:
            raise ValueError("fitting a normalizer needs at least 2 samples")
        fields = check_fields(fields)
        check_channels(data.shape[-1], fields)
        d = data.double()
        d = d.reshape(-1, fields) if fields > 1 and not pointwise else d  # column f: every entry of field f
        mean, std = (d.mean(0), d.std(0)) if pointwise or fields > 1 else (d.mean(), d.std())
        return cls(mean.float(), std.float(), eps, periodic=periodic, strideable=strideable, fields=fields)

    def __repr__(self) -> str:
        what = f"grid={self.grid}" if self.pointwise else "global"
        more = f", fields={self.fields}" if self.fields > 1 else ""
        return f"PointwiseGaussianNormalizer({what}{more}, eps={self.eps})"


def UnitGaussianNormalizer(mean: float, std: float, eps: float = 1e-5) -> PointwiseGaussianNormalizer:
    """The global variant: scalar ``mean``/``std`` (valid at every resolution)."""
    return PointwiseGaussianNormalizer(torch.tensor(float(mean)), torch.tensor(float(std)), eps)


class _RunningMoments:
    """Per-entry count, mean and sum of squared deviations, merged block by block (Chan et al.)."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, block: np.ndarray, axis) -> None:
        block = block.astype(np.float64)
        nb = block.size if axis is None else block.shape[0]
        mb = block.mean(axis=axis)
        m2b = ((block - mb) ** 2).sum(axis=axis)
        n = self.n + nb
        delta = mb - self.mean
        self.mean = self.mean + delta * (nb / n)
        self.m2 = self.m2 + m2b + delta**2 * (self.n * nb / n)
        self.n = n


def fit_normalizer(
    path: str | os.PathLike,
    field: str = "x",
    indices: Any = None,
    *,
    pointwise: bool = True,
    eps: float = 1e-5,
    kind: str | None = None,
    resolution: int | None = None,
    coarse_resolution: int | None = None,
    block: int = 32,
    window: Window | None = None,
    fields: int = 1,
) -> PointwiseGaussianNormalizer:
    """Fit on samples ``indices`` (the TRAINING split) of model input ``field="x"`` or target ``"y"``.

    Fields are named as the loader returns them (for ``darcy-inverse``, ``x`` is u and ``y`` the pooled a).
    Point values are read at the native resolution, block by block; call ``.at_resolution(r)`` for data
    loaded at ``r``. The pooled inverse target is fitted at ``resolution`` (the input grid, default native)
    pooled to ``coarse_resolution`` (default: the file's), exactly as ``open_dataset`` builds it; for
    point values ``resolution`` is not used, but it must still be one the file can be loaded at.  ``window``:
    a trajectory file's window of states, as ``open_dataset`` reads it (``x`` its given states, ``y`` all of it).
    ``pointwise=False``: one mean and std over every sample, point and channel; with ``fields = F > 1``
    one per field (channels ``f, f + F, ...``; module docstring).
    """
    fields = check_fields(fields)
    if field not in ("x", "y"):
        raise ValueError(f"field must be 'x' (model input) or 'y' (target), got {field!r}")
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be an integer >= 1 (samples read at a time), got {block!r}")
    with open_source(path) as src:
        recipe = get_recipe(resolve_kind(src, kind))
        idx = as_indices(indices, src.n_complete)
        if len(idx) < 2:
            raise ValueError("fitting a normalizer needs at least 2 training samples")
        stored = {"x": "y", "y": "x"}[field] if recipe.inverse else field
        pooled = recipe.inverse and field == "y"
        if len(set(src.grid_shape)) > 1 and pointwise:  # at_resolution strides by one number of points
            raise ValueError(f"{path}: point-wise statistics of a rectangular grid {src.grid_shape} do not follow it "
                             'to other resolutions; use data.normalizer = "global" (one mean and std per field)')
        stride = grid_strides(src.grid_shape, src.grid_kinds, resolution)[0]  # checked even where unused
        window = Window() if src.time_series and window is None else window  # a series: its first state in
        if pooled:
            coarse = target_grid(recipe, src.attrs, coarse_resolution)
        moments = _RunningMoments()
        for lo in range(0, len(idx), block):
            part = idx[lo : lo + block]
            if pooled:
                data = read_pooled(src, part, stride, coarse)[..., None]
            elif window is not None:
                data = window.apply(src.read_channels("y", part, 1), str(src.path),
                                    field_axis=src.time_series)[field == "y"]
            else:
                data = src.read_channels(stored, part, 1)
            check_channels(data.shape[-1], fields, f"{path}: field {field!r}")
            per_field = fields > 1 and not pointwise  # column f: every entry of field f
            moments.add(data.reshape(-1, fields) if per_field else data, axis=0 if pointwise or per_field else None)
        std = np.sqrt(moments.m2 / (moments.n - 1))
        return PointwiseGaussianNormalizer(
            torch.as_tensor(moments.mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32), eps,
            periodic=src.periodic, strideable=not pooled, cells=src.cells, fields=fields,
        )


class FieldNormalizer:
    """Gaussian normalizer of point-set (mesh) data whose mean and std are functions on ``[0, 1]²``:
    values at the nodes of an ``m x m`` node grid, ``mean, std: (m, m, c)``, evaluated at each point by
    bilinear interpolation.  The point-wise normalizer of grid data generalized to any mesh (the
    statistics at a point of the domain, whatever mesh it is a node of).

    ``encode(x, pos) = (x - mean(pos)) / (std(pos) + eps)``, ``decode(z, pos)`` its inverse, with ``x:
    (b, n, c)`` at ``pos: (b, n, 2)``.  Fit with [`fit_point_normalizer`][]."""

    field = True
    pointwise = False
    grid: tuple[int, ...] = ()

    def __init__(self, mean, std, eps: float = 1e-5):
        mean, std = torch.as_tensor(mean), torch.as_tensor(std)
        if mean.shape != std.shape or mean.dim() != 3 or mean.shape[0] < 2 or mean.shape[1] < 2:
            raise ValueError(f"field statistics must be (m, m, c) node grids of equal shape, got "
                             f"{tuple(mean.shape)} and {tuple(std.shape)}")
        if not (torch.isfinite(mean).all() and torch.isfinite(std).all()) or (std < 0).any():
            raise ValueError("normalizer statistics must be finite with std >= 0")
        self.mean, self.std, self.eps = mean, std, _check_eps(eps)

    def _stats_at(self, x: torch.Tensor, pos: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        _check_floating(x, "x")
        if pos is None or pos.dim() != 3 or pos.shape[:2] != x.shape[:2] or x.shape[-1] != self.mean.shape[-1]:
            raise ValueError(f"a field normalizer needs the points: x (b, n, {self.mean.shape[-1]}) and pos (b, n, 2), "
                             f"got x {tuple(x.shape)} and pos {None if pos is None else tuple(pos.shape)}")
        stats = torch.cat([self.mean, self.std + self.eps], dim=-1).to(x.device, x.dtype)
        both = interpolate_field(stats, pos)
        c = self.mean.shape[-1]
        return both[..., :c], both[..., c:]

    def encode(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        mean, scale = self._stats_at(x, pos)
        return (x - mean) / scale

    def decode(self, z: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        mean, scale = self._stats_at(z, pos)
        return z * scale + mean

    def reaches(self, resolution: Any) -> bool:
        return True

    def at_resolution(self, resolution: Any) -> "FieldNormalizer":
        return self

    def to(self, device=None, dtype=None) -> "FieldNormalizer":
        return FieldNormalizer(self.mean.to(device, dtype), self.std.to(device, dtype), self.eps)

    def to_state(self) -> dict[str, Any]:
        return {"kind": "field", "mean": self.mean.detach().cpu(), "std": self.std.detach().cpu(), "eps": self.eps}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "FieldNormalizer":
        _check_state(state)
        return cls(state["mean"], state["std"], state["eps"])

    def __repr__(self) -> str:
        return f"FieldNormalizer(grid={tuple(self.mean.shape[:2])}, eps={self.eps})"


def normalizer_from_state(state: dict[str, Any] | None) -> Any:
    """A fitted normaliser from its ``to_state()`` dict (None: no normaliser)."""
    if state is None:
        return None
    if isinstance(state, Mapping) and state.get("kind") == "field":  # else from_state says what is wrong
        return FieldNormalizer.from_state(state)
    return PointwiseGaussianNormalizer.from_state(state)


_FIT_BATCH = 64  # samples per restriction when fitting a FieldNormalizer
_SPACING_SAMPLES = 100  # samples read to measure a point-set dataset's node spacing
MAX_STATISTICS_GRID = 257  # nodes per axis of the finest statistics grid chosen from the data


def statistics_grid_size(dataset: Any) -> int:
    """The nodes per axis of a [`FieldNormalizer`][]'s statistics grid as fine as the dataset's
    meshes: ``1 + round(1 / h)``, ``h`` the median over (up to 100, evenly spaced) samples of the
    median of ``sqrt(w_j)`` over each sample's nodes — a node's quadrature weight is its share of
    the area, so ``sqrt(w)`` is the node spacing (on a uniform grid of spacing ``h`` the interior
    weights are ``h²``, and the statistics grid is that grid).  At least 2, at most 257."""
    picks = np.unique(np.linspace(0, len(dataset) - 1, min(len(dataset), _SPACING_SAMPLES)).round().astype(int))
    spacing = [float(dataset[int(k)]["weights"].double().clamp_min(0).sqrt().median()) for k in picks]
    h = float(np.median(spacing))
    if not h > 0:
        raise ValueError("the samples' quadrature weights are zero: no node spacing to size the normalizer's grid")
    return int(min(MAX_STATISTICS_GRID, max(2, 1 + round(1 / h))))


def fit_point_normalizer(dataset: Any, field: str = "x", *, centered: bool = True, size: int | None = None,
                         eps: float = 1e-5) -> FieldNormalizer:
    """Statistics of a point-set dataset's ``field`` (``"x"`` or ``"y"``) over all its samples (the
    TRAINING split) as functions on ``[0, 1]²``: at each node ``ξ_i`` of a ``size x size`` node grid,

        mean_i = Σ_s Σ_j φ_i(x_j) w_j u_j / Σ_s Σ_j φ_i(x_j) w_j,   std_i² = (same with u²) - mean_i²

    (φ_i the grid's hat functions, w the samples' quadrature weights): the mean and standard deviation
    of the field near ``ξ_i`` over the samples whose domain reaches there, each node weighted by its
    quadrature weight, so nodes crowded where a mesh is fine do not outweigh the rest.  Grid nodes that
    no sample reaches take the statistics over everything.  ``dataset`` yields items with ``field
    (n, c)``, ``pos (n, 2)`` and ``weights (n,)`` (e.g. a ``MeshDataset``), read one at a time.

    ``size=None``: as fine as the samples' meshes ([`statistics_grid_size`][]); finer follows sharper
    structure (the boundary layer of a solution that vanishes on the boundary), and on a grid stored
    as a mesh, at the grid's resolution, these are the grid's point-wise statistics.

    ``centered=False``: a scale only (mean 0, the root mean square as std), so zeros stay zeros."""
    if field not in ("x", "y"):
        raise ValueError(f"field must be 'x' (model input) or 'y' (target), got {field!r}")
    if len(dataset) < 2:
        raise ValueError("fitting a normalizer needs at least 2 samples")
    size = statistics_grid_size(dataset) if size is None else size
    grid = (size, size)
    mass, first, second = 0.0, 0.0, 0.0
    items = iter(dataset)
    # samples restricted _FIT_BATCH at a time, padded with zero weights (which add nothing to the sums)
    while chunk := list(itertools.islice(items, _FIT_BATCH)):
        u, pos, w = (pad_sequence([item[name].double() for item in chunk], batch_first=True)
                     for name in (field, "pos", "weights"))
        values, m = restrict_points(torch.cat([u, u.square()], dim=-1), pos, w, grid)
        c = u.shape[-1]
        mass = mass + m.sum(0)
        first = first + (m[..., None] * values[..., :c]).sum(0)
        second = second + (m[..., None] * values[..., c:]).sum(0)
    reached = (mass > 0)[..., None]
    total = mass.sum()
    overall = (first.sum((0, 1)) / total, second.sum((0, 1)) / total)
    safe = torch.where(reached, mass[..., None], 1.0)
    mean1 = torch.where(reached, first / safe, overall[0])
    mean2 = torch.where(reached, second / safe, overall[1])
    mean = mean1 if centered else torch.zeros_like(mean1)
    std = (mean2 - mean.square()).clamp_min(0.0).sqrt()
    return FieldNormalizer(mean.float(), std.float(), eps)
