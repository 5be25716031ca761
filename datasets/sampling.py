"""Resolution rules: which grids a stored grid can be strided to, and average pooling to a coarse grid.

Two grid kinds (see ``petrov.grids.layout.grid_coordinates``):

- periodic, ``x_i = i/n`` (Burgers): stride ``s`` keeps every s-th point, giving ``n/s`` points, so the
  resolution ``r`` must divide ``n`` (8192 -> 4096, 2048, ..., 256, ...);
- nodes, ``x_i = i/(n-1)`` with both boundaries (Darcy): stride ``s`` gives ``(n-1)/s + 1`` points, so
  ``r - 1`` must divide ``n - 1`` (421 -> 211, 141, 106, 85, 61, 43, ...).

Either way the strided grid's points are grid points of the finer grid with the same coordinates.

A third kind, cell-centred grids ``x_i = (i + 1/2)/n`` (finite-volume data such as PDEBench's Darcy
files), is coarsened by averaging: ``n/k`` coarse cells each the union of ``k`` fine cells per axis
(``r`` must divide ``n``: 128 -> 64, 32, 16, ...), valued by the mean of the fine values
([`cell_average`][]). Striding would not do: for an even ``k`` no fine centre lies at a coarse
centre, so the strided points would sit off the coarse cells' centres and the coordinates would lie.
The average is exact for cell averages and second-order accurate for point values at the centres.
"""
from __future__ import annotations

import numpy as np


def _check_native(native: int) -> None:
    """ValueError unless ``native`` (a stored grid's points per axis) is an integer >= 2: smaller grids
    reach no resolution, and a zero would give a zero stride."""
    if isinstance(native, bool) or not isinstance(native, (int, np.integer)) or native < 2:
        raise ValueError(f"native (the stored grid's points per axis) must be an integer >= 2, got {native!r}")


def allowed_resolutions(native: int, periodic: bool, cells: bool = False) -> list[int]:
    """All resolutions (>= 2 points per axis) reachable from ``native`` by an integer stride (by
    averaging blocks of cells on a cell-centred grid, ``cells=True``)."""
    _check_native(native)
    if periodic or cells:
        return [native // s for s in range(native, 0, -1) if native % s == 0 and native // s >= 2]
    return [(native - 1) // s + 1 for s in range(native - 1, 0, -1) if (native - 1) % s == 0]


def stride_for(native: int, resolution: int, periodic: bool, cells: bool = False) -> int:
    """The stride taking a ``native`` grid to ``resolution`` points per axis (on a cell-centred grid,
    ``cells=True``, the number of fine cells per coarse cell and axis); ValueError if none exists."""
    _check_native(native)
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)):
        raise ValueError(f"resolution must be an integer, got {resolution!r}")
    resolution = int(resolution)
    if (periodic or cells) and resolution >= 2 and native % resolution == 0:
        return native // resolution
    if not periodic and resolution >= 2 and (native - 1) % (resolution - 1) == 0:
        return (native - 1) // (resolution - 1)
    rule = (f"cell-centred grid (the resolution must be at least 2 and divide {native}: blocks of cells are "
            f"averaged)" if cells
            else f"periodic grid (the resolution must be at least 2 and divide {native})" if periodic
            else f"node grid (the resolution must be at least 2 and resolution - 1 must divide {native - 1})")
    raise ValueError(
        f"resolution {resolution} is not a strided sub-grid of the native {native}-point {rule}; "
        f"allowed resolutions: {', '.join(map(str, allowed_resolutions(native, periodic, cells)))}"
    )


def _reaches(n: int, stride: int, kind: str) -> bool:
    """Whether ``stride`` is a sub-grid step of an ``n``-point axis of grid ``kind``."""
    return (n - (kind == "nodes")) % stride == 0 and len(range(0, n, stride)) >= 2


def grid_strides(shape: tuple[int, ...], kinds: tuple[str, ...], resolution) -> tuple[int, ...]:
    """One stride per axis of a grid of ``shape`` points (grid ``kinds`` per axis: "periodic", "nodes",
    "cells") for ``resolution``: None (native), one number of points per axis (a pair for 2-D), or an int.
    An int is the points of every axis of a square grid; on a rectangular one, the points along the first
    axis, the others strided alike, allowed only where that is a sub-grid of every axis (else a ValueError
    asking for one number per axis)."""
    if resolution is None:
        return (1,) * len(shape)
    if isinstance(resolution, (tuple, list)):
        if len(resolution) != len(shape):
            raise ValueError(f"resolution {tuple(resolution)} gives {len(resolution)} numbers for a grid of "
                             f"{len(shape)} axes ({' x '.join(map(str, shape))}); give one per axis")
        return tuple(stride_for(n, r, kind == "periodic", kind == "cells") for n, r, kind in zip(shape, resolution, kinds))
    if len(set(shape)) == 1:
        return tuple(stride_for(n, resolution, kind == "periodic", kind == "cells") for n, kind in zip(shape, kinds))
    stride = stride_for(shape[0], resolution, kinds[0] == "periodic", kinds[0] == "cells")
    if not all(_reaches(n, stride, kind) for n, kind in zip(shape[1:], kinds[1:])):
        raise ValueError(f"resolution {resolution} on the {' x '.join(map(str, shape))} grid: a stride of {stride} "
                         f"along the first axis gives no sub-grid of the other axes; give one number of points per axis, "
                         f"e.g. ({resolution}, N)")
    return (stride,) * len(shape)


