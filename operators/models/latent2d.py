"""Resolution-invariant 2-D attention operators: ``latent2d`` (forward) and ``latent2d_inverse``.

Every map between the input grid and the attention points is defined in physical space, so the
model is a discretization of one continuous operator and converges as the input grid is refined
(node grids ``i/(n-1)`` on ``[0, 1]²``, any ``n``):

    x (b, n, n, c_in), pos (b, n, n, 2)
      --lift--> f = MLP([x, pos])                   (b, n, n, c_f)   pointwise on the input grid
      --R-----> R f Rᵀ                              (b, m, m, c_f)   quadrature-weighted hat averages
      --Linear, n_layers x EncoderLayer(attention(pos_dim=2) + FFN) [+ latent block: SpectralBlock
                (latent_modes) and/or k x k conv (latent_kernel), residual] on the m² latent nodes
                ξ = (i, j)/(m-1) (m = latent_size, fixed in physical space)
      --Linear--> (b, m, m, c_f) --P--> P z Pᵀ       (b, n, n, c_f)   bilinear interpolation of the nodes

(the encoder up to ``P`` is :class:`petrov.operators.latent.LatentEncoder`, shared with ``latent1d``),
then

- ``latent2d``: ``h = f + P z Pᵀ`` (pointwise skip) -> SpectralDecoder (lift of ``[h, pos]`` to
  ``decoder_width``, spectral blocks with ``modes`` fixed Fourier modes, MLP) -> zero Dirichlet
  boundary (first and last rows and columns exactly 0).  ``decoder="pointwise"``: a PointwiseDecoder
  of ``[h, pos]`` instead (``decoder_hidden`` wide, default ``4 * decoder_width``; ``decoder_layers``
  hidden layers): the grid counterpart of ``mesh_latent``, which computes the same numbers from the
  same state dict when given this grid as a point set (nodes, product trapezoid weights, edge nodes
  as boundary) with ``latent_size`` points per axis or more.
- ``latent2d_inverse``: the output lives on a fixed coarse node grid of ``coarse_size`` points per
  axis: ``g = R_c f R_cᵀ + P_c z P_cᵀ`` (restriction of the fine features to the coarse grid, plus
  the latent features interpolated at the coarse nodes; with ``coarse_size == latent_size`` the
  latter is the identity) -> PointwiseDecoder of ``[g, pos_c]``.  Any input resolution gives
  the same ``(b, n_c, n_c, c_out)`` grid.

``R`` and ``P`` are :mod:`petrov.operators.transfer`: ``R[i, j] = φ_i(x_j) w_j / Σ_k φ_i(x_k) w_k``
(latent hats φ, trapezoid weights w of the input grid), ``P[j, i] = φ_i(x_j)``.  The restriction is
an average over a window of fixed physical width, so a coefficient jumping between 3 and 12 is
anti-aliased and its average converges under refinement; the spectral decoder keeps a fixed number
of modes; the remaining maps are pointwise.  Latent coordinates are ``pos`` interpolated at the
latent nodes (the uniform latent grid for the default ``pos``).

Why this layout (cost on a CPU, where the pointwise maps over every input point dominate, not the
attention): the input grid carries only ``c_f = fine_width`` channels (lift, skip, the decoder's
first layer); the ``d_model``-wide attention and FFN run on the m² latent points only, a number
that does not grow with the input grid; transfers are two small matrix products per axis
(O(n·m) each).  Measured at 85², batch 8, one thread, at equal parameter count (2.2M,
``REFERENCE_SIZE_CONFIG``): a training step is 3.6x faster than ``galerkin2d``'s (0.46 s vs
1.68 s; 3.2x with the machine busy), whose 3x3 convolutions run at d_model channels on an
intermediate grid that grows with the input (benchmarks/throughput_darcy.py).  The 3x3 convolution
on the latent grid (``latent_kernel``) is a stencil of fixed physical width: trained at 36 on Darcy
it lowered the test error from 2.8e-2 to 2.2e-2 (at 36, 71 and 141 alike), below the small
``fno2d``'s 2.5e-2.  The inverse model needs it: a coefficient is recovered from derivatives of u,
which neither pointwise maps nor averages provide; without it training stalled at relative L2 0.27.

Defaults are small (CPU-trainable in minutes).  ``REFERENCE_SIZE_CONFIG`` matches the reference
Darcy hybrid's size for equal-parameter comparisons: d_model 128, 4 heads, decoder width 32 and 12
modes as in ``galerkin2d``'s reference config, 4 layers each with a 3x3 latent convolution, FFN 157 to
bring the count to 2,220,501 parameters (``galerkin2d``: 2,220,829).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F

from ..blocks import PointwiseDecoder, SpectralDecoder, resize2d
from ..checks import check_grid_input, grid_pos, weight_dtype
from ..latent import LatentEncoder, LatentGridConfig
from ..layout import channels_first, channels_last
from ..transfer import prolong, restrict
from . import register_model
from .mesh_latent import node_decoder


@dataclass
class Latent2dConfig(LatentGridConfig):
    decoder_width: int = 16
    decoder_layers: int = 2
    decoder_hidden: Optional[int] = None  # default 4 * decoder_width
    modes: int = 8
    decoder_activation: str = "silu"
    dirichlet: bool = True
    decoder: str = "spectral"  # or "pointwise" (mesh_latent's decoder, see the module docstring)


@dataclass
class Latent2dInverseConfig(LatentGridConfig):
    coarse_size: int = 36
    decoder_hidden: Optional[int] = None  # default d_model
    decoder_layers: int = 1
    decoder_activation: str = "silu"


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


@register_model("latent2d", Latent2dConfig)
class Latent2d(nn.Module):
    """``(b, n, n, c_in)``, ``pos (b, n, n, 2)`` -> ``(b, n, n, c_out)`` with zero boundary values."""

    def __init__(self, config: Latent2dConfig):
        super().__init__()
        c = config
        self.cfg = c
        if c.decoder not in ("spectral", "pointwise"):
            raise ValueError(f"decoder must be 'spectral' or 'pointwise', got {c.decoder!r}")
        self.encoder = LatentEncoder(c, ndim=2)
        hidden = c.decoder_hidden or 4 * c.decoder_width
        if c.decoder == "pointwise":
            self.decoder = node_decoder(c, hidden)
        else:
            self.decoder = SpectralDecoder(
                c.fine_width, c.out_channels, c.decoder_width, c.modes, ndim=2, n_layers=c.decoder_layers,
                hidden=hidden, coord_dim=2, act=c.decoder_activation,
            )

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        check_grid_input(x, 2, self.cfg.in_channels, type(self).__name__, weight_dtype(self))
        pos = grid_pos(pos, x, self.cfg.periodic, type(self).__name__)
        f, z = self.encoder(x, pos)
        h = f + channels_last(self.encoder.prolong(channels_first(z), tuple(x.shape[1:3])))
        out = self.decoder(h, pos)
        if self.cfg.dirichlet:  # keep the interior, put exact zeros on the boundary
            out = F.pad(out[:, 1:-1, 1:-1], (0, 0, 1, 1, 1, 1))
        return out


@register_model("latent2d_inverse", Latent2dInverseConfig)
class Latent2dInverse(nn.Module):
    """``(b, n, n, c_in)``, ``pos (b, n, n, 2)`` -> ``(b, n_c, n_c, c_out)`` on the fixed coarse grid."""

    def __init__(self, config: Latent2dInverseConfig):
        super().__init__()
        c = config
        if c.coarse_size < 2:
            raise ValueError(f"coarse_size must be >= 2, got {c.coarse_size}")
        self.cfg = c
        self.coarse = (c.coarse_size, c.coarse_size)
        self.encoder = LatentEncoder(c, ndim=2)
        self.decoder = PointwiseDecoder(
            c.fine_width, c.out_channels, c.decoder_hidden or c.d_model, coord_dim=2,
            n_layers=c.decoder_layers, act=c.decoder_activation, dropout=c.dropout,
        )

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        check_grid_input(x, 2, self.cfg.in_channels, type(self).__name__, weight_dtype(self))
        pos = grid_pos(pos, x, self.cfg.periodic, type(self).__name__)
        f, z = self.encoder(x, pos)
        g = restrict(channels_first(f), self.coarse) + prolong(channels_first(z), self.coarse)
        pos_c = channels_last(resize2d(channels_first(pos), self.coarse))
        return self.decoder(channels_last(g), pos_c)
