"""A small boundary-conforming triangle mesher on ``scipy.spatial.Delaunay``.

``mesh_domain(domain, h, rng)``:

1. boundary nodes: every polygon edge split into ``ceil(length / h)`` equal parts (corners kept), so
   consecutive boundary nodes are at most ``h`` apart;
2. interior nodes: a hexagonal lattice of spacing ``h`` with a random rotation and offset, each node moved
   by a random jitter of at most ``jitter * h`` (it breaks the lattice's co-circular quadruples), kept if
   inside the domain and at least ``clearance * h`` from every boundary segment;
3. the Delaunay triangulation of all nodes, without the triangles whose centroid lies outside the domain;
4. conformity: every boundary segment must be a mesh edge. The diametral circle of a segment (radius at
   most h / 2) holds no interior node (they keep ``clearance * h > h / 2`` away), so the segment is a
   Delaunay edge (Gabriel property) unless another boundary node falls inside, which the check catches:
   the lattice is then redrawn (``attempts`` times) before a RuntimeError. Once every segment is an edge,
   no triangle crosses the boundary and the centroid test is exact;
5. a few sweeps of Laplacian smoothing of the interior nodes (each node to the mean of its neighbours),
   each kept only if it raises the smallest angle and turns no triangle over.

Triangles are returned counter-clockwise. Why not a library: the usual meshers with holes are not
MIT-compatible (Triangle is non-free, gmsh GPL, MeshPy bundles both Triangle and AGPL TetGen).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.spatial import Delaunay

from .domains import Domain, subdivide
from .geometry import boundary_distance, min_angle, orient_counterclockwise, signed_areas, triangle_edges

CLEARANCE = 0.55  # interior nodes at least this many h from the boundary (> 1/2: Gabriel)
JITTER = 0.1  # interior nodes moved by at most this many h
SMOOTHING_SWEEPS = 3
ATTEMPTS = 5


def boundary_nodes(domain: Domain, h: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes along every loop (edges split to <= h) and the (s, 2) segments joining consecutive ones."""
    loops = [subdivide(loop, h) for loop in domain.loops]
    nodes = np.concatenate(loops)
    offsets = np.cumsum([0] + [len(x) for x in loops])
    segments = np.concatenate([
        np.stack([np.arange(lo, hi), np.roll(np.arange(lo, hi), -1)], axis=1)
        for lo, hi in zip(offsets[:-1], offsets[1:])
    ])
    return nodes, segments


def hexagonal_lattice(rng: np.random.Generator, h: float, jitter: float = JITTER) -> np.ndarray:
    """A jittered hexagonal lattice of spacing h covering [0, 1]², randomly rotated and shifted."""
    radius = math.sqrt(0.5) + 2 * h  # about the centre of the square
    rows = np.arange(-math.ceil(radius / (h * math.sqrt(3) / 2)), math.ceil(radius / (h * math.sqrt(3) / 2)) + 1)
    cols = np.arange(-math.ceil(radius / h) - 1, math.ceil(radius / h) + 2)
    i, j = np.meshgrid(rows, cols, indexing="ij")
    local = np.stack([(j + 0.5 * (i % 2)) * h, i * h * math.sqrt(3) / 2], axis=-1).reshape(-1, 2)
    local = local + rng.uniform(-0.5, 0.5, size=2) * h  # random offset
    angle = rng.uniform(0.0, np.pi / 3)
    c, s = math.cos(angle), math.sin(angle)
    points = 0.5 + local @ np.array([[c, s], [-s, c]])
    r = jitter * h * np.sqrt(rng.uniform(size=len(points)))
    theta = rng.uniform(0.0, 2 * np.pi, size=len(points))
    points = points + np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
    return points[(points >= -h).all(axis=1) & (points <= 1 + h).all(axis=1)]


def _missing_segments(triangles: np.ndarray, segments: np.ndarray, n: int) -> np.ndarray:
    """The boundary segments that are not an edge of any triangle."""
    edges = np.sort(triangle_edges(triangles).reshape(-1, 2), axis=1)
    seg = np.sort(segments, axis=1)
    return segments[~np.isin(seg[:, 0] * n + seg[:, 1], edges[:, 0] * n + edges[:, 1])]


def _smooth(points: np.ndarray, triangles: np.ndarray, interior: np.ndarray, sweeps: int) -> np.ndarray:
    """Laplacian smoothing of the ``interior`` nodes, sweep by sweep while the smallest angle grows."""
    n = len(points)
    edges = triangle_edges(triangles).reshape(-1, 2)
    adjacency = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    adjacency = ((adjacency + adjacency.T) > 0).astype(np.float64)
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    best = min_angle(points, triangles)
    for _ in range(sweeps):
        moved = points.copy()
        moved[interior] = (adjacency @ points)[interior] / degree[interior, None]
        angle = min_angle(moved, triangles)
        if angle <= best or (signed_areas(moved, triangles) <= 0).any():
            break
        points, best = moved, angle
    return points


def mesh_domain(domain: Domain, h: float, rng: np.random.Generator, *, clearance: float = CLEARANCE,
                jitter: float = JITTER, smoothing_sweeps: int = SMOOTHING_SWEEPS,
                attempts: int = ATTEMPTS) -> tuple[np.ndarray, np.ndarray]:
    """Triangulate ``domain`` at spacing ``h``: points float64 (n, 2), triangles int32 (t, 3), counter-clockwise.

    The boundary nodes come first (loop by loop, in loop order). RuntimeError if no attempt conforms.
    """
    if not clearance > 0.5:
        raise ValueError(f"clearance must exceed 1/2 (Gabriel property of the boundary segments), got {clearance}")
    bnodes, segments = boundary_nodes(domain, h)
    missing = segments[:0]
    for _ in range(attempts):
        lattice = hexagonal_lattice(rng, h, jitter)
        lattice = lattice[domain.contains(lattice)]
        lattice = lattice[np.isinf(boundary_distance(lattice, bnodes, segments, clearance * h))]
        points = np.concatenate([bnodes, lattice])
        triangles = Delaunay(points).simplices
        triangles = orient_counterclockwise(points, triangles)
        area = signed_areas(points, triangles)
        centroids = points[triangles].mean(axis=1)
        triangles = triangles[(area > 1e-12 * h * h) & domain.contains(centroids)]
        missing = _missing_segments(triangles, segments, len(points))
        if len(missing) == 0:
            interior = np.arange(len(bnodes), len(points))
            points = _smooth(points, triangles, interior, smoothing_sweeps)
            return points, triangles.astype(np.int32)
    raise RuntimeError(
        f"could not mesh the {domain.family} domain at h = {h}: after {attempts} attempts {len(missing)} boundary "
        f"segment(s) are not mesh edges (e.g. nodes {missing[0].tolist()}); the polygon has nodes closer than its "
        f"edge length across a corner or a gap: draw it with a smaller h or larger gaps"
    )


__all__ = ["CLEARANCE", "JITTER", "boundary_nodes", "hexagonal_lattice", "mesh_domain"]