def strided_shape(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """The points per axis of ``shape`` strided by ``strides`` (or cell-averaged in blocks of them)."""
    return tuple(len(range(0, n, s)) for n, s in zip(shape, strides))


def cell_average(a: np.ndarray, k: int, first_axis: int, ndim: int) -> np.ndarray:
    """Average ``a`` over blocks of ``k`` cells along the ``ndim`` grid axes starting at ``first_axis``:
    a cell-centred grid of ``n`` cells per axis becomes one of ``n/k`` cells (see the module docstring)."""
    if k == 1:
        return a
    shape, axes = list(a.shape[:first_axis]), []
    for d in range(ndim):
        n = a.shape[first_axis + d]
        if n % k:
            raise ValueError(f"a cell-centred axis of {n} cells cannot be averaged in blocks of {k}")
        shape += [n // k, k]
        axes.append(first_axis + 2 * d + 1)
    shape += list(a.shape[first_axis + ndim:])
    return a.reshape(shape).mean(axis=tuple(axes), dtype=np.float64).astype(a.dtype, copy=False)


def poolable(fine: int, coarse: int) -> bool:
    """Whether a ``fine`` node grid average-pools to a ``coarse`` one: ``fine-1 = k (coarse-1)``, k >= 1."""
    return 2 <= coarse <= fine and (fine - 1) % (coarse - 1) == 0


def pool_kernel(fine: int, coarse: int) -> int:
    """Kernel ``k`` of the average pooling from a ``fine`` node grid to a ``coarse`` one: ``fine-1 = k (coarse-1)``."""
    if isinstance(coarse, bool) or not isinstance(coarse, (int, np.integer)) or coarse < 2:
        raise ValueError(f"coarse_resolution must be an integer >= 2, got {coarse!r}")
    if not poolable(fine, coarse):
        options = allowed_resolutions(fine, periodic=False)
        raise ValueError(
            f"coarse_resolution {coarse} is not reachable from the {fine}-point grid by pooling "
            f"((coarse-1) must divide {fine - 1}); allowed: {', '.join(map(str, options))}"
        )
    return (fine - 1) // (coarse - 1)


def average_pool(a: np.ndarray, coarse: int) -> np.ndarray:
    """Average-pool node-grid fields ``a (b, n, n)`` to ``(b, coarse, coarse)``, non-overlapping ``k x k`` blocks.

    ``k = (n-1)/(coarse-1)``. The fine grid is conceptually padded to ``coarse*k`` points per axis, ``(k-1)//2``
    before and the rest after, and each block is averaged over its real (unpadded) points only; block ``j``
    thus covers fine nodes ``j k - (k-1)//2, ..., j k - (k-1)//2 + k - 1`` around the coarse node ``j k``
    (same coordinate ``j/(coarse-1)``). This is the Galerkin Transformer's inverse-Darcy target (its
    ``pooling_2d(..., padding=True)``: NaN padding of ``ceil(n/k) k - n`` split floor-half before, then
    ``nanmean``), written with a sum and a count instead of NaNs. E.g. 141 -> 36 (k = 4), 141 -> 71 (k = 2).
    """
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"average_pool expects (batch, n, n) fields, got shape {a.shape}")
    n = a.shape[1]
    k = pool_kernel(n, coarse)
    if k == 1:
        return a.copy()
    size, left = coarse * k, (k - 1) // 2
    total = np.zeros((a.shape[0], size, size), dtype=np.float64)
    total[:, left : left + n, left : left + n] = a
    count = np.zeros((size, size))
    count[left : left + n, left : left + n] = 1.0
    sums = total.reshape(a.shape[0], coarse, k, coarse, k).sum(axis=(2, 4))
    counts = count.reshape(coarse, k, coarse, k).sum(axis=(1, 3))
    return (sums / counts).astype(a.dtype, copy=False)
