"""``latent1d``: the resolution-invariant attention operator on 1-D grids (periodic by default, as
Burgers on the torus).

    x (b, n, c_in), pos (b, n, 1)
      --LatentEncoder (petrov.operators.latent)--> f (b, n, c_f) on the input grid,
                                                   z (b, m, c_f) on the latent grid of m points
      h = f + P z                                  (b, n, c_f)   P: trigonometric interpolation
      --SpectralDecoder([h, c(pos)]: decoder_width, ``modes`` Fourier modes, MLP)--> (b, n, c_out)

``c(pos)`` are the periodic coordinate features ``(cos 2πx, sin 2πx)`` (``pos`` itself on node grids).

On the periodic grid ``x_i = i/n`` the restriction keeps the Fourier frequencies ``|k| < m/2`` of the
lifted field and evaluates them at the latent points ``i/m``; the prolongation evaluates the latent
field's trigonometric interpolant at the input points.  For a band-limited input the latent features
are then the same at every input size, and the model converges as the grid is refined.  With
``periodic=False`` the node-grid hat transfers of ``latent2d`` are used instead.

Why (cost on a CPU): the reference 1-D hybrid (``galerkin1d``) runs d_model-wide attention and FFN
over every input point; here the pointwise maps over the n input points are ``fine_width`` wide and
the d_model-wide attention, FFN and latent spectral blocks run on the m latent points, a number that
does not grow with the input grid.  A Burgers solution at ν = 0.1 has almost no energy above
frequency 32, so m = 64 loses nothing the decoder's 16 modes would keep.

Defaults are small (CPU-trainable in minutes at n = 512-2048); the ``burgers-latent`` preset holds the
configuration tuned for a 20-minute CPU budget (Fourier-type attention; in benchmarks/compare_accuracy.py
it reached 9.18e-4 at every n from 256 to 8192, fno1d 9.57e-4 in the same run; one training step at
n = 1024, batch 8, one thread costs about fno1d's).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ..blocks import SpectralDecoder
from ..checks import check_grid_input, grid_pos, weight_dtype
from ..latent import LatentEncoder, LatentGridConfig
from ..layout import channels_first, channels_last
from . import register_model


@dataclass
class Latent1dConfig(LatentGridConfig):
    latent_size: int = 64
    periodic: bool = True
    decoder_width: int = 32
    decoder_layers: int = 2
    decoder_hidden: Optional[int] = None  # default 4 * decoder_width
    modes: int = 16
    decoder_activation: str = "silu"


@register_model("latent1d", Latent1dConfig)
class Latent1d(nn.Module):
    """``(b, n, c_in)``, ``pos (b, n, 1)`` -> ``(b, n, c_out)``."""

    def __init__(self, config: Latent1dConfig):
        super().__init__()
        c = config
        self.cfg = c
        self.encoder = LatentEncoder(c, ndim=1)
        self.decoder = SpectralDecoder(
            c.fine_width, c.out_channels, c.decoder_width, c.modes, ndim=1, n_layers=c.decoder_layers,
            hidden=c.decoder_hidden or 4 * c.decoder_width, coord_dim=self.encoder.coord_dim,
            act=c.decoder_activation,
        )

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        check_grid_input(x, 1, self.cfg.in_channels, type(self).__name__, weight_dtype(self))
        pos = grid_pos(pos, x, self.cfg.periodic, type(self).__name__)
        f, z = self.encoder(x, pos)
        h = f + channels_last(self.encoder.prolong(channels_first(z), (x.shape[1],)))
        return self.decoder(h, self.encoder.coordinate_features(pos))
