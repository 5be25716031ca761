"""Fourier neural operators ``fno1d`` and ``fno2d`` (Li et al. 2021).

``x: (b, *grid, c_in)`` and coordinates ``pos: (b, *grid, d)`` are concatenated and lifted
pointwise to ``width`` channels, pass ``n_layers`` spectral blocks ``σ(K x + W x + b)`` (no
activation after the last one) and are projected pointwise by ``width -> proj_hidden -> c_out``.
``padding > 0`` appends that many zero points at the end of every grid axis before the blocks
and removes them after (for non-periodic problems, so the FFT does not wrap the boundaries
together).  Nothing depends on the grid size: a model built or trained at one resolution
evaluates at any other whose grid fits the modes (``2*modes <= n`` on the first axis of 2-D,
``modes <= n//2 + 1`` on the last), rectangular grids ``(n_1, n_2)`` included (a clear error names the
axis that is too coarse).  ``periodic`` (per axis) and ``domain`` set the default coordinates only.

Defaults are small (CPU-trainable in minutes); ``REFERENCE_CONFIG`` holds the FNO paper's
set-up: 1-D width 64, 16 modes (Burgers); 2-D width 32, 12 modes (Darcy); 4 layers, 128 hidden.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ...grids.domain import Domain, Periodic
from ...common.config import check_positive
from ..blocks import SpectralBlock, mlp, pointwise
from ...grids.layout import channels_first, channels_last
from . import register_model
from .base import GridOperator


@dataclass
class FNO1dConfig:
    """The options of ``fno1d`` (and, with other defaults, ``fno2d``).

    - ``in_channels``: channels of the input field.
    - ``out_channels``: channels of the output field.
    - ``width``: channels of the spectral blocks.
    - ``modes``: Fourier modes each spectral block keeps per axis.
    - ``n_layers``: spectral blocks ``σ(K x + W x + b)``.
    - ``proj_hidden``: hidden width of the pointwise projection to the output.
    - ``activation``: activation of the blocks and the projection (``gelu``, ``relu``, ``silu``, ...).
    - ``padding``: zero points appended to every grid axis before the blocks and removed after (for
      non-periodic problems, so that the FFT does not wrap the boundaries together; 0: none).
    - ``periodic``: the grid is periodic, ``x_i = i/n`` (else a node grid ``i/(n-1)``); one bool for all
      axes or one per axis.
    - ``domain``: ``[[lo, hi], ...]`` per axis, the box of the default coordinates (None: the unit box);
      with ``periodic`` it sets them (``petrov.grids.domain``).
    """

    in_channels: int = 1
    out_channels: int = 1
    width: int = 32
    modes: int = 16
    n_layers: int = 4
    proj_hidden: int = 64
    activation: str = "gelu"
    padding: int = 0
    periodic: Periodic = True
    domain: Domain = None

    def __post_init__(self):
        check_positive(self, "in_channels", "out_channels", "width", "modes", "n_layers", "proj_hidden")
        if isinstance(self.padding, bool) or not isinstance(self.padding, int) or self.padding < 0:
            raise ValueError(f"{type(self).__name__}.padding must be an integer >= 0, got {self.padding!r}")


@dataclass
class FNO2dConfig(FNO1dConfig):
    """The same fields; defaults for Darcy-size 2-D grids (node grids, not periodic)."""

    width: int = 20
    modes: int = 8
    periodic: Periodic = False


REFERENCE_CONFIG = {
    "fno1d": {"width": 64, "modes": 16, "n_layers": 4, "proj_hidden": 128, "activation": "gelu"},
    "fno2d": {"width": 32, "modes": 12, "n_layers": 4, "proj_hidden": 128, "activation": "gelu"},
}


class _FNO(GridOperator):
    def __init__(self, config):
        super().__init__(config)
        c = config
        self.lift = nn.Linear(c.in_channels + self.ndim, c.width)
        self.blocks = nn.ModuleList(
            SpectralBlock(c.width, c.width, c.modes, self.ndim, c.activation if i < c.n_layers - 1 else None)
            for i in range(c.n_layers)
        )
        self.project = mlp(c.width, c.proj_hidden, c.out_channels, c.activation)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        """``(b, *grid, c_in)`` -> ``(b, *grid, c_out)``; ``pos`` defaults to the uniform grid."""
        pos = self.grid_inputs(x, pos)
        # pointwise maps on the channels-first grid: only the few input channels change layout
        h = pointwise(self.lift, channels_first(torch.cat([x, pos], dim=-1)))
        p = self.config.padding
        if p:
            h = F.pad(h, (0, p) * self.ndim)
        for block in self.blocks:
            h = block(h)
        if p:
            h = h[(..., *[slice(0, n) for n in x.shape[1:-1]])]
        return channels_last(pointwise(self.project, h))


@register_model("fno1d", FNO1dConfig)
class FNO1d(_FNO):
    """FNO on 1-D grids ``(b, n, c_in) -> (b, n, c_out)``."""

    ndim = 1


@register_model("fno2d", FNO2dConfig)
class FNO2d(_FNO):
    """FNO on 2-D grids ``(b, n1, n2, c_in) -> (b, n1, n2, c_out)``."""

    ndim = 2
