"""Darcy flow on a triangle mesh: P1 finite elements with scikit-fem.

Find ``u_h`` in the continuous piecewise-linear functions on the mesh, zero on every boundary node (outer
boundary and holes), such that for every such ``v``

    sum_T a_T int_T grad u_h . grad v dx = int_Omega f v dx,

with ``a_T`` the coefficient of triangle T (constant on it: the coefficient at its centroid). Assembled by
``skfem.asm`` on ``Basis(mesh, ElementTriP1())``, the boundary nodes' rows removed by ``skfem.condense``, the
symmetric positive definite system solved by SuperLU in its symmetric mode (MMD ordering of A + Aᵀ,
diagonal pivots: an SPD matrix needs no pivoting, and SuperLU's default threshold pivoting made the same
ordering many times slower on the refined meshes' matrices). For constant f the load ``int f phi_j``
equals ``f w_j`` with the lumped weights ``w_j = sum_{T containing j} |T| / 3``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse.linalg as spla
from skfem import Basis, BilinearForm, ElementTriP1, LinearForm, MeshTri, asm, condense
from skfem.helpers import dot, grad

from .geometry import boundary_mask, orient_counterclockwise


def to_skfem(points: np.ndarray, triangles: np.ndarray) -> MeshTri:
    """A ``skfem.MeshTri`` of points (n, 2) and triangles (t, 3) (skfem sorts each triangle's indices)."""
    return MeshTri(np.ascontiguousarray(np.asarray(points, np.float64).T),
                   np.ascontiguousarray(np.asarray(triangles).T))


def from_skfem(mesh: MeshTri) -> tuple[np.ndarray, np.ndarray]:
    """points float64 (n, 2) and counter-clockwise triangles int32 (t, 3) of a skfem mesh (same order)."""
    points = np.ascontiguousarray(mesh.p.T, dtype=np.float64)
    return points, orient_counterclockwise(points, mesh.t.T).astype(np.int32)


def centroids(mesh: MeshTri) -> np.ndarray:
    """(t, 2) element centroids."""
    return mesh.p[:, mesh.t].mean(axis=1).T


@BilinearForm
def _diffusion(u, v, w):
    return w["a"] * dot(grad(u), grad(v))


@LinearForm
def _load(v, w):
    return w["f"] * v


def solve_darcy_fem(mesh: MeshTri, a: np.ndarray, f: float | Callable[[np.ndarray, np.ndarray], np.ndarray] = 1.0,
                    *, intorder: int | None = None) -> np.ndarray:
    """P1 solution of ``-div(a grad u) = f`` in the mesh's domain, ``u = 0`` on its whole boundary.

    a: (t,) positive per-element coefficient (element order of ``mesh.t``); f: a constant or a vectorised
    function ``f(x, y)`` evaluated at the quadrature points (order ``intorder``, default skfem's).
    Returns u: float64 (n,) nodal values, exactly 0 on the boundary nodes.
    """
    a = np.asarray(a, dtype=np.float64)
    if a.shape != (mesh.t.shape[1],):
        raise ValueError(f"a must hold one value per element ({mesh.t.shape[1]}), got shape {a.shape}")
    if not (np.isfinite(a).all() and (a > 0).all()):
        raise ValueError("a must be finite and positive on every element (elliptic problem)")
    basis = Basis(mesh, ElementTriP1(), intorder=intorder) if intorder else Basis(mesh, ElementTriP1())
    nqp = basis.X.shape[1]
    stiffness = asm(_diffusion, basis, a=np.broadcast_to(a[:, None], (len(a), nqp)))
    if callable(f):
        x = basis.mapping.F(basis.X)  # (2, t, q) quadrature points
        values = np.asarray(f(x[0], x[1]), dtype=np.float64)
    else:
        if not np.isfinite(f):
            raise ValueError(f"f must be finite, got {f}")
        values = np.full((len(a), nqp), float(f))
    load = asm(_load, basis, f=values)
    u = np.zeros(mesh.p.shape[1])
    # P1 degrees of freedom are the nodes: the Dirichlet ones are the boundary nodes (found from the edges
    # used by one triangle; much faster here than skfem building every facet for basis.get_dofs())
    boundary = np.flatnonzero(boundary_mask(mesh.p.shape[1], mesh.t.T))
    matrix, rhs, _, interior = condense(stiffness, load, D=boundary)
    if len(interior):
        lu = spla.splu(matrix.tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                       options={"SymmetricMode": True})
        u[interior] = lu.solve(rhs)
    return u


__all__ = ["centroids", "from_skfem", "solve_darcy_fem", "to_skfem"]
