"""One sample on one mesh: what a mesh file stores per sample and variant (level or remesh)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import IMPORT_ADVICE, check_mesh
from .geometry import boundary_mask, lumped_weights


@dataclass
class MeshSample:
    """Nodal data on a triangle mesh.

    points: float64 (n, 2); triangles: int32 (t, 3), counter-clockwise, 0-based; boundary: bool (n,), True
    on the nodes of edges used by one triangle (outer boundary and holes); weights: float64 (n,),
    ``w_j = sum_{T containing j} |T| / 3`` (sum = |Omega|); x: float32 (n, c_in) input, y: float32 (n, c_out)
    target.
    """

    points: np.ndarray
    triangles: np.ndarray
    boundary: np.ndarray
    weights: np.ndarray
    x: np.ndarray
    y: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.points)

    @property
    def n_triangles(self) -> int:
        return len(self.triangles)

    def check(self, name: str = "mesh", advice: str = IMPORT_ADVICE) -> "MeshSample":
        """[`checks.check_mesh`][] on the mesh and all nodal arrays; returns self."""
        check_mesh(self.points, self.triangles, name=name, advice=advice,
                   fields={"x": self.x, "y": self.y, "weights": self.weights, "boundary": self.boundary})
        return self


def _channels(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    return values[:, None] if values.ndim == 1 else values


def mesh_sample(points: np.ndarray, triangles: np.ndarray, x: np.ndarray, y: np.ndarray) -> MeshSample:
    """A [`MeshSample`][] whose boundary flags and weights are computed from the mesh (x, y: (n,) or (n, c))."""
    points = np.ascontiguousarray(points, dtype=np.float64)
    triangles = np.ascontiguousarray(triangles, dtype=np.int32)
    return MeshSample(points, triangles, boundary_mask(len(points), triangles), lumped_weights(points, triangles),
                      _channels(x).astype(np.float32), _channels(y).astype(np.float32))


__all__ = ["MeshSample", "mesh_sample"]
