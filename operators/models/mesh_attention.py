"""``mesh_attention``: attention on all the nodes of a mesh, with its quadrature weights.

    x (b, n, c_in), pos (b, n, 2), weights w (b, n)
      --lift--> h = MLP([x, pos])                              (b, n, d_model)   pointwise
      --n_layers x EncoderLayer(attention(pos_dim=2, weights=w) + FFN)            every node
      --PointwiseDecoder([h, pos])-->                          (b, n, c_out)
      --> exact zeros on the boundary nodes (``dirichlet``) and on padding

The only maps that couple nodes are the attention layers, and every sum they take over the nodes is
the quadrature ``Σ_j w_j (…)_j`` (the Galerkin product ``K̃ᵀ diag(w) Ṽ``, the column norms' means and
norms, the softmax's weighted sums, …), an approximation of an integral over Ω: on refined meshes of
one domain the model converges to one operator, and nodes of weight 0 (padding) take no part.
Any registered mixer plugs in by name.  Cost O(n d²) per layer for the linear-cost mixers, O(n² d)
for softmax and dense Fourier-type attention.

Forward contract ([`petrov.operators.models.base`][]): ``forward(x, pos, weights, mask=None,
boundary=None) -> (b, n, c_out)``; ``boundary`` is required with ``dirichlet=True``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ...common.config import check_positive
from ..blocks import EncoderConfig, encoder_stack, mlp, pointwise_decoder
from . import register_model
from .base import PointSetOperator


@dataclass
class MeshAttentionConfig(EncoderConfig):
    """The options of ``mesh_attention``: the encoder's (attention over every node), and

    - ``lift_hidden``: hidden width of the lift MLP (``None``: ``d_model``).
    - ``lift_activation``: activation of the lift MLP.
    - ``decoder_hidden``: hidden width of the pointwise decoder (``None``: ``d_model``).
    - ``decoder_layers``: hidden layers of the pointwise decoder.
    - ``decoder_activation``: activation of the pointwise decoder.
    - ``dirichlet``: exact zeros on the boundary nodes of the output (needs the boundary flags).
    - ``boundary_features``: the distance of each node to the nearest boundary node as an extra
      input channel (the model sees the domain's shape).
    """

    n_heads: int = 4
    lift_hidden: Optional[int] = None  # hidden width of the lift MLP, default d_model
    lift_activation: str = "gelu"
    decoder_hidden: Optional[int] = None  # default d_model
    decoder_layers: int = 1
    decoder_activation: str = "silu"
    dirichlet: bool = True
    boundary_features: bool = True  # the distance to the boundary as an input channel

    def __post_init__(self):
        super().__post_init__()
        check_positive(self, "lift_hidden", "decoder_hidden", "decoder_layers")


@register_model("mesh_attention", MeshAttentionConfig)
class MeshAttention(PointSetOperator):
    """Point sets ``(b, n, c_in)``, ``pos (b, n, 2)``, ``weights (b, n)`` -> ``(b, n, c_out)``."""

    def __init__(self, config: MeshAttentionConfig):
        super().__init__(config)
        c = config
        self.lift = mlp(self.feature_channels + 2, c.lift_hidden or c.d_model, c.d_model, c.lift_activation)
        self.layers = encoder_stack(c, pos_dim=2)
        self.decoder = pointwise_decoder(c, c.d_model, c.decoder_hidden or c.d_model)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                mask: torch.Tensor | None = None, boundary: torch.Tensor | None = None,
                boundary_distance: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.point_inputs(x, pos, weights, mask, boundary)
        h = self.lift(torch.cat([self.features(x, pos, boundary, mask, boundary_distance), pos], dim=-1))
        for layer in self.layers:
            h = layer(h, pos, weights)
        return self.finish(self.decoder(h, pos), mask, boundary)
