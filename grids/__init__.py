"""petrov.grids: uniform grids and the maps between them, the room below ``datasets`` and ``operators``.

- [`layout`][petrov.grids.layout]: the one place tensor layouts are converted (channels-last grids,
  point clouds, channels-first grids) and grid coordinates are made;
- [`transfer`][petrov.grids.transfer]: restriction and prolongation between a grid and a latent grid
  fixed in physical space, on grids and on point sets, and Fourier resampling of periodic grids;
- [`fourier_modes`][petrov.grids.fourier_modes]: the lowest Fourier modes of a field and back;
- [`shape_cache`][petrov.grids.shape_cache]: matrices that depend only on shapes, built once.

Both the data (``petrov.datasets``: coordinates of stored grids, normalisers on meshes) and the models
(``petrov.operators``) use them; nothing here imports either.
"""
from .fourier_modes import irfft_modes, rfft_modes
from .layout import channels_first, channels_last, grid_coordinates, grid_to_points, points_to_grid
from .shape_cache import shape_cached
from .transfer import band_limit, fourier_resample, prolong, prolong_points, restrict, restrict_points

__all__ = [
    "band_limit", "channels_first", "channels_last", "fourier_resample", "grid_coordinates", "grid_to_points",
    "irfft_modes", "points_to_grid", "prolong", "prolong_points", "restrict", "restrict_points", "rfft_modes",
    "shape_cached",
]
