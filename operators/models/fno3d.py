"""``fno3d``: FNO on space-time, all ``T`` states at once (the FNO paper's Navier–Stokes model
``fourier_3d.py``).

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)``,
``x = (u_0..u_{h-1}): (b, n1, n2, h F)`` -> ``(b, n1, n2, (h + T) F)`` (states ``0..h-1`` = ``x``; ``F =
fields`` channels per state, state-major).  The model does
not step: ``teacher`` is accepted (the trainer's teacher-forced and pushforward passes call it so), its
shape checked, and its values ignored: every output depends on ``x`` alone (causal trivially), and a
rollout is the same single pass.

    v_0(x, y, t_j) = Linear([u_0..u_{h-1}](x, y), x, y, t_j)   the h F channels repeated along a time axis of
                                                             the T output times, t_j = j / (T - 1)
                                                             (0 for T = 1), lifted to ``width``
    v_0 padded with ``padding`` zero times at the end        the time axis is not periodic
    v_{l+1} = σ(K_l v_l + W_l v_l + b_l),  l < n_layers      3-D spectral convolutions: ``modes`` per space
                                                             axis (both signs), ``time_modes`` in time; no
                                                             σ after the last
    u_{h+j} = MLP(v_L(x, y, t_j))                             padding removed; width -> proj_hidden -> F

The lift is linear, so it runs on the ``(b, h F + 2, n1, n2)`` input once and a time term is added per
``t_j``: the numbers of a lift of the repeated ``(h F + 3)``-channel input.  The reference's facts
(zongyi-li/fourier_neural_operator, ``fourier_3d.py``): the first 10 states repeated along the output's
time axis with ``(x, y, t)`` (13 channels), width 20, 8 modes per axis, 4 layers, 6 zero times padded,
GELU, a 128-wide projection, coordinates ``linspace(0, 1, ·)`` on every axis; those are the defaults
(``history`` = 1 by the contract; NS's set-up is ``history = 10``, ``time_steps = 10``).  Here the space
coordinates are the periodic grid ``i/n``.  Spatial grids need ``2 modes`` points per axis.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ...common.config import check_positive
from ..blocks import SpectralBlock, channel_product, mlp, pointwise
from ...grids.layout import channels_first
from ...grids.shape_cache import shape_cached
from ..trajectory import MarchingFields, as_channels, check_marching_config, check_teacher, marching_inputs
from . import register_model
from .base import GridOperator
from .fno import FNO1dConfig


@dataclass
class FNO3dConfig(MarchingFields, FNO1dConfig):
    """The options of ``fno3d`` (defaults: the reference's Navier–Stokes sizes): ``fno1d``'s, where

    - ``in_channels``, ``out_channels``: the channels of one state, ``fields`` (the channels of ``x`` are
      the states' fields).
    - ``modes``: Fourier modes per space axis (frequencies ``-modes..modes-1``).
    - ``padding``: zero times appended to the time axis before the blocks and removed after (the
      time axis is not periodic; the space axes are not padded),

    and

    - ``time_steps``: the states ``T`` it predicts (the length of its time axis).
    - ``history``: the states ``h`` it is given (``x`` holds states ``0..h-1``; FNO's NS: 10).
    - ``time_modes``: Fourier modes of the time axis (``0..time_modes-1``; at most ``(T + padding) // 2 + 1``).
    """

    width: int = 20
    modes: int = 8
    proj_hidden: int = 128
    padding: int = 6
    time_modes: int = 8

    def __post_init__(self):
        super().__post_init__()
        check_marching_config(self)
        check_positive(self, "time_modes")
        length = self.time_steps + self.padding
        if self.time_modes > length // 2 + 1:
            raise ValueError(f"FNO3dConfig: time_modes = {self.time_modes} needs a time axis of at least "
                             f"{2 * (self.time_modes - 1)} points, but time_steps + padding = {length}; use "
                             f"time_modes <= {length // 2 + 1} or more padding")


@shape_cached
def output_times(steps: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``(T,)``: ``t_j = j / (T - 1)`` (``linspace(0, 1, T)``; ``[0]`` for ``T = 1``)."""
    return torch.linspace(0.0, 1.0, steps, dtype=dtype, device=device)


@register_model("fno3d", FNO3dConfig)
class FNO3d(GridOperator):
    """FNO-3D on space-time, all T states at once: ``(b, n1, n2, h F)`` -> ``(b, n1, n2, (h + T) F)``."""

    ndim = 2

    def __init__(self, config: FNO3dConfig):
        super().__init__(config)
        c = config
        self.lift = nn.Linear(c.history * c.fields + 3, c.width)  # [states, x, y, t]
        modes = (c.modes, c.modes, c.time_modes)
        self.blocks = nn.ModuleList(
            SpectralBlock(c.width, c.width, modes, 3, c.activation if i < c.n_layers - 1 else None)
            for i in range(c.n_layers)
        )
        self.project = mlp(c.width, c.proj_hidden, c.fields, c.activation)

    @property
    def input_channels(self) -> int:
        return self.config.history * self.config.fields

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                teacher: torch.Tensor | None = None) -> torch.Tensor:
        """``teacher`` is ignored (module docstring; its shape is checked): the output depends on ``x`` (and
        ``pos``) alone."""
        pos = marching_inputs(self, x, pos)
        c, steps = self.config, self.config.time_steps
        if teacher is not None:
            check_teacher(x, teacher, steps, type(self).__name__, c.fields)
        space = channels_first(torch.cat([x, pos], dim=-1))  # (b, h F + 2, n1, n2)
        w, bias = self.lift.weight, self.lift.bias
        v = channel_product(w[:, :-1], bias, space)  # the lift of the time-constant channels
        times = torch.outer(w[:, -1], output_times(steps, x.dtype, x.device))  # (width, T): its t term
        v = v.unsqueeze(-1) + times[None, :, None, None, :]  # (b, width, n1, n2, T)
        if c.padding:
            v = F.pad(v, (0, c.padding))
        for block in self.blocks:
            v = block(v)
        out = pointwise(self.project, v[..., :steps])  # (b, F, n1, n2, T)
        return torch.cat([x, as_channels(out.permute(0, 2, 3, 4, 1))], dim=-1)  # states T of F, state-major
