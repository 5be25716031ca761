"""neuraloperator's GINO (``neuralop.models.GINO``, as installed) behind petrov's point-set interface.

    x (b, n, c_in) [+ the distance to the boundary], pos (b, n, 2)    each sample's own mesh
      --GNO in--> the latent grid of latent_size² nodes on [0, 1]²   mean over the nodes within in_gno_radius
      --lifting, FNO blocks-->                                        on the latent grid
      --GNO out--> the mesh's nodes                                   sum over the latent nodes within out_gno_radius
      --projection--> (b, n, c_out), exact zeros on the boundary nodes and on padding

GINO batches only samples that share one geometry, so every sample of a batch is a call of its own on its
own nodes (the padding cut off).  Its neighbourhood reductions (``segment_csr``: a sum or a mean over the
nodes within the radius) run through ``torch.segment_reduce`` (``segment_sums``), the sums
``torch_scatter.segment_csr`` computes (its fast path, which PyPI ships only as a C++ source distribution):
neuraloperator's own fallback loops in Python over the output points of each GNO layer: 3.1 s per
``level1`` sample forward and backward against 0.6 s (AMD EPYC, one thread, loaded), which would leave
GINO less than one epoch in the budget.  The neighbour search is its pure-PyTorch one (``open3d``'s is for 3-D points).  The quadrature
weights enter nothing (GINO's input GNO averages the nodes within the radius with equal weights).  The
radii must reach a node from every latent point inside the domain on the coarsest mesh (``level0``
spacing ~0.06).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.nn import functional as F

from _common import TensorState
from petrov.grids.layout import grid_coordinates
from petrov.operators.models.base import PointSetOperator

MODEL_NAME = "mesh_gino"


@dataclass
class MeshGinoConfig:
    in_channels: int = 1
    out_channels: int = 1
    latent_size: int = 32
    fno_n_modes: list = field(default_factory=lambda: [12, 12])
    fno_hidden_channels: int = 32
    fno_n_layers: int = 4
    in_gno_radius: float = 0.08
    out_gno_radius: float = 0.08
    gno_embed_channels: int = 16
    in_gno_channel_mlp_hidden_layers: list = field(default_factory=lambda: [64, 64])
    out_gno_channel_mlp_hidden_layers: list = field(default_factory=lambda: [128, 64])
    projection_channel_ratio: int = 2
    dirichlet: bool = True
    boundary_features: bool = True


class MeshGino(TensorState, PointSetOperator):
    """Point sets ``(b, n, c_in)``, ``pos (b, n, 2)``, ``weights (b, n)`` -> ``(b, n, c_out)``."""

    def __init__(self, config: MeshGinoConfig):
        super().__init__(config)
        from neuralop.models import GINO

        c = config
        self.gino = GINO(in_channels=self.feature_channels, out_channels=c.out_channels, gno_coord_dim=2,
                         fno_n_modes=tuple(c.fno_n_modes), fno_hidden_channels=c.fno_hidden_channels,
                         fno_n_layers=c.fno_n_layers,
                         fno_in_channels=self.feature_channels,  # the linear kernel scales each input channel
                         in_gno_radius=c.in_gno_radius, out_gno_radius=c.out_gno_radius,
                         gno_embed_channels=c.gno_embed_channels,
                         in_gno_channel_mlp_hidden_layers=list(c.in_gno_channel_mlp_hidden_layers),
                         out_gno_channel_mlp_hidden_layers=list(c.out_gno_channel_mlp_hidden_layers),
                         projection_channel_ratio=c.projection_channel_ratio,
                         gno_use_open3d=False, gno_use_torch_scatter=False)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                mask: torch.Tensor | None = None, boundary: torch.Tensor | None = None,
                boundary_distance: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.point_inputs(x, pos, weights, mask, boundary)
        features = self.features(x, pos, boundary, mask, boundary_distance)
        m = self.config.latent_size
        latent = grid_coordinates((m, m), dtype=pos.dtype, device=pos.device)[None]  # (1, m, m, 2)
        counts = [x.shape[1]] * len(x) if mask is None else mask.sum(dim=1).tolist()
        outs = []
        for k, n in enumerate(counts):  # one geometry per call
            nodes = pos[k:k + 1, :n]
            out = self.gino(input_geom=nodes, latent_queries=latent, output_queries=nodes, x=features[k:k + 1, :n])
            outs.append(F.pad(out.to(x.dtype), (0, 0, 0, x.shape[1] - n)))
        return self.finish(torch.cat(outs), mask, boundary)


def segment_sums(src: torch.Tensor, indptr: torch.Tensor, reduction: str, use_scatter: bool = True) -> torch.Tensor:
    """neuraloperator's ``segment_csr``: ``src (…, n_reps, c)`` reduced over the CSR segments ``indptr
    (…, n_out + 1)`` -> ``(…, n_out, c)``, ``"sum"`` or ``"mean"`` (0 on an empty segment, as
    ``torch_scatter``), by ``torch.segment_reduce``."""
    lengths = indptr.diff(dim=-1)
    out = torch.segment_reduce(src, "sum", lengths=lengths, axis=src.ndim - 2, unsafe=True, initial=0.0)
    if reduction == "mean":
        out = out / lengths.clamp_min(1).unsqueeze(-1).to(out.dtype)
    return out


def register_gino() -> None:
    """Register ``mesh_gino`` (needs ``pip install neuraloperator==2.0.0``), its reductions through
    ``segment_sums``."""
    from neuralop.layers import integral_transform

    from petrov.operators.models import MODELS, register_model

    integral_transform.segment_csr = segment_sums

    if MODEL_NAME not in MODELS.names():
        register_model(MODEL_NAME, MeshGinoConfig)(MeshGino)
