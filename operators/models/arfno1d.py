"""``arfno1d``: the autoregressive FNO baseline, one ``fno1d`` applied step by step.

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)``,
``x = u_0: (b, n, 1)`` -> trajectory ``(b, n, T + 1)`` (channel 0 = ``x``); ``teacher: (b, n, T + 1)``
gives the input states 1..T-1 (teacher forcing) instead of the model's own predictions.

One step (Markov: the next state depends on the current one only):

    u_{k+1} = B(u_k + F([u_k, t_k]))   F an ``fno1d`` with 2 input channels, t_k = k / T a constant channel;
                                       B the lowest ``state_modes`` Fourier modes (None: identity)

The time channel is there because trained models see states normalized per snapshot (the target
normalizer is point-wise per time channel), so the one-step map in those units depends on k.
Teacher forcing runs all T steps as one batch.  The FNO fields of the config configure ``F``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch

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
from .fno import FNO1d, FNO1dConfig


@dataclass
class ArFNO1dConfig(FNO1dConfig):
    """The options of ``arfno1d``: the FNO fields configure the one-step map ``F``, and

    - ``time_steps``: steps ``T`` of a trajectory (the model returns ``T + 1`` states).
    - ``state_modes``: keep only the lowest this many Fourier modes of every predicted state
      (periodic grids; ``None``: off).
    """

    time_steps: int = 20
    state_modes: Optional[int] = None  # band-limit each predicted state (as marching1d; None: off)

    def __post_init__(self):
        super().__post_init__()
        check_time_steps(self.time_steps)
        check_scalar_state(self)
        check_state_modes(self)


@register_model("arfno1d", ArFNO1dConfig)
class ArFNO1d(GridOperator):
    """``(b, n, 1)`` [, ``pos (b, n, 1)``, ``teacher (b, n, T + 1)``] -> ``(b, n, T + 1)``."""

    ndim = 1
    input_channels = 1  # one state

    def __init__(self, config: ArFNO1dConfig):
        super().__init__(config)
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(FNO1dConfig)}
        self.step_net = FNO1d(FNO1dConfig(**{**fields, "in_channels": 2}))

    def _next(self, u: torch.Tensor, t: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """``B(u + F([u, t]))``: ``u (B, n, 1)``, ``t (B, 1)``, ``pos (B, n, 1)`` -> ``(B, n, 1)``."""
        time = t[:, None, :].expand(u.shape[0], u.shape[1], 1)
        return limit_state(u + self.step_net(torch.cat([u, time], dim=-1), pos), self.config.state_modes)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                teacher: torch.Tensor | None = None) -> torch.Tensor:
        where = type(self).__name__
        pos = self.grid_inputs(x, pos)
        b, steps = x.shape[0], self.config.time_steps
        t = time_coordinates(steps, b, x.dtype, x.device)
        if teacher is not None:
            states = teacher_states(x, teacher, steps, where)
            nxt = self._next(steps_as_batch(states), t.reshape(b * steps, 1), repeat_per_step(pos, steps))
            return torch.cat([x, batch_as_steps(nxt, b)], dim=-1)
        u, out = x, [x]
        for k in range(steps):
            u = self._next(u, t[:, k], pos)
            out.append(u)
        return torch.cat(out, dim=-1)
