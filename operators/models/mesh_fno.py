"""``mesh_fno``: the baseline on meshes — an FNO on a masked grid.

    x (b, n, c_in) at the nodes of a triangulation of Ω ⊂ [0, 1]²
      --P1 interpolation--> x_g (b, s, s, c_in)   the piecewise-linear interpolant at the s × s grid
                                                  nodes (i, j)/(s-1); 0 outside Ω
      --[x_g, χ]----------> (b, s, s, c_in + 1)   χ = 1 inside Ω, 0 outside (the mask channel)
      --fno2d-------------> (b, s, s, c_out)      lift of [x_g, χ, grid coordinates], spectral blocks, MLP
      --bilinear----------> (b, n, c_out)         the grid prediction interpolated at the nodes
      --> exact zeros on the boundary nodes (``dirichlet``) and on padding

The grid part is an ``fno2d`` (``self.fno``, built from this config with ``c_in + 1`` input channels),
so it is resolution-free in the grid size ``s`` (``grid_size``) but not in the mesh: how well the mesh
is seen depends on ``s`` (features finer than the grid spacing are lost by the interpolation; the
boundary of Ω is a staircase of grid nodes).

Forward contract ([`petrov.operators.models.base`][], plus the interpolation of each sample):
``forward(x, pos, weights, mask=None, boundary=None, *, grid_index, grid_barycentric)`` with

- ``grid_index (b, s², 3)`` int64 and ``grid_barycentric (b, s², 3)`` float: for each sample, the
  ``(index, barycentric)`` pair [`p1_grid_interpolation`][petrov.operators.p1_grid.p1_grid_interpolation]
  ``(points, triangles, s)`` returns for its own nodes
  (``points = pos[b, :n_b]``, indices into them, so into the padded batch too); the grid node order
  is row-major with ``x = i/(s-1)`` on the first axis.  Fixed shape per sample: a data loader
  computes them once per mesh (``model.sample_transform()``) and stacks them without padding.  Both are
  required (a call without them is a TypeError saying where they come from).
- ``weights`` enter no computation (the FNO integrates nothing over the nodes); they are checked
  with the other inputs so that every point-set model takes the same batch.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch

from ...grids.domain import any_periodic
from ..checks import checks_values, raise_first
from ...grids.layout import points_to_grid
from ..p1_grid import grid_interpolation_inputs, p1_to_grid
from ...grids.transfer import prolong_points
from . import register_model
from .base import PointSetOperator
from .fno import FNO2d, FNO2dConfig


@dataclass
class MeshFNOConfig(FNO2dConfig):
    """The options of ``mesh_fno``: the ``fno2d`` fields of the grid part, and

    - ``grid_size``: points per axis of the node grid of ``[0, 1]²`` the FNO runs on.
    - ``dirichlet``: exact zeros on the boundary nodes of the output (needs the boundary flags).
    """

    grid_size: int = 64
    dirichlet: bool = True

    def __post_init__(self):
        super().__post_init__()
        name = type(self).__name__
        if isinstance(self.grid_size, bool) or not isinstance(self.grid_size, int) or self.grid_size < 2:
            raise ValueError(f"{name}.grid_size must be an integer >= 2, got {self.grid_size!r}")
        if 2 * self.modes > self.grid_size + self.padding:
            raise ValueError(f"{name}: modes {self.modes} do not fit the grid of {self.grid_size} (+ padding "
                             f"{self.padding}) points: need 2 * modes <= grid_size + padding")
        if any_periodic(self.periodic) or self.domain is not None:
            raise ValueError(f"{name}: periodic and domain are grid options; the grid over a mesh is the node "
                             "grid of [0, 1]² (periodic=False)")


def fno_config(c: MeshFNOConfig) -> FNO2dConfig:
    """The ``fno2d`` config of the grid part: the shared fields, one more input channel (the mask)."""
    shared = {f.name: getattr(c, f.name) for f in dataclasses.fields(FNO2dConfig)}
    return FNO2dConfig(**dict(shared, in_channels=c.in_channels + 1))


@register_model("mesh_fno", MeshFNOConfig)
class MeshFNO(PointSetOperator):
    """Point sets ``(b, n, c_in)``, ``pos (b, n, 2)``, ``weights (b, n)`` and each sample's P1 grid
    interpolation ``grid_index, grid_barycentric (b, s², 3)`` -> ``(b, n, c_out)``."""

    def __init__(self, config: MeshFNOConfig):
        super().__init__(config)
        c = config
        self.grid = (c.grid_size, c.grid_size)
        self.fno = FNO2d(fno_config(c))

    def forward(self, x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                mask: torch.Tensor | None = None, boundary: torch.Tensor | None = None, *,
                grid_index: torch.Tensor | None = None, grid_barycentric: torch.Tensor | None = None) -> torch.Tensor:
        if grid_index is None or grid_barycentric is None:
            missing = " and ".join(k for k, v in (("grid_index", grid_index), ("grid_barycentric", grid_barycentric))
                                   if v is None)
            # TypeError, as Python's own for a missing argument
            raise TypeError(f"{type(self).__name__}: {missing} missing: give each sample's P1 interpolation onto "
                             f"the {self.config.grid_size}² grid as keywords (grid_index=..., grid_barycentric=...); "
                             "model.sample_transform() computes them from a sample's pos and triangles "
                             "(dataset.with_transform(model.sample_transform()) adds them to every batch)")
        pos = self.point_inputs(x, pos, weights, mask, boundary)
        self._check_interpolation(grid_index, grid_barycentric, x, mask, type(self).__name__)
        inside = grid_barycentric.sum(dim=-1, keepdim=True).to(x.dtype)  # (b, s², 1): 1 in Ω, 0 outside
        grid = torch.cat([p1_to_grid(x, grid_index, grid_barycentric), inside], dim=-1)
        out = self.fno(points_to_grid(grid, self.grid))  # (b, s, s, c_out)
        return self.finish(prolong_points(out, pos.to(out.dtype)), mask, boundary)

    def sample_transform(self):
        """What a data loader adds to each mesh sample for this model: its P1 interpolation onto the
        ``grid_size``² grid (``grid_index``, ``grid_barycentric``), computed once per item."""
        return functools.partial(grid_interpolation_inputs, size=self.config.grid_size)

    def _check_interpolation(self, index, bary, x, mask, where) -> None:
        b, n, _ = x.shape
        g = self.config.grid_size ** 2
        if not isinstance(index, torch.Tensor) or tuple(index.shape) != (b, g, 3) or index.dtype != torch.int64:
            got = f"{tuple(index.shape)} {index.dtype}" if isinstance(index, torch.Tensor) else type(index).__name__
            raise ValueError(f"{where}: expected grid_index of shape ({b}, {g}, 3) int64 (p1_grid_interpolation "
                             f"of each sample's mesh at grid_size {self.config.grid_size}), got {got}")
        if not isinstance(bary, torch.Tensor) or tuple(bary.shape) != (b, g, 3) or not torch.is_floating_point(bary):
            got = f"{tuple(bary.shape)} {bary.dtype}" if isinstance(bary, torch.Tensor) else type(bary).__name__
            raise ValueError(f"{where}: expected grid_barycentric of shape ({b}, {g}, 3) floating "
                             f"(p1_grid_interpolation at grid_size {self.config.grid_size}), got {got}")
        if index.device != x.device or bary.device != x.device:
            raise ValueError(f"{where}: grid_index and grid_barycentric must be on x's device {x.device}, got "
                             f"{index.device} and {bary.device}")
        if not checks_values(x):  # the checks below read the values (petrov.operators.checks)
            return
        failures = [((index < 0).any() | (index >= n).any(),
                     lambda: f"{where}: grid_index holds node indices outside 0..{n - 1}")]
        if mask is not None:
            # (indices outside 0..n-1 clamped here: that failure comes first and is reported)
            used = bary != 0
            at_padding = used & ~mask.gather(1, index.clamp(0, n - 1).flatten(1)).view(b, g, 3)
            failures.append((at_padding.any(), lambda: f"{where}: grid_index points at padding nodes; its indices "
                                                       "must refer to each sample's own nodes (the first n_b of the "
                                                       "batch)"))
        raise_first(failures)
