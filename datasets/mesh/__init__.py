"""petrov.datasets.mesh: PDE data on triangle meshes of irregular domains.

Generate Darcy flow on random domains (``generate_dataset("darcy-mesh", ...)`` / ``petrov generate
darcy-mesh``), each sample on nested mesh levels and on an independent remesh; import your own meshes
(``import_meshes`` / ``petrov import --mesh``); read either lazily as point sets (``open_mesh_dataset``)
and batch them with padding (``collate_points``). The building blocks are public too: random domains,
the Delaunay mesher, the GRF series, the P1 solver, the mesh checks.
"""
from .checks import check_mesh
from .coefficient import evaluate_series, neglected_variance, series_coefficients
from .darcy import DarcyMeshParams, darcy_mesh_sample
from .domains import DOMAIN_FAMILIES, Domain, sample_domain
from .fem import from_skfem, solve_darcy_fem, to_skfem
from .geometry import boundary_mask, lumped_weights
from .importing import import_meshes
from .loading import MeshDataset, collate_points, open_mesh_dataset
from .mesher import mesh_domain
from .recipes import MESH_RECIPES, get_mesh_recipe
from .sample import MeshSample, mesh_sample
from .storage import mesh_info, read_domain

__all__ = [
    "DOMAIN_FAMILIES",
    "DarcyMeshParams",
    "Domain",
    "MESH_RECIPES",
    "MeshDataset",
    "MeshSample",
    "boundary_mask",
    "check_mesh",
    "collate_points",
    "darcy_mesh_sample",
    "evaluate_series",
    "from_skfem",
    "get_mesh_recipe",
    "import_meshes",
    "lumped_weights",
    "mesh_domain",
    "mesh_info",
    "mesh_sample",
    "neglected_variance",
    "open_mesh_dataset",
    "read_domain",
    "sample_domain",
    "series_coefficients",
    "solve_darcy_fem",
    "to_skfem",
]
