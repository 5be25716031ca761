"""``marching1d``: an operator that marches a 1-D field in time, causal attention over the steps.

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)`` with
``x = (u_0..u_{h-1}): (b, n, h F)``, ``pos: (b, n, 1)`` (default the periodic grid ``i/n``) returns the
trajectory ``(b, n, (h + T) F)``, states ``0..h-1`` = ``x``; ``teacher: (b, n, (h + T) F)`` switches from
rollout to teacher forcing (states ``h..h+T-2`` taken from it).  ``T = time_steps``, ``h = history``
(default 1), ``F = fields`` (default 1; a state is ``F`` channels, state-major).

Every conditioning state ``j = 0 .. h+T-2`` makes a temporal token, and the states ``j >= h-1`` predict the
next one (``w`` = ``width``, ``m`` = ``summary_modes``, ``d`` = ``d_model``, ``N = h + T - 1`` tokens):

    h_j = E(u_j, x)                  lift [u_j, x] (F + 1) -> w, ``encoder_layers`` spectral blocks
    s_j = S(h_j) + L(t_j)            S: the lowest m Fourier coefficients of h_j (rfft / n, real and
                                     imaginary parts) -> Linear -> d; t_j = j / N              (b, d)
    z_j = A(s_0, ..., s_j)           ``n_layers`` causal encoder layers over the states (attention of
                                     the inherited config, coordinates t, norm "layer" or None) (b, d)
    u_{j+1} = B(u_j + D(h_j + P z_j))  P: Linear d -> w, a shift per channel broadcast over the grid;
                                     D: ``decoder_layers`` spectral blocks, MLP w -> proj_hidden -> F;
                                     B: the lowest ``state_modes`` Fourier modes (None: identity)

The history enters through ``A`` alone (the spatial maps see one state each), so ``h`` changes no
parameter count.  ``E``, ``S`` and ``D`` are resolution-invariant (point-wise maps, spectral blocks with a
fixed number of modes, Fourier coefficients normalized by ``n`` are quadratures), so the temporal
tokens ``s_j`` mean the same at every grid size.  ``A`` is causal: the state j+1 depends on the
states ``u_0..u_j`` only.

Teacher forcing runs ``E, S`` on all ``N`` states as one batch, ``A`` in its parallel causal form and ``D``
on the ``T`` states that predict; a rollout runs ``A`` as a recurrence (``EncoderLayer.step``): the
temporal state is constant-size (``d x d`` per head and layer) whatever the number of steps.  The
temporal quadrature weight is ``1/N`` per token in both forms (the parallel form over exactly N tokens).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ...grids.domain import Periodic
from ...common.config import check_positive
from ...common.dtypes import upcast
from ..attention.mixers import MIXERS, causal_mixers
from ..blocks import EncoderConfig, SpectralBlock, encoder_stack, mlp, pointwise
from ...grids.layout import channels_first, channels_last
from ...grids.fourier_modes import rfft_modes
from ..trajectory import (
    MarchingFields,
    batch_as_steps,
    check_marching_config,
    limit_state,
    marching_inputs,
    repeat_per_step,
    teacher_states,
    time_coordinates,
    windows,
)
from . import register_model
from .base import GridOperator


@dataclass
class Marching1dConfig(MarchingFields, EncoderConfig):
    """The inherited attention/encoder fields configure the temporal attention ``A`` (``d_model``,
    ``n_layers``, ``mixer``...; causal, with a point-wise ``norm``); the rest the spatial maps:

    - ``time_steps``: steps ``T`` of a trajectory (the model returns ``h + T`` states).
    - ``history``: the states ``h`` it is given (``x`` holds states ``0..h-1``; they reach the steps
      through the temporal attention).
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
    periodic: Periodic = True

    def __post_init__(self):
        super().__post_init__()
        check_marching_config(self)
        check_positive(self, "width", "modes", "encoder_layers", "decoder_layers", "summary_modes", "proj_hidden")
        if self.causal is not True:
            raise ValueError("marching1d: the temporal attention is causal by construction; causal must be true")


def recurrent_mixers() -> list[str]:
    """The causal mixers with a recurrent form (a constant-size state): those a rollout can step."""
    return [name for name in causal_mixers() if hasattr(MIXERS.get(name), "features")]


def _spectral_stack(width: int, modes: int, n_layers: int, act: str) -> nn.ModuleList:
    return nn.ModuleList(SpectralBlock(width, width, modes, ndim=1, act=act) for _ in range(n_layers))


