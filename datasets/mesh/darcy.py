"""Darcy flow on random irregular domains, one sample on several meshes (the ``darcy-mesh`` kind).

Sample ``index`` of seed ``s``:

1. a domain Omega in [0, 1]² (``domains.sample_domain``, generator ``[s, 3, index]``), its edges at most h;
2. the coarse mesh ``level0`` at spacing h (``mesher.mesh_domain``, generator ``[s, 4, index, 0]``), its
   uniform refinements ``level1``, ``level2``, ... (``skfem.MeshTri.refined``: every triangle split in
   four, so the levels are nested), and ``remesh``: an independent mesh at spacing ``h / 2^refinements``
   (generator ``[s, 4, index, 1]``: other interior nodes, the same polygon with its edges subdivided);
3. the coefficient a = ``high`` where psi >= 0, ``low`` elsewhere, psi the truncated Neumann GRF series of
   ``coefficient`` (the grid data's draws for (s, index)): the same function on every mesh, evaluated at
   the element centroids for the solve and at the nodes for storage;
4. u: the P1 solution of -div(a grad u) = f, u = 0 on the whole boundary (``fem.solve_darcy_fem``), solved
   once on the finest nested level; the coarser levels store that solution at their nodes (a subset of the
   finest level's), as coarse grids are strided samples of the native solve, so the levels differ in
   discretization and not in accuracy (the P1 solution on ``level0`` alone is ~3% off the fine one: the mesh
   does not follow the coefficient's jumps).  The remesh has its own solve at the finest spacing.

Stored per mesh: x = a and y = u at the nodes, with the points, triangles, boundary flags and lumped
weights (``sample.MeshSample``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..grf import darcy_coefficient
from ..recipes import DarcyCoefficientParams, validate_darcy_coefficient
from .coefficient import evaluate_series, series_coefficients
from .domains import DOMAIN_FAMILIES, Domain, parse_families, sample_domain
from .fem import centroids, from_skfem, solve_darcy_fem, to_skfem
from .mesher import mesh_domain
from .sample import MeshSample, mesh_sample

STREAM_DOMAIN = 3  # generator streams beside grf's 1 (1-D) and 2 (2-D coefficient draws)
STREAM_MESH = 4
H_RANGE = (0.005, 0.08)  # coarse spacings whose domains keep their gaps (3 h) and stay meshable


@dataclass(frozen=True)
class DarcyMeshParams(DarcyCoefficientParams):
    """Darcy equation, coefficient GRF (the fields shared with the grid kind), domain and mesh parameters
    of ``darcy-mesh``."""

    modes: int = 64  # K: cosine modes per axis of the GRF series (see coefficient.py)
    h: float = 0.058  # coarse mesh spacing (about 300-350 nodes on level0, ~5,000 on level2)
    refinements: int = 2  # uniform refinements: level1 .. level{refinements}; remesh at h / 2^refinements
    families: str = "holes,notch,lshape,deformed"  # domain families, drawn uniformly (comma-separated)
    max_holes: int = 3  # the holes family draws 1..max_holes elliptic holes


def variants(p: DarcyMeshParams) -> list[str]:
    """Stored meshes of every sample: ``level0 .. level{refinements}``, then ``remesh``."""
    return [f"level{r}" for r in range(p.refinements + 1)] + ["remesh"]


def validate(p: DarcyMeshParams) -> None:
    validate_darcy_coefficient(p)
    if not (H_RANGE[0] <= p.h <= H_RANGE[1]):
        raise ValueError(f"h must be in [{H_RANGE[0]}, {H_RANGE[1]}] (features keep 3 h apart inside the unit "
                         f"square), got {p.h}")
    for name, low, high in (("modes", 2, 4096), ("refinements", 0, 4), ("max_holes", 1, 3)):
        value = getattr(p, name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    parse_families(p.families)


def solver_settings(p: DarcyMeshParams) -> dict:
    return {"solver": "petrov.datasets.mesh.fem.solve_darcy_fem",
            "method": "P1 finite elements (scikit-fem), coefficient constant per element (its centroid value)",
            "linear_solver": "superlu", "mesher": "petrov.datasets.mesh.mesher.mesh_domain (Delaunay of boundary "
            "nodes + jittered hexagonal lattice)", "families": sorted(DOMAIN_FAMILIES.names())}


def _solved(mesh, coefficients: np.ndarray, p: DarcyMeshParams) -> tuple[np.ndarray, np.ndarray]:
    """The coefficient at the nodes and the P1 solution on ``mesh`` (a per element at its centroid)."""
    nodes = mesh.p.shape[1]
    psi = evaluate_series(coefficients, np.concatenate([mesh.p.T, centroids(mesh)]))
    a = darcy_coefficient(psi, high=p.high, low=p.low)
    return a[:nodes], solve_darcy_fem(mesh, a[nodes:], p.f)


def _sample(mesh, a: np.ndarray, u: np.ndarray) -> MeshSample:
    points, triangles = from_skfem(mesh)
    return mesh_sample(points, triangles, a, u)


def darcy_mesh_sample(p: DarcyMeshParams, seed: int, index: int) -> tuple[Domain, dict[str, MeshSample]]:
    """Sample ``index``: its domain and ``{variant: MeshSample}`` in the order of [`variants`][]."""
    domain = sample_domain(np.random.default_rng([seed, STREAM_DOMAIN, index]), p.h, parse_families(p.families),
                           p.max_holes)
    points, triangles = mesh_domain(domain, p.h, np.random.default_rng([seed, STREAM_MESH, index, 0]))
    meshes = {"level0": to_skfem(points, triangles)}
    for r in range(1, p.refinements + 1):
        meshes[f"level{r}"] = meshes[f"level{r - 1}"].refined()
    fine = p.h / 2**p.refinements
    meshes["remesh"] = to_skfem(*mesh_domain(domain, fine, np.random.default_rng([seed, STREAM_MESH, index, 1])))
    coefficients = series_coefficients(seed, index, p.modes, alpha=p.alpha, tau=p.tau)
    # one solve on the finest nested level; a coarser level's nodes are the finest level's first nodes
    # (refinement appends the edge midpoints), so its data are the fine solution there, as coarse grids
    # are strided samples of the native solve: the levels differ in discretization, not in accuracy
    finest = meshes[f"level{p.refinements}"]
    a, u = _solved(finest, coefficients, p)
    out = {}
    for name, mesh in meshes.items():
        n = mesh.p.shape[1]
        if name == "remesh":
            out[name] = _sample(mesh, *_solved(mesh, coefficients, p))  # its own solve at the finest spacing
        else:
            assert np.array_equal(finest.p[:, :n], mesh.p), "refinement must keep the coarse nodes first"
            out[name] = _sample(mesh, a[:n], u[:n])
    return domain, out


__all__ = ["DarcyMeshParams", "darcy_mesh_sample", "solver_settings", "validate", "variants"]
