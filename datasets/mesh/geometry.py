"""Triangle-mesh geometry: signed areas, orientation, edges, boundary nodes, angles, lumped-mass weights.

A mesh is ``points`` float (n, 2) and ``triangles`` integer (t, 3) indices into them.
"""
from __future__ import annotations

import numpy as np


def signed_areas(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """(t,) signed areas ``((p1 - p0) x (p2 - p0)) / 2``: positive for counter-clockwise triangles."""
    p = points[triangles]
    d1, d2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    return 0.5 * (d1[:, 0] * d2[:, 1] - d1[:, 1] * d2[:, 0])


def orient_counterclockwise(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """The triangles with the last two vertices swapped where they run clockwise."""
    triangles = np.array(triangles, copy=True)
    flip = signed_areas(points, triangles) < 0
    triangles[flip] = triangles[flip][:, [0, 2, 1]]
    return triangles


def triangle_edges(triangles: np.ndarray) -> np.ndarray:
    """(t, 3, 2) directed edges ``(v0, v1), (v1, v2), (v2, v0)`` of every triangle."""
    return np.stack([triangles, np.roll(triangles, -1, axis=1)], axis=-1)


def boundary_edges(triangles: np.ndarray) -> np.ndarray:
    """(e, 2) edges used by exactly one triangle (the mesh boundary, outer and holes)."""
    edges = np.sort(triangle_edges(triangles).reshape(-1, 2), axis=1).astype(np.int64)
    n = int(edges.max()) + 1 if len(edges) else 1
    keys, counts = np.unique(edges[:, 0] * n + edges[:, 1], return_counts=True)  # 1-D: faster than axis=0
    single = keys[counts == 1]
    return np.stack([single // n, single % n], axis=1)


def boundary_mask(n: int, triangles: np.ndarray) -> np.ndarray:
    """(n,) bool: True on the nodes of the boundary edges."""
    mask = np.zeros(n, dtype=bool)
    mask[boundary_edges(triangles).ravel()] = True
    return mask


def lumped_weights(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Lumped-mass quadrature weights ``w_j = sum_{T containing j} |T| / 3`` (float64 (n,); sum = |Omega|)."""
    third = np.abs(signed_areas(points, triangles)) / 3.0
    return np.bincount(triangles.ravel(), weights=np.repeat(third, 3), minlength=len(points))


def angles(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """(t, 3) interior angles in radians, the angle at each vertex."""
    p = points[triangles]
    u = np.roll(p, -1, axis=1) - p  # to the next vertex
    v = np.roll(p, 1, axis=1) - p  # to the previous one
    cross = np.abs(u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0])
    return np.arctan2(cross, (u * v).sum(axis=-1))


def min_angle(points: np.ndarray, triangles: np.ndarray) -> float:
    """The smallest interior angle of the mesh, in radians."""
    return float(angles(points, triangles).min())


__all__ = ["angles", "boundary_edges", "boundary_mask", "lumped_weights", "min_angle", "orient_counterclockwise",
           "signed_areas", "triangle_edges"]
