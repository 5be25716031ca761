"""``mesh_transolver``: Transolver (Wu et al., ICML 2024) on the nodes of a mesh, its slices weighted by
the mesh's quadrature.

    x (b, n, c_in), pos (b, n, 2), weights w (b, n)                  nodes of a mesh of Ω ⊂ [0, 1]²
      --preprocess MLP([x, d_∂Ω, c(pos)]): Linear(·, 2 d_model), GELU, Linear(·, d_model)
      --> n_layers x [ h = h + PhysicsAttention(LayerNorm(h), w),  h = h + MLP(LayerNorm(h)) ]
      --> LayerNorm, Linear(d_model, c_out)                       (b, n, c_out)
      --> exact zeros on the boundary nodes (``dirichlet``) and on padding

The published model for irregular meshes (thuml/Transolver, the airfoil / elasticity variant): every
projection is a linear map of the node's own features (no 3x3 convolutions, which need a structured
mesh), the only coupling of nodes is physics attention.  Its slice tokens here are quadratures with the
mesh's weights, ``z_j = Σ_i w_i s_ij v_i / Σ_i w_i s_ij`` (``petrov.operators.attention.mixers.physics``):
on refined meshes of one domain they converge to ``∫ s_j v / ∫ s_j``, where the reference's plain sums
over the nodes would weigh a region by how many nodes the mesher put there; padding (weight 0) takes no
part.  The blocks, the initialization and ``unified_pos`` are ``transolver2d``'s
(``petrov.operators.models.transolver``), so a checkpoint of one reads like the other's; the inputs
gain the distance to the boundary (``boundary_features``), as the other point-set models'.

Forward contract (``petrov.operators.models.base``): ``forward(x, pos, weights, mask=None,
boundary=None) -> (b, n, c_out)``; ``boundary`` is required with ``dirichlet=True`` or
``boundary_features=True``.  Cost O(n G d) per layer (G = ``n_slices``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from ...grids.domain import any_periodic
from . import register_model
from .base import PointSetOperator
from .transolver import Transolver2dConfig, _Transolver, add_layers


@dataclass
class MeshTransolverConfig(Transolver2dConfig):
    """The options of ``mesh_transolver``: ``transolver2d``'s (``periodic`` must stay ``False``), and

    - ``boundary_features``: the distance of each node to the nearest boundary node as an extra
      input channel (the model sees the domain's shape).
    """

    boundary_features: bool = True  # the distance to the boundary as an input channel

    def __post_init__(self):
        super().__post_init__()
        if any_periodic(self.periodic) or self.domain is not None:
            raise ValueError(f"{type(self).__name__}: periodic and domain are grid options; a mesh lies in "
                             "[0, 1]² with a boundary (periodic=False)")


@register_model("mesh_transolver", MeshTransolverConfig)
class MeshTransolver(PointSetOperator):
    """Transolver on meshes: physics attention over the nodes, slices weighted by the quadrature.

    Point sets ``(b, n, c_in)``, ``pos (b, n, 2)``, ``weights (b, n)`` -> ``(b, n, c_out)``."""

    ndim = 2

    def __init__(self, config: MeshTransolverConfig):
        super().__init__(config)
        c = config
        add_layers(self, c, self.feature_channels + (c.unified_pos ** 2 if c.unified_pos else 2))
        self.reset_parameters()

    # transolver2d's: the reference's normal start, orthogonal slice projections; the coordinates as
    # raw positions or distances to the unified_pos reference grid
    reset_parameters = _Transolver.reset_parameters
    coordinate_features = _Transolver.coordinate_features

    def forward(self, x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                mask: torch.Tensor | None = None, boundary: torch.Tensor | None = None,
                boundary_distance: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.point_inputs(x, pos, weights, mask, boundary)
        h = self.preprocess(torch.cat([self.features(x, pos, boundary, mask, boundary_distance), self.coordinate_features(pos)], dim=-1))
        for block in self.blocks:
            h = block(h, weights)
        return self.finish(self.head(self.norm(h)), mask, boundary)
