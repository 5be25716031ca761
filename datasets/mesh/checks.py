"""Validity checks of a triangle mesh and its nodal fields, used on generated and on imported samples.

A valid mesh: finite node coordinates (n, 2); triangles (t >= 1, 3) of integer indices in [0, n); no two
nodes at the same place; every node used by a triangle; every triangle counter-clockwise with a
non-negligible area; no two triangles on the same side of an edge (overlapping or folded parts); every
field one finite row per node. A violation is a ValueError naming the sample, the problem and what to do.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from scipy.spatial import cKDTree

from .geometry import signed_areas, triangle_edges

DUPLICATE_TOLERANCE = 1e-9  # nodes closer than this fraction of the mesh's diameter are duplicates
DEGENERATE_TOLERANCE = 1e-10  # |area| below this fraction of the longest edge squared is degenerate
IMPORT_ADVICE = "fix the mesh (or leave this sample out) and import it again"


def _fail(name: str, problem: str, advice: str) -> None:
    raise ValueError(f"{name}: {problem}; {advice}")


def check_arrays(points, triangles, name: str = "mesh", advice: str = IMPORT_ADVICE) -> tuple[np.ndarray, np.ndarray]:
    """The shape, type, finiteness and index-range checks of [`check_mesh`][]: after them the triangles
    can index the points. Returns float64 points and int64 triangles."""
    points, triangles = np.asarray(points), np.asarray(triangles)
    if points.ndim != 2 or points.shape[1] != 2 or not np.issubdtype(points.dtype, np.number):
        _fail(name, f"node coordinates must be a real (n, 2) array, got shape {points.shape} "
              f"dtype {points.dtype}", advice)
    if len(points) < 3:
        _fail(name, f"a mesh needs at least 3 nodes, got {len(points)}", advice)
    if not np.isfinite(points).all():
        _fail(name, f"{int((~np.isfinite(points).all(axis=1)).sum())} node(s) have NaN/Inf coordinates", advice)
    if triangles.ndim != 2 or triangles.shape[1] != 3 or len(triangles) == 0:
        _fail(name, f"triangles must be a (t >= 1, 3) array of node indices, got shape {triangles.shape}", advice)
    if not np.issubdtype(triangles.dtype, np.integer):
        _fail(name, f"triangle node indices must be integers, got dtype {triangles.dtype}", advice)
    low, high = int(triangles.min()), int(triangles.max())
    if low < 0 or high >= len(points):
        _fail(name, f"triangle node indices run from {low} to {high} but there are {len(points)} nodes "
              f"(indices are 0-based: subtract 1 from 1-based ones)", advice)
    return points.astype(np.float64, copy=False), triangles.astype(np.int64, copy=False)


def _check_fields(fields: Mapping[str, np.ndarray], n: int, name: str, advice: str) -> None:
    for field, values in fields.items():
        values = np.asarray(values)
        if values.ndim == 0 or len(values) != n:
            _fail(name, f"field {field!r} has {values.shape[0] if values.ndim else 'no'} rows for {n} nodes "
                  "(array lengths disagree: one row per node is expected)", advice)
        if not np.issubdtype(values.dtype, np.number) and values.dtype != bool:
            _fail(name, f"field {field!r} has dtype {values.dtype}; real numbers are expected", advice)
        bad = ~np.isfinite(values.reshape(n, -1)).all(axis=1)
        if bad.any():
            _fail(name, f"field {field!r} has NaN/Inf at {int(bad.sum())} node(s) (first: node "
                  f"{int(np.flatnonzero(bad)[0])})", advice)


def check_mesh(points, triangles, *, fields: Mapping[str, np.ndarray] | None = None, name: str = "mesh",
               advice: str = IMPORT_ADVICE) -> None:
    """Raise ValueError ``"{name}: {problem}; {advice}"`` on the first problem found (module docstring)."""
    points, triangles = check_arrays(points, triangles, name, advice)
    n = len(points)
    _check_fields(fields or {}, n, name, advice)

    diameter = float(np.linalg.norm(points.max(axis=0) - points.min(axis=0)))
    pairs = cKDTree(points).query_pairs(DUPLICATE_TOLERANCE * diameter, output_type="ndarray")
    if len(pairs):
        i, j = pairs[0]
        _fail(name, f"{len(pairs)} pair(s) of duplicate nodes (e.g. nodes {i} and {j} at {points[i].tolist()}); "
              "merge them and renumber the triangles", advice)
    used = np.bincount(triangles.ravel(), minlength=n) > 0
    if not used.all():
        _fail(name, f"{int((~used).sum())} node(s) belong to no triangle (e.g. node {int(np.flatnonzero(~used)[0])}); "
              "remove the nodes no triangle uses and renumber the triangles", advice)
    repeated = (triangles[:, 0] == triangles[:, 1]) | (triangles[:, 1] == triangles[:, 2]) | (triangles[:, 0] == triangles[:, 2])
    area = signed_areas(points, triangles)
    edge2 = (np.diff(points[np.concatenate([triangles, triangles[:, :1]], axis=1)], axis=1) ** 2).sum(axis=2).max(axis=1)
    degenerate = repeated | (np.abs(area) <= DEGENERATE_TOLERANCE * edge2)
    if degenerate.any():
        k = int(np.flatnonzero(degenerate)[0])
        _fail(name, f"{int(degenerate.sum())} degenerate triangle(s) of (nearly) zero area (e.g. triangle {k}: nodes "
              f"{triangles[k].tolist()})", advice)
    inverted = area < 0
    if inverted.any():
        k = int(np.flatnonzero(inverted)[0])
        _fail(name, f"{int(inverted.sum())} of {len(triangles)} triangle(s) are inverted (clockwise; e.g. triangle {k}: "
              f"nodes {triangles[k].tolist()}); list every triangle's nodes counter-clockwise", advice)
    directed = triangle_edges(triangles).reshape(-1, 2)
    _, counts = np.unique(directed[:, 0] * n + directed[:, 1], return_counts=True)
    if (counts > 1).any():
        _fail(name, f"{int((counts > 1).sum())} edge(s) have two triangles on the same side: the mesh overlaps "
              "itself or is folded", advice)


__all__ = ["IMPORT_ADVICE", "check_arrays", "check_mesh"]
