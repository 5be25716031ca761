"""``marching1d``: an operator that marches a 1-D field in time, causal attention over the steps.

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)`` with
``x = u_0: (b, n, 1)``, ``pos: (b, n, 1)`` (default the periodic grid ``i/n``) returns the trajectory
``(b, n, T + 1)``, channel 0 = ``x``; ``teacher: (b, n, T + 1)`` switches from rollout to teacher
forcing (states 1..T-1 taken from it).  ``T = time_steps`` of the config.

One step ``k = 0 .. T-1`` (``w`` = ``width``, ``m`` = ``summary_modes``, ``d`` = ``d_model``):

    h_k = E(u_k, x)                  lift [u_k, x] -> w, ``encoder_layers`` spectral blocks   (b, w, n)
    s_k = S(h_k) + L(t_k)            S: the lowest m Fourier coefficients of h_k (rfft / n, real and
                                     imaginary parts) -> Linear -> d; t_k = k / T              (b, d)
    z_k = A(s_0, ..., s_k)           ``n_layers`` causal encoder layers over the steps (attention of
                                     the inherited config, coordinates t, norm "layer" or None) (b, d)
    u_{k+1} = B(u_k + D(h_k + P z_k))  P: Linear d -> w, a shift per channel broadcast over the grid;
                                     D: ``decoder_layers`` spectral blocks, MLP w -> proj_hidden -> 1;
                                     B: the lowest ``state_modes`` Fourier modes (None: identity)

``E``, ``S`` and ``D`` are resolution-invariant (point-wise maps, spectral blocks with a fixed
number of modes, Fourier coefficients normalized by ``n`` are quadratures), so the temporal
tokens ``s_k`` mean the same at every grid size.  ``A`` is causal: the step k+1 depends on the
states ``u_0..u_k`` only.

Teacher forcing runs ``E, S, D`` on all ``T`` states as one batch and ``A`` in its parallel
causal form; a rollout runs ``A`` as a recurrence (``EncoderLayer.step``): the temporal state is
constant-size (``d x d`` per head and layer) whatever the number of steps.  The temporal
quadrature weight is ``1/T`` per step in both forms (the parallel form over exactly T tokens).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ...common.config import check_positive
from ...common.dtypes import upcast
from ..attention.mixers import MIXERS, causal_mixers
from ..blocks import EncoderConfig, SpectralBlock, encoder_stack, mlp, pointwise
from ...grids.layout import channels_first, channels_last
from ...grids.fourier_modes import rfft_modes
from ..trajectory import (
    batch_as_steps,
    check_scalar_state,
    check_state_modes,
    check_time_steps,
    limit_state,
    repeat_per_step,
    steps_as_batch,
    teacher_states,
    time_coordinates,
)
from . import register_model
from .base import GridOperator


@dataclass
class Marching1dConfig(EncoderConfig):
    """The inherited attention/encoder fields configure the temporal attention ``A`` (``d_model``,
    ``n_layers``, ``mixer``...; causal, with a point-wise ``norm``); the rest the spatial maps:

    - ``time_steps``: steps ``T`` of a trajectory (the model returns ``T + 1`` states).
    - ``width``: channels of the spatial encoder ``E`` and decoder ``D``.
    - ``modes``: Fourier modes kept by the spatial spectral blocks.
    - ``encoder_layers``: spectral blocks of the spatial encoder ``E``.
    - ``decoder_layers``: spectral blocks of the spatial decoder ``D``.
    - ``summary_modes``: lowest Fourier coefficients of each state that make its temporal token.
    - ``state_modes``: keep only the lowest this many Fourier modes of every predicted state
      (periodic grids; ``None``: off).
    - ``proj_hidden``: hidden width of the decoder's output MLP.
    - ``activation``: activation of the spatial maps.
    - ``periodic``: the grid is periodic, ``x_i = i/n``.
    """

    norm: Optional[str] = "layer"  # causal attention needs a point-wise normalization
    causal: bool = True
    time_steps: int = 20
    width: int = 32
    modes: int = 16
    encoder_layers: int = 2
    decoder_layers: int = 2
    summary_modes: int = 8
    state_modes: Optional[int] = None  # band-limit each predicted state (periodic grids; None: off)
    proj_hidden: int = 64
    activation: str = "gelu"
    periodic: bool = True

    def __post_init__(self):
        super().__post_init__()
        check_time_steps(self.time_steps)
        check_scalar_state(self)
        check_positive(self, "width", "modes", "encoder_layers", "decoder_layers", "summary_modes", "proj_hidden")
        check_state_modes(self)
        if self.causal is not True:
            raise ValueError("marching1d: the temporal attention is causal by construction; causal must be true")


def recurrent_mixers() -> list[str]:
    """The causal mixers with a recurrent form (a constant-size state): those a rollout can step."""
    return [name for name in causal_mixers() if hasattr(MIXERS.get(name), "features")]


def _spectral_stack(width: int, modes: int, n_layers: int, act: str) -> nn.ModuleList:
    return nn.ModuleList(SpectralBlock(width, width, modes, ndim=1, act=act) for _ in range(n_layers))


@register_model("marching1d", Marching1dConfig)
class Marching1d(GridOperator):
    """``(b, n, 1)`` [, ``pos (b, n, 1)``, ``teacher (b, n, T + 1)``] -> ``(b, n, T + 1)``."""

    ndim = 1
    input_channels = 1  # one state

    def __init__(self, config: Marching1dConfig):
        super().__init__(config)
        c = config
        self.lift = nn.Linear(2, c.width)
        self.encoder = _spectral_stack(c.width, c.modes, c.encoder_layers, c.activation)
        self.summary = nn.Linear(2 * c.width * c.summary_modes, c.d_model)
        self.time_embedding = nn.Linear(1, c.d_model)
        self.temporal = encoder_stack(c, pos_dim=1)
        self.condition = nn.Linear(c.d_model, c.width)
        self.decoder = _spectral_stack(c.width, c.modes, c.decoder_layers, c.activation)
        self.project = mlp(c.width, c.proj_hidden, 1, c.activation)
        # a mixer without a recurrent form trains teacher-forced but cannot roll out: said at the rollout
        self._no_recurrence = "" if not isinstance(c.mixer, str) or c.mixer in recurrent_mixers() else (
            f"marching1d: mixer {c.mixer!r} has no recurrent form, which the rollout steps one time step at a "
            f"time; set model.options.mixer to one of {', '.join(recurrent_mixers())}")

    # --- the spatial maps (any number of states as a batch) -------------------------------------
    def _encode(self, u: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``E``: states ``(B, n, 1)`` -> features ``(B, w, n)``."""
        h = pointwise(self.lift, channels_first(torch.cat([u, pos], dim=-1)))
        for block in self.encoder:
            h = block(h)
        return h

    def _tokens(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``S(h) + L(t)``: ``h (B, w, n)``, ``t (B, 1)`` -> ``(B, d)``."""
        m = self.config.summary_modes
        if h.shape[-1] // 2 + 1 < m:
            raise ValueError(f"marching1d: summary_modes = {m} needs a grid of at least {2 * (m - 1)} points, "
                             f"got {h.shape[-1]}")
        flat = rfft_modes(upcast(h), m).flatten(1).to(h.dtype)  # quadratures: same at any n
        return self.summary(flat) + self.time_embedding(t)

    def _next(self, u: torch.Tensor, h: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``B(u + D(h + P z))``: ``u (B, n, 1)``, ``h (B, w, n)``, ``z (B, d)`` -> ``(B, n, 1)``."""
        h = h + self.condition(z).unsqueeze(-1)
        for block in self.decoder:
            h = block(h)
        return limit_state(u + channels_last(pointwise(self.project, h)), self.config.state_modes)

    # --- the two forms --------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                teacher: torch.Tensor | None = None) -> torch.Tensor:
        pos = self.grid_inputs(x, pos)
        if teacher is None:
            return self.rollout(x, pos)
        return self._teacher_forced(x, pos, teacher_states(x, teacher, self.config.time_steps, type(self).__name__))

    def _teacher_forced(self, x: torch.Tensor, pos: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        b, n, steps = states.shape
        pos_steps = repeat_per_step(pos, steps)
        u = steps_as_batch(states)  # (b T, n, 1)
        h = self._encode(u, pos_steps)
        t = time_coordinates(steps, b, x.dtype, x.device)  # (b, T, 1)
        s = self._tokens(h, t.reshape(b * steps, 1)).view(b, steps, -1)
        for layer in self.temporal:  # parallel causal form over the T steps, weights 1/T
            s = layer(s, t)
        nxt = self._next(u, h, s.reshape(b * steps, -1))
        return torch.cat([x, batch_as_steps(nxt, b)], dim=-1)

    def rollout(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``T`` recurrent steps from ``x = u_0``: ``(b, n, 1)`` -> ``(b, n, T + 1)``."""
        b, steps = x.shape[0], self.config.time_steps
        if self._no_recurrence:
            raise ValueError(self._no_recurrence)
        states = [layer.init_state(b, steps, dtype=x.dtype, device=x.device) for layer in self.temporal]
        t = time_coordinates(steps, b, x.dtype, x.device)
        u, out = x, [x]
        for k in range(steps):
            h = self._encode(u, pos)
            z = self._tokens(h, t[:, k])
            for i, layer in enumerate(self.temporal):
                z, states[i] = layer.step(states[i], z, t[:, k])
            u = self._next(u, h, z)
            out.append(u)
        return torch.cat(out, dim=-1)
