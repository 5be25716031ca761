"""The one place where tensor layouts are converted.

Models take and return channels-last grid tensors ``(b, *grid, c)`` (what datasets store).
Attention works on point clouds ``(b, n, c)``; spectral layers on channels-first grids
``(b, c, *grid)``.  Coordinates of a uniform grid on the unit cube come from
[`grid_coordinates`][], so data, models and plots agree on where the points are.
"""
from __future__ import annotations

import numbers

import torch

from .shape_cache import shape_cached


def grid_to_points(x: torch.Tensor) -> torch.Tensor:
    """``(b, *grid, c) -> (b, n, c)`` with ``n = prod(grid)`` (row-major flattening)."""
    return x.reshape(x.shape[0], -1, x.shape[-1])


def points_to_grid(x: torch.Tensor, grid: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """``(b, n, c) -> (b, *grid, c)``; inverse of [`grid_to_points`][]."""
    return x.reshape(x.shape[0], *grid, x.shape[-1])


class _Relayout(torch.autograd.Function):
    """``x.movedim(src, dst)`` materialized contiguously; its gradient materialized contiguously too.

    A bare ``movedim`` view would hand its consumer a strided tensor, and autograd would hand the
    producer a gradient in the *other* layout (channels-first strides in a channels-last
    encoder, say); every elementwise op of the backward pass then walks memory transposed.  One
    copy each way keeps both sides of the conversion in their own layout.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, src: int, dst: int) -> torch.Tensor:
        ctx.src, ctx.dst = src, dst
        out = x.movedim(src, dst)
        return out.clone() if out.is_contiguous() else out.contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad.movedim(ctx.dst, ctx.src).contiguous(), None, None


def channels_first(x: torch.Tensor) -> torch.Tensor:
    """``(b, *grid, c) -> (b, c, *grid)``, contiguous (and so is its gradient)."""
    return _Relayout.apply(x, -1, 1)


def channels_last(x: torch.Tensor) -> torch.Tensor:
    """``(b, c, *grid) -> (b, *grid, c)``, contiguous (and so is its gradient)."""
    return _Relayout.apply(x, 1, -1)


def _check_grid(grid: object) -> None:
    """ValueError/TypeError unless ``grid`` is a sequence of integers >= 1 (plain Python; a symbolic size of a
    compiled graph is left as it is)."""
    if not isinstance(grid, (tuple, list, torch.Size)):
        hint = f"; for a 1-D grid give ({grid},)" if isinstance(grid, int) and not isinstance(grid, bool) else ""
        raise TypeError(f"grid must be a tuple of grid sizes (integers >= 1), got {type(grid).__name__} "
                        f"{grid!r}{hint}")
    if len(grid) == 0:
        raise ValueError("grid must be a tuple of grid sizes (integers >= 1), got () (no axis)")
    for n in grid:
        if isinstance(n, torch.SymInt):
            continue
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"grid must be a tuple of grid sizes (integers >= 1), got {tuple(grid)!r}")


def node_axis(n: int, dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """``(n,)`` node coordinates ``j/(n-1)`` of ``[0, 1]`` (``torch.linspace(0, 1, n)``).  A symbolic size (an
    export with the grid size as a dynamic axis) is written ``arange(n) / (n - 1)``: ``linspace`` takes a
    concrete count only, and tracing it would fix the exported grid to the example's size."""
    if isinstance(n, torch.SymInt):
        return torch.arange(n, dtype=dtype, device=device) / (n - 1)
    return torch.linspace(0.0, 1.0, n, dtype=dtype, device=device)


def grid_coordinates(
    grid: tuple[int, ...] | torch.Size,
    periodic: bool | tuple[bool, ...] = False,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
    cells: bool = False,
    domain: tuple[tuple[float, float], ...] | None = None,
) -> torch.Tensor:
    """Coordinates ``(*grid, d)`` of a uniform grid on ``[0, 1]^d`` (or on the box ``domain``).

    ``periodic=True``: ``x_i = i / n`` (the point 1 is the point 0, as for Burgers on the torus);
    ``periodic=False``: ``x_i = i / (n - 1)`` (node grid including both boundaries, as for Darcy);
    a tuple of bools chooses per axis; ``cells=True``: ``x_i = (i + 1/2) / n``, the centres of ``n`` cells
    (finite-volume data).  ``domain``: ``((lo, hi), ...)`` per axis, the unit coordinate ``s`` mapped to
    ``lo + (hi - lo) s`` (None: the unit box, numbers as without it).
    Strided sub-grids of the first two kinds keep the same coordinates at shared points.
    ``grid``: a tuple (or list, ``torch.Size``) of integers >= 1, e.g. ``(64,)`` for 64 points in 1-D.
    """
    _check_grid(grid)
    flags = tuple(periodic) if isinstance(periodic, (tuple, list)) else (periodic,) * len(grid)
    axes = []
    for axis, (n, axis_periodic) in enumerate(zip(grid, flags)):
        if cells:
            u = (torch.arange(n, dtype=dtype, device=device) + 0.5) / n
        elif axis_periodic:
            u = torch.arange(n, dtype=dtype, device=device) / n
        else:
            u = node_axis(n, dtype, device)
        if domain is not None:
            lo, hi = domain[axis]
            u = lo + (hi - lo) * u
        axes.append(u)
    mesh = torch.meshgrid(*axes, indexing="ij")
    return torch.stack(mesh, dim=-1)


# the models' default coordinates: built once per (grid, kind, dtype, device) and shared (never modify
# it in place; see petrov.grids.shape_cache)
cached_grid_coordinates = shape_cached(grid_coordinates)
