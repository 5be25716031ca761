"""The latent-grid encoder shared by ``latent1d`` and ``latent2d``: attention on a grid fixed in
physical space, reached from the input grid of any size by maps that converge under refinement.

    x (b, *n, c_in), pos (b, *n, d)
      --lift--> f = MLP([x, pos])           (b, c_f, *n)   pointwise on the input grid (channels-first)
      [--R_s--> s = R_s f, s + σ(Conv s)     (b, c_f, *k)   optional stencil grid of k points per axis]
      --R-----> R f                         (b, *m, c_f)   restriction to the latent grid (m per axis)
      --Linear, n_layers x EncoderLayer(attention(pos_dim=d) + FFN) [+ latent block: SpectralBlock
                (latent_modes) and/or a convolution (latent_kernel), residual] on the latent points
      --Linear--> z                         (b, *m, c_f)   handed back with f; the model prolongs z

Transfers ([`petrov.grids.transfer`][]), chosen by ``periodic``:

- node grids ``i/(n-1)`` (``periodic=False``, e.g. Darcy): quadrature-weighted hat averages ``R`` and
  linear interpolation ``P``; latent coordinates are ``pos`` interpolated at the latent nodes;
- periodic grids ``i/n`` (``periodic=True``, e.g. Burgers): Fourier truncation to the latent grid's
  frequencies and trigonometric interpolation back; coordinates enter the lift as ``(cos 2πx, sin 2πx)``
  (smooth on the torus); the attention's are those of the uniform latent grid ``i/m``.

``periodic`` may also be one bool per axis (e.g. periodic in ``x``, a node grid in ``y``): each axis takes its
own kind of transfer and of coordinate features.  ``domain`` (``[[lo, hi], ...]``, None: the unit box) is the
box the coordinates live in: the latent grid covers it, and a periodic axis' features are ``(cos, sin)`` of
``2π (x - lo) / (hi - lo)``.  The latent grid has ``latent_size`` points on every axis whatever the
domain's aspect ratio (it stays square in points, so its spacing follows the domain's lengths): every
config valid on the unit square stays valid on any box (``latent_modes <= latent_size // 2`` on every
axis, the latent convolution's kernel), the attention's cost is the same ``latent_size^d`` tokens, and
the attention sees the latent nodes' physical coordinates, so the anisotropy of a long box is an input
it can use; a grid whose points followed the aspect ratio would trade these for equal spacing.

Both make the latent features of one field the same (up to discretization error that vanishes under
refinement) whatever grid it is given on, so every map after them acts on one continuous object.  The
stencil grid (``stencil_size``, node grids only) is fixed in physical space too: a convolution there is
a stencil of fixed physical width, finer than the latent grid's, on the lifted features before they are
averaged onto the latent grid (an inverse problem reads its coefficient from such local derivatives of u:
the latent convolution alone sees them at the latent spacing only).

The two halves are also callable apart, for inputs that are not grids (``mesh_latent``: nodes of a
mesh, restricted by [`restrict_points`][petrov.grids.transfer.restrict_points]): [`LatentEncoder.lift_features`][]
(the pointwise lift) and [`LatentEncoder.latent_operator`][] (everything on the latent grid, with
optional latent quadrature weights and a coverage factor).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..grids.domain import Domain, Periodic, any_periodic, domain_axes, periodic_axes
from .blocks import EncoderConfig, SpectralBlock, activation, encoder_stack, mlp, pointwise
from ..grids.layout import cached_grid_coordinates, channels_first, channels_last, grid_to_points, points_to_grid
from ..grids.transfer import check_restriction_sizes, fourier_resample, prolong, restrict


@dataclass
class LatentGridConfig(EncoderConfig):
    """The shared encoder: pointwise lift on the input grid -> restriction -> attention on the latent
    grid of ``latent_size`` points per axis.

    - ``latent_size``: points per axis of the latent grid (fixed in physical space), where the
      attention runs.
    - ``fine_width``: channels of the pointwise lift on the input grid (``c_f``: the lift, the skip
      and the decoder's input run at this width on every input point).
    - ``fine_hidden``: hidden width of the lift MLP (``None``: ``2 * fine_width``).
    - ``lift_activation``: activation of the lift MLP.
    - ``latent_modes``: after every attention layer, a spectral block keeping this many modes on the
      latent grid, in a residual branch (0: off).
    - ``latent_kernel``: after every attention layer, a convolution this many latent points wide, in
      a residual branch (a stencil of fixed physical width: the derivatives an inverse problem
      needs; 0: off).
    - ``stencil_size``: points per axis of a node grid fixed in physical space, between the input
      grid and the latent grid, where the lifted features pass a ``stencil_kernel``-wide convolution
      (``c_f`` channels, in a residual branch) before they are restricted to the latent grid: local
      derivatives at a scale finer than the latent grid's, which an inverse problem reads its
      coefficient from (0: off; node grids only).
    - ``stencil_kernel``: taps per axis of that convolution (odd).
    - ``periodic``: periodic grids ``i/n`` (Fourier truncation and trigonometric interpolation,
      coordinates as ``(cos 2πx, sin 2πx)``) instead of node grids ``i/(n-1)`` (hat averages and
      linear interpolation); one bool for all axes or one per axis.
    - ``domain``: ``[[lo, hi], ...]`` per axis, the box the grid covers (None: the unit box; module doc).
    """

    n_heads: int = 4
    latent_size: int = 16
    fine_width: int = 32
    fine_hidden: Optional[int] = None  # hidden width of the lift MLP, default 2 * fine_width
    lift_activation: str = "gelu"
    # Local operators on the latent grid after every attention layer, each in a residual branch
    # (fixed grid, so both are resolution-invariant): a SpectralBlock keeping latent_modes modes,
    # and/or a latent_kernel-wide convolution (a stencil of fixed physical width per tap: the
    # derivatives an inverse problem needs).  0 = off.
    latent_modes: int = 0
    latent_kernel: int = 0
    stencil_size: int = 0
    stencil_kernel: int = 3
    periodic: Periodic = False
    domain: Domain = None


def coordinate_features(pos: torch.Tensor, periodic: bool | tuple[bool, ...],
                        domain: tuple[tuple[float, float], ...] | None = None) -> torch.Tensor:
    """``(…, d) -> (…, d)`` on node grids (``pos`` itself), ``(…, 2d)`` on periodic ones: ``(cos 2πx,
    sin 2πx)`` per axis (all cosines, then all sines); ``periodic`` per axis: the periodic axes' cosines,
    their sines, then the node axes' coordinates (``(…, d + p)``, ``p`` periodic axes).  On a box
    ``domain`` a periodic axis' angle is ``2π (x - lo) / (hi - lo)``.

    A periodic coordinate ``x = i/n`` jumps from ``1 - 1/n`` to 0 at the wrap; every map that
    integrates it (restriction, spectral layers, attention's sums) would then see a discontinuity
    whose discrete Fourier coefficients and quadratures depend on ``n``.  Its cosine and sine are
    smooth on the torus."""
    flags = periodic if isinstance(periodic, tuple) else (periodic,) * pos.shape[-1]
    if not any(flags):
        return pos
    if all(flags) and domain is None:
        angle = 2 * torch.pi * pos
        return torch.cat([torch.cos(angle), torch.sin(angle)], dim=-1)
    box = domain or ((0.0, 1.0),) * len(flags)
    angle = torch.stack([2 * torch.pi * (pos[..., i] - box[i][0]) / (box[i][1] - box[i][0])
                         for i, p in enumerate(flags) if p], dim=-1)
    nodes = [pos[..., i:i + 1] for i, p in enumerate(flags) if not p]
    return torch.cat([torch.cos(angle), torch.sin(angle), *nodes], dim=-1)


def pad_grid(x: torch.Tensor, p: int, ndim: int, periodic: bool | tuple[bool, ...]) -> torch.Tensor:
    """``(b, c, *m) -> (b, c, *(m + 2p))``: each of the last ``ndim`` axes extended by ``p`` nodes per side,
    wrapped around (``periodic``, one bool or one per axis) or repeating the edge node (node grids), from
    slices and ``cat``.

    Not ``F.pad(mode="replicate")``: under ``torch.compile`` on the CPU (torch 2.11-2.13) the backward of
    ``aten.replication_pad2d`` returns a channels-last gradient where the compiled graph expects a
    contiguous one, and the step stops on a stride assertion."""
    flags = periodic if isinstance(periodic, tuple) else (periodic,) * ndim
    for dim, axis_periodic in zip(range(x.dim() - ndim, x.dim()), flags):
        n = x.shape[dim]
        if axis_periodic:
            before, after = x.narrow(dim, n - p, p), x.narrow(dim, 0, p)
        else:
            size = list(x.shape)
            size[dim] = p
            before, after = x.narrow(dim, 0, 1).expand(size), x.narrow(dim, n - 1, 1).expand(size)
        x = torch.cat([before, x, after], dim=dim)
    return x


class GridConv(nn.Module):
    """``(b, d, *m) -> (b, d, *m)``: a ``kernel``-wide convolution on the latent grid, its border padded by
    [`pad_grid`][] (wrapped on periodic grids, the edge node repeated on node grids).

    Its parameters, ``weight (d, d, *k)`` and ``bias (d,)``, are an ``nn.Conv{1,2}d``'s: the same initial
    values and the same ``state_dict`` keys as the convolution layer it stands for."""

    def __init__(self, channels: int, kernel: int, ndim: int, periodic: bool | tuple[bool, ...]):
        super().__init__()
        conv = (nn.Conv1d, nn.Conv2d)[ndim - 1](channels, channels, kernel)
        self.weight, self.bias = conv.weight, conv.bias
        self.pad, self.ndim, self.periodic = kernel // 2, ndim, periodic

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = (F.conv1d, F.conv2d)[self.ndim - 1]
        return conv(pad_grid(x, self.pad, self.ndim, self.periodic), self.weight, self.bias)


def latent_block(c: LatentGridConfig, ndim: int, periodic: tuple[bool, ...] | None = None) -> nn.Sequential:
    """``(b, d, *m) -> (b, d, *m)`` on the latent grid: an optional ``SpectralBlock`` (``latent_modes``), then an
    optional convolution (``latent_kernel``, [`GridConv`][]) and its activation σ."""
    layers: list[nn.Module] = []
    if c.latent_modes:
        layers.append(SpectralBlock(c.d_model, c.d_model, c.latent_modes, ndim=ndim, act=c.ffn_activation))
    if c.latent_kernel:
        wrap = periodic if periodic is not None else periodic_axes(c.periodic, ndim, "latent_kernel")
        layers += [GridConv(c.d_model, c.latent_kernel, ndim, wrap), activation(c.ffn_activation)]
    return nn.Sequential(*layers)


class LatentEncoder(nn.Module):
    """``x (b, *n, c_in)``, ``pos (b, *n, ndim)`` (raw coordinates) -> fine features ``f (b, c_f, *n)``
    (channels-first, as the restriction and the spectral decoder take them), latent features ``z (b, *m,
    c_f)`` (already mapped back to ``c_f`` channels); ``ndim`` is 1 or 2."""

    def __init__(self, c: LatentGridConfig, ndim: int):
        super().__init__()
        for name, low in (("latent_size", 2), ("fine_width", 1)):
            if getattr(c, name) < low:
                raise ValueError(f"{name} must be >= {low}, got {getattr(c, name)}")
        if c.latent_modes < 0 or 2 * c.latent_modes > c.latent_size:
            raise ValueError(f"latent_modes must be in [0, latent_size // 2], got {c.latent_modes} "
                             f"for latent_size {c.latent_size}")
        for name in ("latent_kernel", "stencil_kernel"):
            k = getattr(c, name)
            if k < 0 or (k and k % 2 == 0):
                raise ValueError(f"{name} must be 0 (off) or an odd size, got {k}")
        if c.stencil_size and (c.stencil_size < 2 or any_periodic(c.periodic) or not c.stencil_kernel):
            raise ValueError(f"stencil_size must be 0 (off) or >= 2 on a node grid (periodic = false) with an odd "
                             f"stencil_kernel, got stencil_size {c.stencil_size}, stencil_kernel {c.stencil_kernel}, "
                             f"periodic {c.periodic}")
        flags = periodic_axes(c.periodic, ndim, "LatentEncoder")
        self.domain = domain_axes(getattr(c, "domain", None), ndim, "LatentEncoder")
        # one bool where the axes agree (the transfers of the whole grid at once), else one per axis
        self.periodic = flags[0] if len(set(flags)) == 1 else flags
        self.axis_periodic = flags
        self.latent = (c.latent_size,) * ndim  # square in points on any domain (module doc)
        self.coord_dim = ndim + sum(flags)  # see coordinate_features
        self.lift = mlp(c.in_channels + self.coord_dim, c.fine_hidden or 2 * c.fine_width, c.fine_width,
                        c.lift_activation)
        self.stencil_grid = (c.stencil_size,) * ndim
        self.stencil = (nn.Sequential(GridConv(c.fine_width, c.stencil_kernel, ndim, periodic=False),
                                      activation(c.lift_activation)) if c.stencil_size else None)
        self.to_latent = nn.Linear(c.fine_width, c.d_model)
        self.layers = encoder_stack(c, pos_dim=ndim)
        local = c.latent_modes or c.latent_kernel
        self.local = nn.ModuleList(latent_block(c, ndim, flags) for _ in range(c.n_layers if local else 0))
        self.from_latent = nn.Linear(c.d_model, c.fine_width)

    def restrict(self, u: torch.Tensor) -> torch.Tensor:
        """``(b, c, *n) -> (b, c, *m)`` onto the latent grid (Fourier truncation / hat averages); with a
        stencil grid (``stencil_size``), through it: ``s = R_s u``, ``R (s + σ(Conv s))``."""
        if isinstance(self.periodic, tuple):
            return _resample_axes(u, self.latent, self.axis_periodic, restrict)
        if self.periodic:
            return fourier_resample(u, self.latent)
        if self.stencil is not None:
            for n, k in zip(u.shape[2:], self.stencil_grid):
                check_restriction_sizes(k, n, "stencil grid", "stencil_size")
            s = restrict(u, self.stencil_grid)
            u = s + self.stencil(s)
        return restrict(u, self.latent)

    def prolong(self, z: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
        """``(b, c, *m) -> (b, c, *size)`` from the latent grid (trigonometric / linear interpolation)."""
        if isinstance(self.periodic, tuple):
            return _resample_axes(z, size, self.axis_periodic, prolong)
        return fourier_resample(z, size) if self.periodic else prolong(z, size)

    def coordinate_features(self, pos: torch.Tensor) -> torch.Tensor:
        """``(…, coord_dim)``: see [`coordinate_features`][]."""
        return coordinate_features(pos, self.axis_periodic, self.domain)

    def latent_coordinates(self, pos: torch.Tensor) -> torch.Tensor:
        """``(b, *m, ndim)``: the uniform periodic grid ``i/m`` (the attention's coordinates live on the
        fixed latent grid, so its wrap does not move with the input), or ``pos`` interpolated at the
        latent nodes; with periodicity per axis, the uniform latent grid of each axis' kind (on the
        ``domain``)."""
        if self.periodic is True or isinstance(self.periodic, tuple):
            grid = cached_grid_coordinates(self.latent, self.periodic, pos.dtype, pos.device, domain=self.domain)
            return grid.expand(pos.shape[0], *grid.shape)
        return channels_last(prolong(channels_first(pos), self.latent))

    def lift_input(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``[x, coordinate_features(pos)]``: ``(…, c_in)``, ``(…, ndim)`` -> ``(…, c_in + coord_dim)``."""
        return torch.cat([x, self.coordinate_features(pos)], dim=-1)

    def lift_features(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``f = MLP([x, coordinate_features(pos)])``, pointwise: ``(…, c_in)``, ``(…, ndim)`` -> ``(…, c_f)``."""
        return self.lift(self.lift_input(x, pos))

    def latent_operator(self, z: torch.Tensor, pos_z: torch.Tensor, weights: torch.Tensor | None = None,
                        coverage: torch.Tensor | None = None) -> torch.Tensor:
        """Everything on the latent grid: ``z (b, *m, c_f)`` restricted features, ``pos_z (b, M, ndim)``
        the latent nodes' coordinates (``M = prod(m)``) -> ``(b, *m, c_f)``.

        ``weights (b, M)``: the attention's quadrature weights on the latent nodes (None: uniform);
        ``coverage (b, *m)``: multiplies the first latent features, ``coverage · Linear(z)`` (a point-set
        domain's soft mask, see ``mesh_latent``; None: 1)."""
        h = self.to_latent(z)
        if coverage is not None:
            h = h * coverage.unsqueeze(-1).to(h.dtype)
        h = grid_to_points(h)
        for i, layer in enumerate(self.layers):
            h = layer(h, pos_z, weights)
            if self.local:
                grid = channels_first(points_to_grid(h, self.latent))
                h = h + grid_to_points(channels_last(self.local[i](grid)))
        return self.from_latent(points_to_grid(h, self.latent))

    def forward(self, x: torch.Tensor, pos: torch.Tensor):
        # the lift's input has few channels: converted to channels-first before the lift, not its output
        f = pointwise(self.lift, channels_first(self.lift_input(x, pos)))
        z = channels_last(self.restrict(f))
        return f, self.latent_operator(z, grid_to_points(self.latent_coordinates(pos)))


def _resample_axes(u: torch.Tensor, size: tuple[int, ...], periodic: tuple[bool, ...], node_map) -> torch.Tensor:
    """``(b, c, *n) -> (b, c, *size)`` axis by axis: Fourier resampling on the periodic axes, ``node_map``
    (``restrict`` or ``prolong`` of ``petrov.grids.transfer``) on the node axes."""
    first = u.dim() - len(size)
    for i, (m, axis_periodic) in enumerate(zip(size, periodic)):
        v = u.movedim(first + i, -1)
        u = (fourier_resample(v, (m,)) if axis_periodic else node_map(v, (m,))).movedim(-1, first + i)
    return u
