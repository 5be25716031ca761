"""``galerkin1d``: attention encoder + spectral decoder on 1-D grids (the Burgers hybrid).

The reference's "SimpleTransformer" (Cao 2021; scaomath/galerkin-transformer ``libs/model.py``,
config ``ex1_burgers``):

    x (b, n, c_in) --Linear--> (b, n, d_model)                   [+ pos channels if lift_coordinates]
      --> n_layers x EncoderLayer(attention(mixer, norm, pos_dim=1) + FFN, residual)
      --> SpectralDecoder: spectral blocks d_model -> w -> w (``modes``, SiLU), MLP w -> hidden -> c_out

``REFERENCE_CONFIG`` reproduces that architecture (d_model 96, 4 layers, 1 head, FFN 192,
per-head LayerNorm on the normalized pair, no LayerNorm around the residuals, decoder width 48,
16 modes, MLP 48 -> 48 -> 1): 530,305 parameters, the reference's count (its lifting takes the
function values only, so ``lift_coordinates=False``; coordinates enter every attention head).
The mixer is a config value: ``"galerkin"`` (the reference's 8192-point runs) or ``"fourier"``
(its default), or any other registered mixer.

``checkpoint_layers=True`` recomputes activations of the encoder layers in backward: same numbers;
each layer keeps only the inputs of its two branches (``x`` and ``x + Attn(x)``) instead of ~6
``(b, n, d_model)`` tensors, recomputing the Galerkin K, V projections and normalizations and the
FFN hidden activation (other mixers: the attention branch whole, ``torch.utils.checkpoint``), i.e.
about half an encoder forward more per training step.  ``checkpoint_layers="ffn"`` recomputes only the
FFN's hidden activation ``σ(W_1 x + b_1)``, the largest tensor a layer keeps (``(b, n, dim_feedforward)``):
less memory saved for one extra ``W_1 x`` per layer.

The defaults are a small version (d_model 64, 2 layers, decoder width 32) that trains on a
2-core CPU in minutes at n = 512-2048.  ``pos`` defaults to the periodic grid ``x_i = i/n``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Union

import torch
from torch import nn

from ...grids.domain import Periodic
from ..blocks import EncoderConfig, SpectralDecoderFields, encoder_stack, spectral_decoder
from ...grids.layout import channels_first, channels_last
from . import register_model
from .base import GridOperator


@dataclass
class Galerkin1dConfig(SpectralDecoderFields, EncoderConfig):
    """The options of ``galerkin1d``: the encoder's and the spectral decoder's, and

    - ``lift_coordinates``: the lift also takes the coordinates (the reference lifts the function
      values only; coordinates enter every attention head either way).
    - ``decoder_hidden``: hidden width of the decoder's output MLP (``None``: ``decoder_width``).
    - ``periodic``: the grid is periodic, ``x_i = i/n`` (else a node grid ``i/(n-1)``).
    - ``checkpoint_layers``: recompute the encoder layers' activations in backward instead of
      keeping them: the same numbers, less training memory, about half an encoder forward more
      per step; ``"ffn"``: only each FFN's hidden activation (its first linear layer recomputed).
    """

    lift_coordinates: bool = False
    decoder_width: int = 32
    decoder_hidden: Optional[int] = None  # default decoder_width
    modes: int = 16
    periodic: Periodic = True
    # Recompute the encoder layers' activations during backward instead of keeping them (each
    # branch keeps its input): identical results, less training memory, about half an encoder
    # forward more per step; "ffn": the FFN's hidden activation only.  No effect without gradients.
    checkpoint_layers: Union[Literal["ffn"], bool] = False


REFERENCE_CONFIG = {
    "d_model": 96,
    "n_layers": 4,
    "n_heads": 1,
    "mixer": "galerkin",
    "norm": "layer",
    "dim_feedforward": 192,
    "layer_norm": False,
    "decoder_width": 48,
    "decoder_layers": 2,
    "decoder_hidden": 48,
    "modes": 16,
}
REFERENCE_PARAMETERS = 530_305


@register_model("galerkin1d", Galerkin1dConfig)
class Galerkin1d(GridOperator):
    """``(b, n, c_in)``, ``pos (b, n, 1)`` -> ``(b, n, c_out)``."""

    ndim = 1

    def __init__(self, config: Galerkin1dConfig):
        super().__init__(config)
        c = config
        self.lift = nn.Linear(c.in_channels + (1 if c.lift_coordinates else 0), c.d_model)
        self.layers = encoder_stack(c, pos_dim=1)
        self.decoder = spectral_decoder(c, c.d_model, c.out_channels, ndim=1, coord_dim=0,
                                        hidden=c.decoder_hidden or c.decoder_width)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.grid_inputs(x, pos)
        h = self.lift(torch.cat([x, pos], dim=-1) if self.config.lift_coordinates else x)
        for layer in self.layers:  # a 1-D grid (b, n, d) is already a point cloud
            h = layer(h, pos, recompute=self.config.checkpoint_layers)
        return channels_last(self.decoder(channels_first(h)))
