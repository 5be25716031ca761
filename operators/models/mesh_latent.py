"""``mesh_latent``: the latent-grid attention operator of ``latent2d`` on the nodes of any mesh.

    x (b, n, c_in), pos (b, n, 2), weights w (b, n)                  nodes of a mesh of Ω ⊂ [0, 1]²
      --lift--> f = MLP([x, pos])                   (b, n, c_f)      pointwise at the nodes
      --R-----> R f, mass                           (b, m, m, c_f)   quadrature-weighted hat averages
                                                                     on the latent node grid of [0, 1]²
      --ρ · Linear, n_layers x EncoderLayer(attention(pos_dim=2, latent weights ρ) + FFN)
                [+ latent block: SpectralBlock (latent_modes) and/or conv (latent_kernel), residual]
      --Linear--> z                                 (b, m, m, c_f)
      --P-----> h = f + P z                         (b, n, c_f)      bilinear interpolation at the nodes
      --PointwiseDecoder([h, pos])-->               (b, n, c_out)    exact zeros on boundary nodes, padding

``R`` and ``P`` are [`restrict_points`][] /
[`prolong_points`][]: ``(R f)_i = Σ_j φ_i(x_j) w_j f_j / mass_i`` with
``mass_i = Σ_j φ_i(x_j) w_j ≈ ∫_Ω φ_i`` (φ_i the tensor hats of the latent grid), 0 where the hat meets
no node (``mass_i = 0``, never divided).  The layers after ``R`` are those of ``latent2d``
([`LatentEncoder.latent_operator`][petrov.operators.latent_encoder.LatentEncoder.latent_operator], the
same modules and parameter names).

The domain on the latent grid: the coverage ``ρ_i = min(1, 2 mass_i / ∫_{[0,1]²} φ_i)`` is 1 on the
latent nodes whose hat lies at least half in Ω and falls linearly to 0 as Ω leaves the hat's
support; it is 0 exactly where ``mass_i = 0``.  It enters twice:

- the first latent features are ``ρ_i (W (R f)_i + b)``: the zero extension outside Ω of the
  restricted features, plus the mass channel ``ρ_i b`` (the bias is its embedding), so the layers
  see where Ω is and a latent node barely touched by Ω contributes little instead of the average of
  a few nodes;
- the latent attention's quadrature weights are ``ρ``: uniform on the latent nodes in Ω, as
  ``latent2d``'s, 0 on the empty ones.

Both move continuously with the mesh (a refinement that brings a first node into a hat changes ρ
by little), so the model converges under refinement.  The factor 2 makes ρ exactly 1 wherever the
hat is more than half covered, not ``1 ±`` the quadrature error of its mass: on a node grid of
``[0, 1]²`` with at least ``latent_size`` points per axis and the product trapezoid weights ρ ≡ 1,
and ``mesh_latent`` computes exactly what ``latent2d`` with ``decoder="pointwise"`` computes on
that grid (load one's state dict into the other).

Decoder: pointwise (``latent2d``'s default spectral decoder transforms the fine grid, which a mesh
does not have).  What is non-local runs on the latent grid — attention and, with ``latent_modes``,
spectral blocks there (a spectral block in front of the decoder would be one more of those); the
decoder combines, node by node, the prolonged latent features with the skip ``f``, which carries the
input at the mesh's own resolution (e.g. a coefficient's jumps).

Forward contract ([`petrov.operators.models.base`][]): ``forward(x, pos, weights, mask=None,
boundary=None) -> (b, n, c_out)``.  ``weights`` are the physical quadrature weights
(``Σ_j w_j = |Ω|`` with Ω inside the unit square: ρ compares them with the hats' areas), not
normalized ones.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ...grids.domain import any_periodic
from ...common.config import check_positive
from ..blocks import pointwise_decoder
from ..latent_encoder import LatentEncoder, LatentGridConfig
from ...grids.layout import cached_grid_coordinates, grid_to_points
from ...grids.shape_cache import shape_cached
from ...grids.transfer import point_hats, prolong_points, restrict_points, trapezoid_weights
from . import register_model
from .base import PointSetOperator


@dataclass
class MeshLatentConfig(LatentGridConfig):
    """The options of ``mesh_latent``: the latent-grid encoder's (on a latent grid over the bounding
    box), and

    - ``decoder_hidden``: hidden width of the pointwise decoder at the nodes.
    - ``decoder_layers``: hidden layers of the pointwise decoder.
    - ``decoder_activation``: activation of the pointwise decoder.
    - ``dirichlet``: exact zeros on the boundary nodes of the output (needs the boundary flags).
    - ``boundary_features``: the distance of each node to the nearest boundary node as an extra
      input channel (``False``: ``latent2d``'s inputs).
    """

    decoder_hidden: int = 64
    decoder_layers: int = 2
    decoder_activation: str = "silu"
    dirichlet: bool = True
    boundary_features: bool = True  # the distance to the boundary as an input channel (False: latent2d's inputs)

    def __post_init__(self):
        super().__post_init__()
        check_positive(self, "decoder_hidden", "decoder_layers")
        if any_periodic(self.periodic) or self.domain is not None:
            raise ValueError(f"{type(self).__name__}: periodic and domain are grid options; a mesh's latent "
                             "grid is the node grid of [0, 1]² (periodic=False)")
        if self.stencil_size:
            raise ValueError(f"{type(self).__name__}: stencil_size is for inputs on a grid (latent2d, "
                             "latent2d_inverse); a mesh's nodes reach the latent grid directly (stencil_size = 0)")


def latent_coverage(mass: torch.Tensor) -> torch.Tensor:
    """``mass (b, m_1, m_2)`` hat masses ``≈ ∫_Ω φ_i`` -> ``ρ = min(1, 2 mass / ∫_{[0,1]²} φ_i)``, same shape.

    ``∫_{[0,1]²} φ_i`` is the latent grid's product trapezoid weight (a hat's integral)."""
    return (2 * mass / _hat_integrals(tuple(mass.shape[-2:]), mass.dtype, mass.device)).clamp(max=1.0)


@shape_cached
def _hat_integrals(size: tuple[int, int], dtype: torch.dtype, device) -> torch.Tensor:
    """``(m_1, m_2)``: ``∫_{[0,1]²} φ_i``, the product trapezoid weights of the latent grid."""
    m1, m2 = size
    return trapezoid_weights(m1, dtype, device)[:, None] * trapezoid_weights(m2, dtype, device)


@register_model("mesh_latent", MeshLatentConfig)
class MeshLatent(PointSetOperator):
    """Point sets ``(b, n, c_in)``, ``pos (b, n, 2)``, ``weights (b, n)`` -> ``(b, n, c_out)``."""

    def __init__(self, config: MeshLatentConfig):
        super().__init__(config)
        c = config
        self.latent = (c.latent_size, c.latent_size)
        self.encoder = LatentEncoder(dataclasses.replace(c, in_channels=self.feature_channels), ndim=2)
        self.decoder = pointwise_decoder(c, c.fine_width, c.decoder_hidden)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                mask: torch.Tensor | None = None, boundary: torch.Tensor | None = None,
                boundary_distance: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.point_inputs(x, pos, weights, mask, boundary)
        f = self.encoder.lift_features(self.features(x, pos, boundary, mask, boundary_distance), pos)
        hats = point_hats(pos, self.latent)  # the nodes' latent hats, for R and P both
        z, mass = restrict_points(f, pos, weights, self.latent, hats)
        coverage = latent_coverage(mass)
        pos_z = grid_to_points(cached_grid_coordinates(self.latent, False, pos.dtype, pos.device)[None])
        z = self.encoder.latent_operator(z, pos_z.expand(x.shape[0], -1, -1), weights=coverage.flatten(1),
                                         coverage=coverage)
        h = f + prolong_points(z, pos, hats)
        return self.finish(self.decoder(h, pos), mask, boundary)
