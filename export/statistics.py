"""A fitted normaliser inside an exported graph: fixed statistics, or statistics resampled to the grid size.

A trained operator normalises point-wise, ``x̂ = (x − μ)/(σ + ε)`` and ``y = ŷ (σ + ε) + μ``, with ``μ, σ
(*grid, c)`` fitted at the training file's native grid of ``N`` points per axis and taken to the data's
grid by ``at_resolution`` (strided; block averages on cell grids; linear interpolation on node grids
that are no strided sub-grid).  An export at one resolution holds those restricted statistics as
constants, the very numbers the PyTorch operator uses.  An export whose grid size is a dynamic axis
cannot hold them: they depend on the size.  [`resample`][] computes them in the graph instead, axis by
axis, from the native statistics (in float64):

- node grid ``x_i = i/(m-1)``: the linear interpolant at the nodes, ``(1 − t) s_j + t s_{j+1}`` with
  ``j + t = i (N − 1)/(m − 1)`` (``t = 0`` on a strided sub-grid: the strided values);
- periodic grid ``x_i = i/m``: the same on the torus, ``j + t = i N/m`` and ``j + 1`` taken mod ``N``
  (``t = 0`` on the strided sub-grids ``at_resolution`` allows; between them, where the PyTorch operator
  refuses the size, the graph interpolates linearly);
- cell grid: the mean over the fine cells ``⌊iN/m⌋ .. ⌊(i+1)N/m⌋ − 1`` from prefix sums (``at_resolution``'s
  block averages where ``m`` divides ``N``).

Two gathers per axis (and a prefix sum on cell grids): ``O(m^d)`` work per call, not the ``O(m N^d)`` of
a resampling matrix.  Global statistics (a scalar, or one per channel) are the same at every size.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn


def _symbolic(grid: Sequence[Any]) -> bool:
    return any(isinstance(n, torch.SymInt) for n in grid)


def _along(t: torch.Tensor, axis: int, ndim: int) -> torch.Tensor:
    """``t (m,)`` shaped to broadcast along ``axis`` of a tensor of ``ndim`` dimensions."""
    return t.view([-1 if d == axis else 1 for d in range(ndim)])


def interpolate_axis(s: torch.Tensor, axis: int, m: Any, periodic: bool) -> torch.Tensor:
    """``s`` with axis ``axis`` (``N`` points, a node grid or with ``periodic`` a periodic one) linearly
    interpolated at the ``m`` points of the same kind of grid (module docstring)."""
    n = s.shape[axis]
    i = torch.arange(m, dtype=torch.float64, device=s.device)
    where = i * n / m if periodic else i * (n - 1) / (m - 1)
    low = where.floor() if periodic else where.floor().clamp(max=n - 2)  # the last node: t = 1 in the last cell
    t = _along(where - low, axis, s.dim())
    low = low.long()
    high = (low + 1) % n if periodic else low + 1
    return (1 - t) * s.index_select(axis, low) + t * s.index_select(axis, high)


def average_axis(s: torch.Tensor, axis: int, m: Any) -> torch.Tensor:
    """``s`` with axis ``axis`` (``N`` cells) averaged over ``m`` blocks of cells ``⌊iN/m⌋ .. ⌊(i+1)N/m⌋ − 1``
    (prefix sums and two gathers)."""
    n = s.shape[axis]
    zero = torch.zeros_like(s.narrow(axis, 0, 1))
    prefix = torch.cat([zero, s.cumsum(axis)], dim=axis)
    edges = torch.arange(m + 1, device=s.device) * n // m
    low, high = edges[:-1], edges[1:]
    count = _along((high - low).to(s.dtype), axis, s.dim())
    return (prefix.index_select(axis, high) - prefix.index_select(axis, low)) / count


def resample(stats: torch.Tensor, grid: Sequence[Any], periodic: bool, cells: bool) -> torch.Tensor:
    """Point-wise statistics ``(*native, c)`` taken to ``grid`` (sizes, symbolic ones included) as the
    module docstring says, in float64; ``(*grid, c)``."""
    out = stats.double()
    for axis, m in enumerate(grid):
        out = average_axis(out, axis, m) if cells else interpolate_axis(out, axis, m, periodic)
    return out


class ExportedNormalizer(nn.Module):
    """One fitted normaliser (a ``PointwiseGaussianNormalizer``, or None: the identity) as the graph holds it.

    ``grid``: the grid of the data it meets at the export's example; its ``at_resolution`` statistics there
    are buffers (``mean``, ``scale = std + eps``), used whenever the traced grid is that one.  ``dynamic``:
    the native statistics are kept too (``native_mean``, ``native_std``) and resampled to a symbolic grid
    ([`resample`][]).  [`encode`][] and [`decode`][] compute what the normaliser's own methods compute."""

    def __init__(self, normalizer: Any, grid: Sequence[int], dynamic: bool):
        super().__init__()
        self.identity = normalizer is None
        if self.identity:
            return
        self.eps, self.periodic, self.cells = normalizer.eps, normalizer.periodic, normalizer.cells
        self.pointwise, self.fields = normalizer.pointwise, getattr(normalizer, "fields", 1)
        here = normalizer.at_resolution(int(grid[0])) if self.pointwise and grid else normalizer
        self.register_buffer("mean", here.mean.detach().clone())
        self.register_buffer("scale", (here.std + here.eps).detach().clone())
        # pooled statistics (an inverse model's target) stay on their own grid, which the output keeps
        self.resamples = dynamic and self.pointwise and normalizer.strideable
        if self.resamples:
            self.register_buffer("native_mean", normalizer.mean.detach().clone())
            self.register_buffer("native_std", normalizer.std.detach().clone())

    def statistics(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, scale)`` for data ``z (b, *grid, c)`` in its dtype."""
        grid = tuple(z.shape[1:-1])
        if _symbolic(grid) and self.pointwise:
            if not self.resamples:
                raise ValueError(f"statistics fitted on a pooled {tuple(self.mean.shape[:-1])} grid cannot be "
                                 f"taken to another size; export at a fixed resolution")
            mean = resample(self.native_mean, grid, self.periodic, self.cells)
            std = resample(self.native_std, grid, self.periodic, self.cells)
            return mean.to(z.dtype), (std.to(self.native_std.dtype) + self.eps).to(z.dtype)
        mean, scale = self.mean.to(z.dtype), self.scale.to(z.dtype)
        if self.fields > 1 and not self.pointwise:  # one per field, repeated over the states (channel s F + f)
            mean, scale = (t.repeat(z.shape[-1] // self.fields) for t in (mean, scale))
        return mean, scale

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``(x − μ) / (σ + ε)``."""
        if self.identity:
            return x
        mean, scale = self.statistics(x)
        return (x - mean) / scale

    def decode(self, y_hat: torch.Tensor) -> torch.Tensor:
        """``ŷ (σ + ε) + μ``."""
        if self.identity:
            return y_hat
        mean, scale = self.statistics(y_hat)
        return y_hat * scale + mean


__all__ = ["ExportedNormalizer", "average_axis", "interpolate_axis", "resample"]
