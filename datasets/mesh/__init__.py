"""petrov.datasets.mesh: PDE data on triangle meshes of irregular domains.

Random polygonal domains, a boundary-conforming Delaunay mesher, the Darcy coefficient as a GRF series
evaluated anywhere, a P1 finite-element solver (scikit-fem) and the checks every mesh passes.
"""
from .checks import check_mesh
from .coefficient import evaluate_series, neglected_variance, series_coefficients
from .domains import DOMAIN_FAMILIES, Domain, sample_domain
from .fem import from_skfem, solve_darcy_fem, to_skfem
from .geometry import boundary_mask, lumped_weights
from .mesher import mesh_domain
from .sample import MeshSample, mesh_sample

__all__ = [
    "DOMAIN_FAMILIES",
    "Domain",
    "MeshSample",
    "boundary_mask",
    "check_mesh",
    "evaluate_series",
    "from_skfem",
    "lumped_weights",
    "mesh_domain",
    "mesh_sample",
    "neglected_variance",
    "sample_domain",
    "series_coefficients",
    "solve_darcy_fem",
    "to_skfem",
]
