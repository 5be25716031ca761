"""Transolver (Wu et al., ICML 2024) on grids: ``transolver1d`` and ``transolver2d``.

The published structure (thuml/Transolver, ``Transolver_1D`` / the irregular-mesh model):

    x (b, *grid, c_in), pos (b, *grid, d)  --flatten--> points (b, n, ·) with quadrature weights w
      --preprocess MLP([x, c(pos)]): Linear(c_in + coord, 2 d_model), GELU, Linear(·, d_model)
      --> n_layers x [ h = h + PhysicsAttention(LayerNorm(h)),  h = h + MLP(LayerNorm(h)) ]
      --> LayerNorm, Linear(d_model, c_out)                         --> (b, *grid, c_out)

Physics attention is the ``"physics"`` mixer ([`petrov.operators.attention.mixers.physics`][]) in petrov's
attention layer: K and V projections of width ``n_heads * (d_model // n_heads)`` (the reference's
``in_project_x``, ``in_project_fx``), ``n_slices`` slices per head, the output projection
(``to_out``).  The block MLP is ``Linear(d_model, dim_feedforward), GELU, Linear(·, d_model)``
(``dim_feedforward`` defaults to d_model: the reference's ``mlp_ratio = 1``).  As in the reference, every
Linear weight is drawn from a normal distribution with std ``init_std`` (0.02; the reference's
``trunc_normal_`` cuts at ±2 in absolute value, which at that std cuts nothing), biases 0, LayerNorms
1 and 0 — except the slice projections, which keep their orthogonal start (``slice_init="orthogonal"``,
the default).  The reference's model-wide normal initialization also overwrites the orthogonal start
its attention module sets (``slice_init="normal"`` reproduces that); then the slice logits spread by
~0.04, every point is assigned almost uniformly to every slice, all tokens are nearly the same mean,
and the output depends on the assignment only at second order: the slice projections' gradients start
~10⁵ times smaller than the block MLPs' (measured at the Darcy budget size, 85 x 85).  Orthogonal rows
spread the logits ~10x more and the gradients ~10x larger.  Adam rescales the steps either way; in a
probe on Darcy both starts reached the same validation error within 200 steps (benchmarks/compare_accuracy.py
states it), so the default is the principled start, not a measured accuracy gain.

Choices that make it one operator at every resolution (it is evaluated on grids it was not trained
on):

- The linear-projection (mesh) variant: the reference's structured-mesh models project with 3x3
  convolutions, a stencil whose physical width is one grid spacing, so the operator changes with the
  grid (it is not resolution-invariant).  Here every map is pointwise except the slice tokens.
- The slice tokens are quadratures with the grid's weights: the tensor-product trapezoid rule on
  node grids ``i/(n-1)``, uniform weights on periodic grids ``i/n`` (where the trapezoid rule is the
  plain mean) ([`petrov.grids.transfer.grid_weights`][]).  The reference's plain sums over
  the points are the same on uniform periodic grids but not on node grids (the boundary nodes would
  count double).
- Coordinates enter the preprocess as ``(cos 2πx, sin 2πx)`` on periodic grids
  ([`petrov.operators.latent_encoder.coordinate_features`][]: a raw periodic coordinate jumps at the wrap,
  and the slice integrals of a jump converge only at first order); raw ``x`` on node grids.  With
  ``unified_pos = R > 0`` they enter instead as the reference's Darcy features: the Euclidean distances
  to the ``R^d`` nodes of a uniform reference grid on ``[0, 1]^d`` (its Darcy run: ``R = 8``, 64
  features), on periodic grids the distances on the torus ([`reference_distances`][]).  Both are
  functions of the physical position, the same at every resolution.
- ``dirichlet=True`` (node grids): the output's boundary nodes are exact zeros (as ``latent2d``).

Left out: the reference's ``placeholder``, a learned vector added after the preprocess, which
duplicates the preprocess's last bias (128 parameters at the published width).

``REFERENCE_CONFIG``: the published size for the standard benchmarks (Darcy, elasticity: 8 layers,
width 128, 8 heads, 64 slices, mlp_ratio 1); ``REFERENCE_PARAMETERS`` its count for ``transolver2d``
with one input and one output channel (the published 2.8M counts the 3x3-convolution projections).
The defaults are smaller (CPU-trainable in minutes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ...grids.domain import Domain, Periodic, any_periodic, axis_lengths
from ...common.config import check_positive
from ..attention import Attention
from ..attention.mixers.physics import check_temperature
from ..blocks import FeedForward, FullPrecisionLinear, activation
from ..latent_encoder import coordinate_features
from ...grids.layout import cached_grid_coordinates, grid_to_points, points_to_grid
from ...grids.transfer import cached_grid_weights
from . import register_model
from .base import GridOperator, zero_boundary


@dataclass
class Transolver1dConfig:
    """The options of ``transolver1d`` (and, with other defaults, ``transolver2d``).

    - ``in_channels``: channels of the input field.
    - ``out_channels``: channels of the output field.
    - ``d_model``: width of the blocks.
    - ``n_layers``: blocks (physics attention and an MLP, each pre-norm in a residual branch).
    - ``n_heads``: attention heads.
    - ``n_slices``: slices per head (the tokens physics attention attends among).
    - ``temperature``: initial slice temperature τ of every head (learned).
    - ``dim_feedforward``: hidden width of the block MLP (``None``: ``d_model``, the reference's
      ``mlp_ratio = 1``).
    - ``preprocess_hidden``: hidden width of the preprocess MLP (``None``: ``2 * d_model``).
    - ``activation``: activation of the MLPs.
    - ``dropout``: dropout probability in the blocks.
    - ``init_std``: standard deviation of the normal initialization of every Linear weight.
    - ``slice_init``: ``"orthogonal"`` (the attention module's start of the slice projections) or
      ``"normal"`` (``init_std``, as the reference's model-wide initialization does).
    - ``unified_pos``: R > 0: coordinates enter as distances to the nodes of an ``R^d`` reference
      grid (the reference's Darcy: 8); 0: raw coordinates.
    - ``periodic``: the grid is periodic, ``x_i = i/n`` (else a node grid ``i/(n-1)``); one bool for all
      axes or one per axis.
    - ``dirichlet``: exact zeros on the boundary nodes of the output (node grids only).
    - ``domain``: ``[[lo, hi], ...]`` per axis, the box the coordinates live in (None: the unit box): the
      default coordinates, the period of a periodic axis' ``(cos, sin)`` and the reference grid of
      ``unified_pos`` are on it.
    """

    in_channels: int = 1
    out_channels: int = 1
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    n_slices: int = 32
    temperature: float = 0.5  # initial slice temperature τ of every head (learned)
    dim_feedforward: Optional[int] = None  # block MLP hidden width, default d_model (mlp_ratio 1)
    preprocess_hidden: Optional[int] = None  # default 2 * d_model
    activation: str = "gelu"
    dropout: float = 0.0
    init_std: float = 0.02
    slice_init: str = "orthogonal"  # "orthogonal" (the attention module's start) or "normal" (init_std, the reference)
    unified_pos: int = 0  # R > 0: coordinates as distances to an R^d reference grid (the reference's Darcy: 8)
    periodic: Periodic = True
    dirichlet: bool = False  # node grids only: exact zeros on the boundary nodes
    domain: Domain = None

    def __post_init__(self):
        check_positive(self, "in_channels", "out_channels", "d_model", "n_layers", "n_heads", "n_slices",
                       "dim_feedforward", "preprocess_hidden")
        name = type(self).__name__
        if self.d_model < self.n_heads:
            raise ValueError(f"{name}: d_model ({self.d_model}) must be at least n_heads ({self.n_heads})")
        check_temperature(self.temperature)
        if isinstance(self.init_std, bool) or not isinstance(self.init_std, (int, float)) \
                or not math.isfinite(self.init_std) or self.init_std <= 0:
            raise ValueError(f"{name}.init_std must be a positive number, got {self.init_std!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) or not 0 <= self.dropout < 1:
            raise ValueError(f"{name}.dropout must be a probability in [0, 1), got {self.dropout!r}")
        if self.slice_init not in SLICE_INITS:
            raise ValueError(f"{name}.slice_init must be one of {', '.join(SLICE_INITS)}, got {self.slice_init!r}")
        if isinstance(self.unified_pos, bool) or not isinstance(self.unified_pos, int) \
                or self.unified_pos < 0 or self.unified_pos == 1:
            raise ValueError(f"{name}.unified_pos must be 0 (raw coordinates) or a number of reference nodes "
                             f"per axis >= 2, got {self.unified_pos!r}")
        if self.dirichlet and any_periodic(self.periodic):
            raise ValueError(f"{name}: dirichlet=True needs a node grid (periodic=False on every axis); a "
                             f"periodic axis has no boundary")


@dataclass
class Transolver2dConfig(Transolver1dConfig):
    """The same fields; defaults for Darcy (node grids, zero boundary values)."""

    periodic: Periodic = False
    dirichlet: bool = True


SLICE_INITS = ("orthogonal", "normal")


def reference_distances(pos: torch.Tensor, nodes: int, periodic: bool | tuple[bool, ...],
                        domain: tuple[tuple[float, float], ...] | None = None) -> torch.Tensor:
    """``(…, d) -> (…, nodes^d)``: the Euclidean distance from each position to every node of the uniform
    grid ``linspace(0, 1, nodes)^d`` (nodes in row-major order; on the box ``domain`` where given); on
    the torus when ``periodic`` (per axis, one bool for all or one per axis: ``min(|x - r|, L - |x - r|)``
    with ``x - r`` taken modulo the axis length ``L``)."""
    d = pos.shape[-1]
    ref = cached_grid_coordinates((nodes,) * d, False, pos.dtype, pos.device, domain=domain).reshape(-1, d)
    diff = (pos[..., None, :] - ref).abs()
    flags = periodic if isinstance(periodic, tuple) else (periodic,) * d
    if all(flags) and domain is None:  # the unit torus (the numbers of the reference's form)
        diff = torch.remainder(diff, 1.0)
        diff = torch.minimum(diff, 1.0 - diff)
    elif any(flags):
        length = torch.tensor([L if p else math.inf for p, L in zip(flags, axis_lengths(domain, d))],
                              dtype=diff.dtype, device=diff.device)
        wrapped = torch.remainder(diff, length)
        diff = torch.where(torch.isinf(length), diff, torch.minimum(wrapped, length - wrapped))
    return torch.linalg.vector_norm(diff, dim=-1)


REFERENCE_CONFIG = {"d_model": 128, "n_layers": 8, "n_heads": 8, "n_slices": 64, "dim_feedforward": 128}
REFERENCE_PARAMETERS = 713_793  # transolver2d, 1 input and 1 output channel


class TransolverBlock(nn.Module):
    """``(b, n, d) -> (b, n, d)``: ``h + Attn(LN(h), w)``, then ``h + MLP(LN(h))`` (pre-norm)."""

    def __init__(self, c: Transolver1dConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(c.d_model)
        self.attention = Attention(c.d_model, mixer="physics", norm=None, n_heads=c.n_heads, dropout=c.dropout,
                                   mixer_options={"n_slices": c.n_slices, "temperature": c.temperature})
        self.norm2 = nn.LayerNorm(c.d_model)
        self.mlp = FeedForward(c.d_model, c.dim_feedforward or c.d_model, c.activation)

    def forward(self, h: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
        h = h + self.attention(self.norm1(h), None, weights)
        return h + self.mlp(self.norm2(h))


def add_layers(model: nn.Module, c: Transolver1dConfig, in_features: int) -> None:
    """Give ``model`` Transolver's layers: ``preprocess`` (``in_features`` -> d_model), ``blocks``, ``norm``,
    ``head`` (shared by the grid models and ``mesh_transolver``)."""
    hidden = c.preprocess_hidden or 2 * c.d_model
    model.preprocess = nn.Sequential(nn.Linear(in_features, hidden), activation(c.activation),
                                     nn.Linear(hidden, c.d_model))
    model.blocks = nn.ModuleList(TransolverBlock(c) for _ in range(c.n_layers))
    model.norm = nn.LayerNorm(c.d_model)
    model.head = FullPrecisionLinear(c.d_model, c.out_channels)  # float32 output under autocast


class _Transolver(GridOperator):
    def __init__(self, config: Transolver1dConfig):
        super().__init__(config)
        c = config
        coord_dim = c.unified_pos ** self.ndim if c.unified_pos else self.ndim + sum(self.axis_periodic)
        add_layers(self, c, c.in_channels + coord_dim)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The reference's initialization: normal with std ``init_std`` (truncated at ±2 absolute, as the
        reference) on every Linear weight, zero biases, LayerNorm weight 1 and bias 0; then, unless
        ``slice_init="normal"``, orthogonal slice projections (see the module docstring)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=self.config.init_std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        if self.config.slice_init == "orthogonal":
            for block in self.blocks:
                nn.init.orthogonal_(block.attention.mixer.slice.weight)

    def coordinate_features(self, pos: torch.Tensor) -> torch.Tensor:
        """``(…, d) -> (…, coord_dim)``: reference-grid distances (``unified_pos``), or ``(cos, sin)`` on
        periodic grids, or ``pos`` itself."""
        c = self.config
        # (mesh_transolver shares this method: a point set has neither attribute, and its config neither option)
        periodic, domain = getattr(self, "axis_periodic", c.periodic), getattr(self, "domain", None)
        if c.unified_pos:
            return reference_distances(pos, c.unified_pos, periodic, domain)
        return coordinate_features(pos, periodic, domain)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        """``(b, *grid, c_in)`` -> ``(b, *grid, c_out)``; ``pos`` defaults to the uniform grid."""
        c, name = self.config, type(self).__name__
        pos = self.grid_inputs(x, pos)
        grid = tuple(x.shape[1:-1])
        if any(n < 2 and not p for n, p in zip(grid, self.axis_periodic)):
            raise ValueError(f"{name}: a node grid needs at least 2 points per axis, got {grid}")
        # the slice tokens' quadrature (uniform on periodic grids: None takes the cheaper uniform path)
        periodic = self.axis_periodic
        weights = None if all(periodic) else cached_grid_weights(
            grid, periodic if len(set(periodic)) > 1 else False, pos.dtype, x.device).unsqueeze(0)
        h = grid_to_points(self.preprocess(torch.cat([x, self.coordinate_features(pos)], dim=-1)))
        for block in self.blocks:
            h = block(h, weights)
        out = points_to_grid(self.head(self.norm(h)), grid)
        return zero_boundary(out) if c.dirichlet else out


@register_model("transolver1d", Transolver1dConfig)
class Transolver1d(_Transolver):
    """Transolver on 1-D grids ``(b, n, c_in) -> (b, n, c_out)`` (periodic by default, as Burgers)."""

    ndim = 1


@register_model("transolver2d", Transolver2dConfig)
class Transolver2d(_Transolver):
    """Transolver on 2-D grids ``(b, n1, n2, c_in) -> (b, n1, n2, c_out)`` (node grids, zero boundary)."""

    ndim = 2
