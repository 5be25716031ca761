"""Geometry of triangle meshes (signed areas, orientation, edges, boundary nodes, angles, lumped-mass
weights), of segments (point-to-segment distances) and of polygons (which points lie inside).

A mesh is ``points`` float (n, 2) and ``triangles`` integer (t, 3) indices into them.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.spatial import cKDTree


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


def segment_distance(points: np.ndarray, a: np.ndarray, b: np.ndarray, block: int = 2**21) -> np.ndarray:
    """(n,) distance from each point to the nearest of the segments ``a[k] -> b[k]`` (blocks of pairs)."""
    d = b - a
    length2 = np.maximum((d**2).sum(axis=1), 1e-300)
    out = np.empty(len(points))
    rows = max(1, block // max(1, len(a)))
    for lo in range(0, len(points), rows):
        p = points[lo : lo + rows, None, :]
        t = np.clip(((p - a) * d).sum(axis=2) / length2, 0.0, 1.0)
        out[lo : lo + rows] = np.sqrt((((a + t[..., None] * d) - p) ** 2).sum(axis=2).min(axis=1))
    return out


def boundary_distance(points: np.ndarray, nodes: np.ndarray, segments: np.ndarray, cutoff: float) -> np.ndarray:
    """(n,) distance from each point to the nearest segment ``nodes[s0] -> nodes[s1]`` where it is below
    ``cutoff``, inf elsewhere. A point within ``d`` of a segment of length at most ``L`` is within
    ``sqrt(d^2 + L^2/4)`` of one of its ends, so only the segments at the nodes a k-d tree finds in that
    radius are measured (the band along the boundary, not every point against every segment)."""
    longest = float(np.linalg.norm(nodes[segments[:, 1]] - nodes[segments[:, 0]], axis=1).max())
    radius = math.sqrt(cutoff**2 + longest**2 / 4) * (1 + 1e-9)
    pairs = cKDTree(nodes).sparse_distance_matrix(cKDTree(points), radius, output_type="ndarray")
    node, point = pairs["i"], pairs["j"]
    # every (point, segment at one of the nodes found) pair: the segments grouped by their end nodes
    ends = segments.T.ravel()
    order = np.argsort(ends, kind="stable")
    first = np.searchsorted(ends[order], node, side="left")
    count = np.searchsorted(ends[order], node, side="right") - first
    pts = np.repeat(point, count)
    within = np.arange(len(pts)) - np.repeat(np.cumsum(count) - count, count)
    seg = (order % len(segments))[np.repeat(first, count) + within]
    a, b = nodes[segments[seg, 0]], nodes[segments[seg, 1]]
    d = b - a
    t = np.clip(((points[pts] - a) * d).sum(axis=1) / np.maximum((d**2).sum(axis=1), 1e-300), 0.0, 1.0)
    dist = np.linalg.norm(a + t[:, None] * d - points[pts], axis=1)
    out = np.full(len(points), np.inf)
    np.minimum.at(out, pts, dist)
    out[out >= cutoff] = np.inf
    return out


def inside_loop(loop: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(n,) bool``: which of ``points (n, 2)`` lie inside the closed polygon ``loop (m, 2)`` (matplotlib's
    point-in-polygon test; imported here, not with the module: matplotlib is ~0.7 s of every start-up)."""
    from matplotlib.path import Path

    return Path(loop).contains_points(points)


__all__ = ["angles", "boundary_distance", "boundary_edges", "boundary_mask", "inside_loop", "lumped_weights",
           "min_angle", "orient_counterclockwise", "segment_distance", "signed_areas", "triangle_edges"]
