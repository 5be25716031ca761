"""Resolution-invariant attention operators on a latent grid fixed in physical space: ``latent1d``,
``latent2d`` (forward) and ``latent2d_inverse``.

Every map between the input grid and the attention points is defined in physical space, so each model
is a discretization of one continuous operator and converges as the input grid is refined:

    x (b, *n, c_in), pos (b, *n, d)
      --lift--> f = MLP([x, c(pos)])                 (b, c_f, *n)   pointwise on the input grid (channels-first)
      [--R_s--> s + σ(Conv s), s = R_s f             (b, c_f, *k)   optional: on a stencil grid (stencil_size)]
      --R-----> R f                                  (b, *m, c_f)   restriction to the latent grid
      --Linear, n_layers x EncoderLayer(attention(pos_dim=d) + FFN) [+ latent block: SpectralBlock
                (latent_modes) and/or a convolution (latent_kernel), residual] on the m^d latent points
      --Linear--> z (b, *m, c_f) --P--> P z          (b, c_f, *n)   prolongation back to the input grid

(the encoder up to ``P`` is [`petrov.operators.latent_encoder.LatentEncoder`][]), then

- ``latent1d`` / ``latent2d``: ``h = f + P z`` (pointwise skip) -> SpectralDecoder (lift of
  ``[h, c(pos)]`` to ``decoder_width``, spectral blocks with ``modes`` fixed Fourier modes, MLP);
  ``latent2d`` then puts exact zeros on the boundary (``dirichlet``).  ``latent2d`` with
  ``decoder="pointwise"``: a PointwiseDecoder of ``[h, pos]`` instead (``decoder_hidden`` wide, default
  ``4 * decoder_width``; ``decoder_layers`` hidden layers), the grid counterpart of ``mesh_latent``,
  which computes the same numbers from the same state dict when given this grid as a point set
  (nodes, product trapezoid weights, edge nodes as boundary) with ``latent_size`` points per axis or
  more;
- ``latent2d_inverse``: the output lives on a fixed coarse node grid of ``coarse_size`` points per
  axis: ``g = R_c f + P_c z`` (the fine features restricted to the coarse grid, plus the latent
  features interpolated at the coarse nodes) -> PointwiseDecoder of ``[g, pos_c]``.  Any input
  resolution gives the same ``(b, n_c, n_c, c_out)`` grid.

Transfers ([`petrov.grids.transfer`][]): on node grids ``i/(n-1)`` (``periodic=False``, Darcy)
quadrature-weighted hat averages ``R[i, j] = φ_i(x_j) w_j / Σ_k φ_i(x_k) w_k`` (an average over a
window of fixed physical width: a coefficient jumping between 3 and 12 is anti-aliased and its
average converges under refinement) and linear interpolation ``P[j, i] = φ_i(x_j)``; on periodic grids
``i/n`` (``periodic=True``, Burgers) Fourier truncation to the latent grid's frequencies and
trigonometric interpolation back, with the coordinates entering as ``c(pos) = (cos 2πx, sin 2πx)``
(smooth on the torus).  The spectral decoder keeps a fixed number of modes; the remaining maps are
pointwise.

Why this layout (cost on a CPU, where the pointwise maps over every input point dominate, not the
attention): the input grid carries only ``c_f = fine_width`` channels (lift, skip, the decoder's first
layer); the ``d_model``-wide attention and FFN run on the m^d latent points only, a number that does
not grow with the input grid; transfers are small matrix products per axis (O(n·m) each).  A Burgers
solution at ν = 0.1 has almost no energy above frequency 32, so m = 64 latent points lose nothing the
decoder's 16 modes would keep.  The latent convolution (``latent_kernel``) is a stencil of fixed
physical width; the inverse model needs it, since a coefficient is recovered from derivatives of u,
which neither pointwise maps nor averages provide; a stencil grid (``stencil_size``, e.g. 71 points
for a 36-point latent grid) gives it those derivatives at half the latent spacing, on the ``c_f``-wide
lifted features, before the average onto the latent grid.  (Measured effects of these choices:
benchmarks/README.md.)

Defaults are small (CPU-trainable in minutes); the presets ``burgers-latent``, ``darcy-quick``,
``darcy-budget-85`` and ``darcy-inverse-quick`` hold tuned configurations.  ``REFERENCE_SIZE_CONFIG``
matches the reference Darcy hybrid's size for equal-parameter comparisons: d_model 128, 4 heads,
decoder width 32 and 12 modes as in ``galerkin2d``'s reference config, 4 layers each with a 3x3 latent
convolution, FFN 157 to bring the count to 2,220,501 parameters (``galerkin2d``: 2,220,829).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...grids.domain import Periodic
from ..blocks import (PointwiseDecoderFields, SpectralDecoder, SpectralDecoderFields, pointwise_decoder,
                      spectral_decoder)
from ..latent_encoder import LatentEncoder, LatentGridConfig
from ...grids.layout import channels_first, channels_last
from ...grids.transfer import prolong, restrict
from . import register_model
from .base import GridOperator, zero_boundary


@dataclass
class Latent1dConfig(SpectralDecoderFields, LatentGridConfig):
    """The options of ``latent1d``: the latent-grid encoder's and the spectral decoder's (periodic
    grids and a 64-point latent grid by default)."""

    latent_size: int = 64
    periodic: Periodic = True
    decoder_width: int = 32
    modes: int = 16


@dataclass
class Latent2dConfig(SpectralDecoderFields, LatentGridConfig):
    """The options of ``latent2d``: the latent-grid encoder's and the decoder's, and

    - ``dirichlet``: exact zeros on the boundary nodes of the output.
    - ``decoder``: ``"spectral"`` (spectral blocks on the input grid) or ``"pointwise"`` (an MLP at
      every point, ``mesh_latent``'s decoder: see the module docstring).
    """

    dirichlet: bool = True
    decoder: str = "spectral"  # or "pointwise" (mesh_latent's decoder, see the module docstring)

    def __post_init__(self):
        super().__post_init__()
        if self.decoder not in ("spectral", "pointwise"):
            raise ValueError(f"decoder must be 'spectral' or 'pointwise', got {self.decoder!r}")


@dataclass
class Latent2dInverseConfig(PointwiseDecoderFields, LatentGridConfig):
    """The options of ``latent2d_inverse``: the latent-grid encoder's and the pointwise decoder's, and

    - ``coarse_size``: points per axis of the output's fixed coarse node grid.
    """

    coarse_size: int = 36


REFERENCE_SIZE_CONFIG = {
    "d_model": 128,
    "n_layers": 4,
    "n_heads": 4,
    "mixer": "galerkin",
    "norm": "layer",
    "dim_feedforward": 157,  # brings the count to the reference's
    "latent_size": 16,
    "latent_kernel": 3,
    "fine_width": 32,
    "decoder_width": 32,
    "decoder_layers": 2,
    "decoder_hidden": 128,
    "modes": 12,
}
REFERENCE_SIZE_PARAMETERS = 2_220_501


class _LatentForward(GridOperator):
    """``latent1d`` / ``latent2d``: encoder, ``h = f + P z``, spectral decoder [, zero boundary]."""

    def __init__(self, config):
        super().__init__(config)
        c = config
        self.encoder = LatentEncoder(c, ndim=self.ndim)
        hidden = c.decoder_hidden or 4 * c.decoder_width
        if getattr(c, "decoder", "spectral") == "pointwise":
            self.decoder = pointwise_decoder(c, c.fine_width, hidden, self.encoder.coord_dim)  # mesh_latent's decoder
        else:
            self.decoder = spectral_decoder(c, c.fine_width, c.out_channels, self.ndim, self.encoder.coord_dim, hidden)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.grid_inputs(x, pos)
        f, z = self.encoder(x, pos)  # f channels-first
        h = f + self.encoder.prolong(channels_first(z), tuple(x.shape[1:-1]))
        coords = self.encoder.coordinate_features(pos)
        if isinstance(self.decoder, SpectralDecoder):
            out = channels_last(self.decoder(h, channels_first(coords)))
        else:
            out = self.decoder(channels_last(h), coords)
        return zero_boundary(out) if getattr(self.config, "dirichlet", False) else out


@register_model("latent1d", Latent1dConfig)
class Latent1d(_LatentForward):
    """``(b, n, c_in)``, ``pos (b, n, 1)`` -> ``(b, n, c_out)``."""

    ndim = 1


@register_model("latent2d", Latent2dConfig)
class Latent2d(_LatentForward):
    """``(b, n, n, c_in)``, ``pos (b, n, n, 2)`` -> ``(b, n, n, c_out)`` with zero boundary values."""

    ndim = 2


@register_model("latent2d_inverse", Latent2dInverseConfig)
class Latent2dInverse(GridOperator):
    """``(b, n, n, c_in)``, ``pos (b, n, n, 2)`` -> ``(b, n_c, n_c, c_out)`` on the fixed coarse grid."""

    ndim = 2

    def __init__(self, config: Latent2dInverseConfig):
        super().__init__(config)
        c = config
        if c.coarse_size < 2:
            raise ValueError(f"coarse_size must be >= 2, got {c.coarse_size}")
        self.coarse = (c.coarse_size, c.coarse_size)
        self.encoder = LatentEncoder(c, ndim=2)
        self.decoder = pointwise_decoder(c, c.fine_width, c.decoder_hidden or c.d_model)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.grid_inputs(x, pos)
        f, z = self.encoder(x, pos)
        g = restrict(f, self.coarse) + prolong(channels_first(z), self.coarse)
        pos_c = channels_last(prolong(channels_first(pos), self.coarse))
        return self.decoder(channels_last(g), pos_c)
