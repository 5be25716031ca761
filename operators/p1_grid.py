"""The P1 interpolant of nodal values on a triangulation, evaluated at the nodes of a grid.

For a mesh with nodes ``points (n, 2)`` and ``triangles (t, 3)``, the P1 (piecewise-linear)
interpolant of nodal values ``u`` at a point ``y`` inside triangle ``T = (a, b, c)`` is
``λ_a u_a + λ_b u_b + λ_c u_c`` with ``λ`` the barycentric coordinates of ``y`` in ``T``.
[`p1_grid_interpolation`][] finds, once per mesh, the triangle and the barycentric coordinates of
every node of the ``s × s`` node grid ``(i, j)/(s-1)`` of ``[0, 1]²`` (row-major: flat index
``i s + j``, ``x = i/(s-1)`` along the first axis, as [`petrov.grids.layout.grid_coordinates`][]
and ``grid_to_points``); grid nodes outside the mesh get index 0 and weights 0, so the
interpolant is 0 there and ``barycentric.sum(-1)`` is the grid's mask of Ω (1 inside, 0 outside).
[`p1_to_grid`][] applies them to a batch of nodal values.

The point location is matplotlib's trapezoid-map ``TriFinder``; it counts points on the mesh's
boundary edges as inside.
"""
from __future__ import annotations

import numpy as np
import torch


def p1_grid_interpolation(points, triangles, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``points (n, 2)`` in ``[0, 1]²``, ``triangles (t, 3)`` node indices (arrays or tensors), grid of
    ``size`` nodes per axis -> ``index (size², 3)`` int64 node indices and ``barycentric (size², 3)``
    float64, so that ``Σ_k barycentric[g, k] u[index[g, k]]`` is the P1 interpolant at grid node ``g``
    (0 outside the triangulation, whose rows are ``index 0, weights 0``)."""
    pts = np.asarray(points.cpu() if isinstance(points, torch.Tensor) else points, dtype=np.float64)
    tri = np.asarray(triangles.cpu() if isinstance(triangles, torch.Tensor) else triangles)
    if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) < 3:
        raise ValueError(f"points must have shape (n, 2) with n >= 3, got {pts.shape}")
    if tri.ndim != 2 or tri.shape[1] != 3 or len(tri) == 0 or not np.issubdtype(tri.dtype, np.integer):
        raise ValueError(f"triangles must be an integer array of shape (t, 3), t >= 1, got {tri.shape} {tri.dtype}")
    if tri.min() < 0 or tri.max() >= len(pts):
        raise ValueError(f"triangles refer to nodes {tri.min()}..{tri.max()} but there are {len(pts)} points")
    if not np.isfinite(pts).all():
        raise ValueError("points contain NaN or inf")
    if isinstance(size, bool) or not isinstance(size, int) or size < 2:
        raise ValueError(f"size must be an integer >= 2, got {size!r}")
    axis = np.linspace(0.0, 1.0, size)
    gx, gy = (a.ravel() for a in np.meshgrid(axis, axis, indexing="ij"))
    from matplotlib.tri import Triangulation  # here, not at import: matplotlib is ~0.7 s of every start-up

    try:
        found = Triangulation(pts[:, 0], pts[:, 1], tri).get_trifinder()(gx, gy)
    except (ValueError, RuntimeError) as err:  # matplotlib's words for an invalid triangulation
        raise ValueError(f"not a valid triangulation (overlapping or degenerate triangles?): {err}") from None
    inside = found >= 0
    corner = tri[np.where(inside, found, 0)]  # (s², 3)
    a, b, c = (pts[corner[:, k]] for k in range(3))
    # λ_b, λ_c solve [b - a, c - a] λ = y - a; λ_a = 1 - λ_b - λ_c
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
    dx, dy = gx - a[:, 0], gy - a[:, 1]
    det = np.where(inside, det, 1.0)
    lb = (dx * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * dy) / det
    lc = ((b[:, 0] - a[:, 0]) * dy - dx * (b[:, 1] - a[:, 1])) / det
    bary = np.stack([1.0 - lb - lc, lb, lc], axis=-1) * inside[:, None]
    index = np.where(inside[:, None], corner, 0)
    return torch.from_numpy(index.astype(np.int64)), torch.from_numpy(bary)


def p1_to_grid(u: torch.Tensor, index: torch.Tensor, barycentric: torch.Tensor) -> torch.Tensor:
    """``u (b, n, c)`` nodal values, ``index (b, g, 3)``, ``barycentric (b, g, 3)`` (per sample, from
    [`p1_grid_interpolation`][]) -> ``(b, g, c)``: the P1 interpolant at the ``g`` grid nodes."""
    b, g, _ = index.shape
    c = u.shape[-1]
    corners = u.gather(1, index.reshape(b, 3 * g, 1).expand(b, 3 * g, c)).reshape(b, g, 3, c)
    return (corners * barycentric.to(u.dtype)[..., None]).sum(dim=2)


def grid_interpolation_inputs(item: dict, size: int) -> dict[str, torch.Tensor]:
    """A mesh sample's ``grid_index`` and ``grid_barycentric`` (float32) on the ``size``² node grid, from
    its ``pos`` and ``triangles``: the per-sample inputs of ``mesh_fno`` (a data loader's transform)."""
    index, barycentric = p1_grid_interpolation(item["pos"], item["triangles"], size)
    return {"grid_index": index, "grid_barycentric": barycentric.float()}
