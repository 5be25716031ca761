"""Darcy hybrids on 2-D node grids: ``galerkin2d`` (forward) and ``galerkin2d_inverse``.

Both share the reference's "FourierTransformer2D" encoder (scaomath/galerkin-transformer,
``libs/model.py`` and ``libs/layers.py``; configs ``ex2_darcy`` / ``ex3_darcy_inv``):

    x (b, n_f, n_f, c_in) --DownSampler2d--> (b, n_c, n_c, d_model)      any fine size n_f
      --> n_layers x EncoderLayer(attention(pos_dim=2) + FFN) on the n_c^2 coarse points

then

- ``galerkin2d``: UpSampler2d back to n_f -> SpectralDecoder (lift of ``[h, pos]`` to width,
  spectral blocks, MLP width -> 4 width -> c_out) -> zero Dirichlet boundary (the first and
  last rows and columns of the output are exactly 0).
- ``galerkin2d_inverse``: UpSampler2d at the coarse size (a conv on the n_c grid) ->
  PointwiseDecoder of ``[h, pos_c]``; the output lives on the coarse grid ``(b, n_c, n_c, c_out)``
  and has no boundary condition.

The intermediate interpolation size is ``round(sqrt(n_f * n_c))`` (the geometric middle), computed
from the input, so the model accepts any fine resolution.  Coordinates ``pos`` (default: the node grid
``i/(n-1)``) are given on the fine grid; the coarse ones are their bilinear interpolation, which for a
uniform grid is the uniform coarse grid.

``reference_samplers = true`` (the paper presets) makes the samplers the reference's to the last detail,
which the defaults simplify: the activation also after each of the down-sampler's two interpolations (a
no-op for ReLU, not for SiLU), twice after the up-sampler's convolution (the reference's ``Conv2dResBlock``
ends with one and its up-sampler adds another), and the reference's intermediate sizes
(``reference_middles``: at 141 -> 43 the up-sampler passes through 77 x 77, not 78 x 78).  With the
paper presets' other options (``norm_eps``, ``norm``, ``layer_norm``, activations) the model computes the
reference's ``FourierTransformer2D`` (galerkin-transformer 0.2.1) to float64 round-off, output for output
(tests/test_reference_equivalence.py).

Not resolution-invariant: the 3x3 convolutions act on grid cells (on the input grid and on the
intermediate grid, which moves with the input size), and the bilinear decimation point-samples the
input without anti-aliasing, so a model trained at one resolution computes a different operator at
another (its error grows at resolutions finer than the training one: benchmarks/README.md).  Kept unchanged
because it reproduces the reference architecture and its figures; ``latent2d`` /
``latent2d_inverse`` ([`latent`][petrov.operators.models.latent]) are the resolution-invariant counterparts.

``REFERENCE_CONFIG`` / ``INVERSE_REFERENCE_CONFIG`` are the reference architectures' sizes and layout:
2,220,829 and 2,383,873 parameters (the reference's counts); the paper presets
(``train/configs/darcy-paper-*.toml``, ``darcy-inverse-paper-*.toml``) add the reference's sampler and
normalization details, which change no parameter.  Defaults are small versions for a 2-core CPU
(d_model 64, 2 layers, coarse grid 22, decoder width 16, 8 modes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ...grids.domain import Domain, Periodic
from ..blocks import (
    EncoderConfig,
    PointwiseDecoderFields,
    SpectralDecoderFields,
    activation,
    encoder_stack,
    pointwise_decoder,
    spectral_decoder,
)
from ...grids.layout import channels_first, channels_last, grid_to_points, points_to_grid
from ...grids.transfer import prolong
from . import register_model
from .base import GridOperator, zero_boundary


@dataclass
class CoarseGridConfig(EncoderConfig):
    """The shared 2-D encoder: fine grid -> ``coarse_size``² points -> attention layers.

    - ``coarse_size``: points per axis of the coarse grid the attention runs on.
    - ``downsampler_activation``: activation of the convolutional down-sampler.
    - ``upsampler_activation``: activation of the convolutional up-sampler.
    - ``periodic``: periodic grids (the Darcy hybrids run on node grids: ``False``); one bool or one per
      axis: the default coordinates only.
    - ``domain``: ``[[lo, hi], ...]`` per axis, the box of the default coordinates (None: the unit box).
    - ``reference_samplers``: the reference's samplers exactly (module doc): the activation after each
      interpolation of the down-sampler and twice after the up-sampler's convolution, intermediate
      sizes by ``reference_middles``.  Off: the activation once after each convolution, intermediate
      size ``round(sqrt(n_f * n_c))`` both ways.  Same parameters either way.
    """

    n_heads: int = 4
    coarse_size: int = 22
    downsampler_activation: str = "relu"
    upsampler_activation: str = "silu"
    periodic: Periodic = False
    reference_samplers: bool = False
    domain: Domain = None


@dataclass
class Galerkin2dConfig(SpectralDecoderFields, CoarseGridConfig):
    """The options of ``galerkin2d``: the coarse-grid encoder's and the spectral decoder's, and

    - ``dirichlet``: exact zeros on the boundary nodes of the output.
    """

    dirichlet: bool = True


@dataclass
class Galerkin2dInverseConfig(PointwiseDecoderFields, CoarseGridConfig):
    """The inverse model: output on the coarse grid through a pointwise decoder."""


REFERENCE_CONFIG = {
    "d_model": 128,
    "n_layers": 6,
    "n_heads": 4,
    "mixer": "galerkin",
    "norm": "layer",
    "dim_feedforward": 256,
    "layer_norm": False,
    "dropout": 0.05,
    "coarse_size": 61,
    "decoder_width": 32,
    "decoder_layers": 2,
    "decoder_hidden": 128,
    "modes": 12,
}
REFERENCE_PARAMETERS = 2_220_829

INVERSE_REFERENCE_CONFIG = {
    "d_model": 192,
    "n_layers": 6,
    "n_heads": 4,
    "mixer": "galerkin",
    "norm": "layer",
    "dim_feedforward": 384,
    "layer_norm": False,
    "dropout": 0.05,
    "coarse_size": 36,
    "decoder_hidden": 192,
    "decoder_layers": 1,
}
INVERSE_REFERENCE_PARAMETERS = 2_383_873


# --- the reference's convolutional samplers between the fine and the coarse grid ---------------------

def reference_scale_factor(n_fine: int, n_coarse: int) -> float:
    """The reference's interpolation factor from ``n_fine`` to ``n_coarse`` points per axis: about
    ``sqrt(n_c / n_f)``, a multiple of 0.005 (galerkin-transformer's ``DarcyDataset.get_scaler_sizes``).

    Its rule, float for float: ``r = sqrt(n_c / n_f)`` rounded (numpy) to 4 decimals; that rounded to
    3 decimals, plus 0.005 when the last digit of ``r`` as Python prints it is below 5; then to the
    nearest multiple of 0.005 (141 -> 43: 0.5522 -> 0.557 -> 0.555; 211 -> 61: 0.5377 -> 0.538 -> 0.54).
    """
    r = float(np.round(math.sqrt(n_coarse / n_fine), 4))
    f = float(np.round(r, 3)) + (5e-3 if int(repr(r)[-1]) < 5 else 0.0)
    return int(f / 5e-3 + 0.5) * 5e-3


def reference_middles(n_fine: int, n_coarse: int) -> tuple[int, int]:
    """(down-sampler's, up-sampler's) intermediate grid size between ``n_fine`` and ``n_coarse`` points
    per axis as the reference computes them from ``f = reference_scale_factor(n_f, n_c)``: the
    down-sampler interpolates by the factor ``f`` (``floor(n_f f)`` points), the up-sampler through
    ``round(n_f f) - 1`` points.  141 -> 43: (78, 77); 211 -> 61: (113, 113); 141 -> 36: (71, 71)."""
    scaled = n_fine * reference_scale_factor(n_fine, n_coarse)
    return max(2, math.floor(scaled)), max(2, round(scaled) - 1)


def _conv3(in_channels: int, out_channels: int) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)


class DownSampler2d(nn.Module):
    """``(b, c_in, n_f, n_f) -> (b, c_out, *size)``: CNN with bilinear interpolation (``transfer.prolong``).

    ``conv3x3(c_in -> c_out), σ`` on the fine grid, interpolate to ``mid``, three chained
    ``conv3x3, σ`` whose outputs (``c_out//3, c_out//3, rest`` channels) are concatenated,
    interpolate to ``size`` (the reference's interpolation encoder).  ``act_after_interpolation``:
    ``σ`` also after each interpolation, as the reference (a no-op for ReLU: bilinear interpolation
    keeps values >= 0).
    """

    def __init__(self, in_channels: int, out_channels: int, act: str = "relu", dropout: float = 0.0,
                 act_after_interpolation: bool = False):
        super().__init__()
        self.act_after_interpolation = act_after_interpolation
        c0 = c1 = out_channels // 3
        c2 = out_channels - c0 - c1
        if min(c0, c1, c2) < 1:
            raise ValueError(f"DownSampler2d needs out_channels >= 3, got {out_channels}")
        self.conv0 = _conv3(in_channels, out_channels)
        self.convs = nn.ModuleList([_conv3(out_channels, c0), _conv3(c0, c1), _conv3(c1, c2)])
        self.act = activation(act)
        self.drop = nn.Dropout(dropout)

    def interpolate(self, x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        x = prolong(x, size)
        return self.act(x) if self.act_after_interpolation else x

    def forward(self, x: torch.Tensor, mid: tuple[int, int], size: tuple[int, int]) -> torch.Tensor:
        x = self.interpolate(self.act(self.drop(self.conv0(x))), mid)
        outs = []
        for conv in self.convs:
            x = self.act(self.drop(conv(x)))
            outs.append(x)
        return self.interpolate(torch.cat(outs, dim=1), size)


class UpSampler2d(nn.Module):
    """``(b, c_in, n_c, n_c) -> (b, c_out, *size)``.

    Interpolate to ``mid``, ``conv3x3, σ``, interpolate to ``size``.  ``repeat_activation``:
    ``σ(drop(σ(drop(conv))))``, the reference's (its ``Conv2dResBlock`` ends with ``σ``, and its
    up-sampler applies dropout and ``σ`` once more).
    """

    def __init__(self, in_channels: int, out_channels: int, act: str = "silu", dropout: float = 0.0,
                 repeat_activation: bool = False):
        super().__init__()
        self.conv = _conv3(in_channels, out_channels)
        self.act = activation(act)
        self.drop = nn.Dropout(dropout)
        self.repeat_activation = repeat_activation

    def forward(self, x: torch.Tensor, mid: tuple[int, int], size: tuple[int, int]) -> torch.Tensor:
        h = self.act(self.drop(self.conv(prolong(x, mid))))
        if self.repeat_activation:
            h = self.act(self.drop(h))
        return prolong(h, size)


class CoarseEncoder2d(nn.Module):
    """Down-sampler + attention layers on the coarse grid.

    ``(b, n_f, n_f, c_in)``, ``pos (b, n_f, n_f, 2)`` -> ``(b, n_c, n_c, d)``, ``pos_c (b, n_c, n_c, 2)``.
    """

    def __init__(self, c: CoarseGridConfig):
        super().__init__()
        if c.coarse_size < 2:
            raise ValueError(f"coarse_size must be >= 2, got {c.coarse_size}")
        self.coarse = (c.coarse_size, c.coarse_size)
        self.reference_samplers = c.reference_samplers
        self.down = DownSampler2d(c.in_channels, c.d_model, c.downsampler_activation, c.dropout,
                                  act_after_interpolation=c.reference_samplers)
        self.layers = encoder_stack(c, pos_dim=2)

    def middle(self, fine: tuple[int, int], up: bool = False) -> tuple[int, int]:
        """Intermediate interpolation size between ``fine`` and the coarse grid: the down-sampler's, or
        with ``up`` the up-sampler's (``reference_samplers``: ``reference_middles``, else
        ``round(sqrt(n_f n_c))`` both)."""
        if self.reference_samplers:
            return tuple(reference_middles(n, c)[int(up)] for n, c in zip(fine, self.coarse))
        return tuple(max(2, round(math.sqrt(n * c))) for n, c in zip(fine, self.coarse))

    def forward(self, x: torch.Tensor, pos: torch.Tensor):
        fine = tuple(x.shape[1:3])
        h = self.down(channels_first(x), self.middle(fine), self.coarse)
        pos_c = channels_last(prolong(channels_first(pos), self.coarse))
        h, p = grid_to_points(channels_last(h)), grid_to_points(pos_c)
        for layer in self.layers:
            h = layer(h, p)
        return points_to_grid(h, self.coarse), pos_c


class _CoarseHybrid(GridOperator):
    """The encoder (down-sampler and attention on the coarse grid) and up-sampler both hybrids share."""

    ndim = 2

    def __init__(self, config: CoarseGridConfig):
        super().__init__(config)
        self.encoder = CoarseEncoder2d(config)
        self.up = UpSampler2d(config.d_model, config.d_model, config.upsampler_activation, config.dropout,
                              repeat_activation=config.reference_samplers)


@register_model("galerkin2d", Galerkin2dConfig)
class Galerkin2d(_CoarseHybrid):
    """``(b, n, n, c_in)``, ``pos (b, n, n, 2)`` -> ``(b, n, n, c_out)`` with zero boundary values."""

    def __init__(self, config: Galerkin2dConfig):
        super().__init__(config)
        self.decoder = spectral_decoder(config, config.d_model, config.out_channels, ndim=2, coord_dim=2)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.grid_inputs(x, pos)
        h, _ = self.encoder(x, pos)
        fine = tuple(x.shape[1:3])
        h = self.up(channels_first(h), self.encoder.middle(fine, up=True), fine)
        out = channels_last(self.decoder(h, channels_first(pos)))
        return zero_boundary(out) if self.config.dirichlet else out


@register_model("galerkin2d_inverse", Galerkin2dInverseConfig)
class Galerkin2dInverse(_CoarseHybrid):
    """``(b, n, n, c_in)``, ``pos (b, n, n, 2)`` -> ``(b, n_c, n_c, c_out)`` on the coarse grid."""

    def __init__(self, config: Galerkin2dInverseConfig):
        super().__init__(config)
        self.decoder = pointwise_decoder(config, config.d_model, config.decoder_hidden or config.d_model)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.grid_inputs(x, pos)
        h, pos_c = self.encoder(x, pos)
        coarse = self.encoder.coarse
        h = channels_last(self.up(channels_first(h), coarse, coarse))
        return self.decoder(h, pos_c)