@register_model("marching1d", Marching1dConfig)
class Marching1d(GridOperator):
    """``(b, n, h F)`` [, ``pos (b, n, 1)``, ``teacher (b, n, (h + T) F)``] -> ``(b, n, (h + T) F)``."""

    ndim = 1

    def __init__(self, config: Marching1dConfig):
        super().__init__(config)
        c = config
        self.lift = nn.Linear(c.fields + 1, c.width)
        self.encoder = _spectral_stack(c.width, c.modes, c.encoder_layers, c.activation)
        self.summary = nn.Linear(2 * c.width * c.summary_modes, c.d_model)
        self.time_embedding = nn.Linear(1, c.d_model)
        self.temporal = encoder_stack(c, pos_dim=1)
        self.condition = nn.Linear(c.d_model, c.width)
        self.decoder = _spectral_stack(c.width, c.modes, c.decoder_layers, c.activation)
        self.project = mlp(c.width, c.proj_hidden, c.fields, c.activation)
        # a mixer without a recurrent form trains teacher-forced but cannot roll out: said at the rollout
        self._no_recurrence = "" if not isinstance(c.mixer, str) or c.mixer in recurrent_mixers() else (
            f"marching1d: mixer {c.mixer!r} has no recurrent form, which the rollout steps one time step at a "
            f"time; set model.options.mixer to one of {', '.join(recurrent_mixers())}")

    # --- the spatial maps (any number of states as a batch) -------------------------------------
    def _encode(self, u: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``E``: states ``(B, n, F)`` -> features ``(B, w, n)``."""
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
        """``B(u + D(h + P z))``: ``u (B, n, F)``, ``h (B, w, n)``, ``z (B, d)`` -> ``(B, n, F)``."""
        h = h + self.condition(z).unsqueeze(-1)
        for block in self.decoder:
            h = block(h)
        return limit_state(u + channels_last(pointwise(self.project, h)), self.config.state_modes)

    @property
    def input_channels(self) -> int:
        return self.config.history * self.config.fields

    # --- the two forms --------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                teacher: torch.Tensor | None = None) -> torch.Tensor:
        pos = marching_inputs(self, x, pos)
        if teacher is None:
            return self.rollout(x, pos)
        states = teacher_states(x, teacher, self.config.time_steps, type(self).__name__, self.config.fields)
        return self._teacher_forced(x, pos, states)

    def _teacher_forced(self, x: torch.Tensor, pos: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        fields = self.config.fields
        b, tokens = states.shape[0], states.shape[-1] // fields  # N = h + T - 1 conditioning states
        first, steps = self.config.history - 1, self.config.time_steps  # the states that predict: first..N-1
        u = windows(states, 1, fields)  # (b N, n, F)
        h = self._encode(u, repeat_per_step(pos, tokens))
        t = time_coordinates(tokens, b, x.dtype, x.device)  # (b, N, 1)
        s = self._tokens(h, t.reshape(b * tokens, 1)).view(b, tokens, -1)
        for layer in self.temporal:  # parallel causal form over the N states, weights 1/N
            s = layer(s, t)

        def predicting(v: torch.Tensor) -> torch.Tensor:  # (b N, ...) -> (b T, ...): the rows j >= h - 1
            return v.view(b, tokens, *v.shape[1:])[:, first:].reshape(b * steps, *v.shape[1:])

        nxt = self._next(predicting(u), predicting(h), s[:, first:].reshape(b * steps, -1))
        return torch.cat([x, batch_as_steps(nxt, b)], dim=-1)

    def rollout(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``h + T - 1`` recurrent steps from ``x = (u_0..u_{h-1})``: ``(b, n, h F)`` -> ``(b, n, (h + T) F)``."""
        b, history, fields = x.shape[0], self.config.history, self.config.fields
        tokens = history + self.config.time_steps - 1
        if self._no_recurrence:
            raise ValueError(self._no_recurrence)
        states = [layer.init_state(b, tokens, dtype=x.dtype, device=x.device) for layer in self.temporal]
        t = time_coordinates(tokens, b, x.dtype, x.device)
        out = [x]
        for j in range(tokens):
            u = x[..., j * fields:(j + 1) * fields] if j < history else out[-1]
            h = self._encode(u, pos)
            z = self._tokens(h, t[:, j])
            for i, layer in enumerate(self.temporal):
                z, states[i] = layer.step(states[i], z, t[:, j])
            if j >= history - 1:  # the given states before the last only feed the temporal attention
                out.append(self._next(u, h, z))
        return torch.cat(out, dim=-1)
