"""petrov.datasets: PDE data for neural operators.

Generate (``generate_dataset`` / ``petrov generate``) Burgers, Darcy, inverse-Darcy and 2-D Navier-Stokes
datasets into HDF5 files, resumably, whole or in shards merged afterwards (``shard=(K, N)``,
``merge_shards`` / ``petrov merge``: one dataset spread over a cluster's job array), or import your own arrays into the same format (``import_arrays`` / ``petrov import``), time series of several fields included (``import_time_series``; PDEBench's and The Well's files: ``import_series_file``); load them, or the FNO benchmark ``.mat`` files, at any strided resolution
(``open_dataset``); fit point-wise Gaussian normalizers on the training split (``fit_normalizer``).
Data on triangle meshes (``petrov.datasets.mesh``): Darcy flow on irregular domains (``generate_dataset(
"darcy-mesh", ...)``) or your own meshes (``import_meshes``), read lazily (``open_mesh_dataset``) and
batched as padded point sets (``collate_points``).
The building blocks (GRF samplers, the Burgers, Darcy and Navier-Stokes solvers) are public too.
"""
from .burgers import solve_burgers, solve_burgers_trajectory
from .darcy import solve_darcy
from .fno_files import open_mat, read_mat
from .generation import generate_dataset
from .grf import darcy_coefficient, neumann_grf_2d, periodic_grf_1d, periodic_grf_2d
from .importing import import_arrays
from .series_formats import import_series_file
from .time_series import import_time_series
from .loading import GridDataset, LazyGridDataset, dataset_info, open_dataset
from .merging import merge_shards
from .navier_stokes import solve_navier_stokes
from .mesh import MeshDataset, collate_points, import_meshes, open_mesh_dataset
from .noise import InputNoise, add_noise
from .normalizers import (
    PointwiseGaussianNormalizer,
    UnitGaussianNormalizer,
    fit_normalizer,
    fit_point_normalizer,
    statistics_grid_size,
)
from .recipes import RECIPES, default_params, get_recipe, list_kinds
from .sampling import allowed_resolutions, average_pool, stride_for

__all__ = [
    "GridDataset",
    "InputNoise",
    "LazyGridDataset",
    "MeshDataset",
    "PointwiseGaussianNormalizer",
    "RECIPES",
    "UnitGaussianNormalizer",
    "add_noise",
    "allowed_resolutions",
    "average_pool",
    "collate_points",
    "darcy_coefficient",
    "dataset_info",
    "default_params",
    "fit_normalizer",
    "fit_point_normalizer",
    "generate_dataset",
    "get_recipe",
    "import_arrays",
    "import_meshes",
    "import_series_file",
    "import_time_series",
    "list_kinds",
    "merge_shards",
    "neumann_grf_2d",
    "open_dataset",
    "open_mat",
    "open_mesh_dataset",
    "periodic_grf_1d",
    "periodic_grf_2d",
    "read_mat",
    "solve_burgers",
    "solve_burgers_trajectory",
    "solve_darcy",
    "solve_navier_stokes",
    "statistics_grid_size",
    "stride_for",
]
