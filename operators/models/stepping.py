"""What the stepping marching models share: one network ``F`` of the last ``h`` states, rolled out.

    u_{k+h} = B(u_{k+h-1} + F([u_k, ..., u_{k+h-1}] [, t_k], pos))    (residual)
    u_{k+h} = B(F([u_k, ..., u_{k+h-1}] [, t_k], pos))                (not residual)

A state holds ``fields`` channels (``c = fields``, 1 by default; [`petrov.operators.trajectory`][]): ``F`` is a
grid model taking ``(B, *grid, h c [+ 1])`` and coordinates ``(B, *grid, d)`` to ``(B, *grid, c)``
(``fno1d`` for ``arfno1d``, ``fno2d`` for ``arfno2d``, ``transolver2d`` for ``artransolver2d``, ``latent2d``
for ``marching2d``), ``t_k = k / T`` a constant channel where the model has one (``time_channel``), and
``B`` the lowest ``state_modes`` Fourier modes per axis where the config has the option.  The forward is
[`petrov.operators.trajectory.march`][]: teacher forcing runs ``F`` once on all ``T`` windows as one batch,
a rollout ``T`` times.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..trajectory import march, marching_inputs, next_state, state_fields
from .base import GridOperator


class SteppingOperator(GridOperator):
    """``(b, *grid, h c)`` [, ``pos (b, *grid, d)``, ``teacher (b, *grid, (h + T) c)``] -> ``(b, *grid, (h + T) c)``,
    ``c = fields``.

    Subclasses set ``ndim`` and build ``step_net`` (``F``, ``h c [+ 1]`` channels in, ``c`` out); the config has
    ``time_steps``, ``history`` and, optionally, ``fields`` (default 1), ``residual`` (default True) and
    ``state_modes`` (default None)."""

    time_channel: bool = False  # F also takes the channel t_k = k / T

    def __init__(self, config, step_net: nn.Module):
        super().__init__(config)
        self.step_net = step_net

    @property
    def input_channels(self) -> int:
        return self.config.history * state_fields(self.config)

    def step(self, window: torch.Tensor, pos: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """One step: ``window (B, *grid, h c)``, ``pos (B, *grid, d)``, ``t (B, 1)`` -> the next state ``(B, *grid, c)``."""
        inputs = window
        if self.time_channel:
            inputs = torch.cat([window, t.view(-1, *(1,) * (window.dim() - 1)).expand(*window.shape[:-1], 1)], dim=-1)
        c = self.config
        return next_state(window, self.step_net(inputs, pos), getattr(c, "residual", True),
                          getattr(c, "state_modes", None))

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                teacher: torch.Tensor | None = None) -> torch.Tensor:
        pos = marching_inputs(self, x, pos)
        return march(self.step, x, pos, teacher, self.config.time_steps, type(self).__name__,
                     state_fields(self.config))


def step_config(config, config_cls: type, **changes):
    """The step network's config: ``config``'s values of the fields of ``config_cls`` (the marching config
    holds them all), with ``changes`` (e.g. ``in_channels = h * fields``; ``out_channels`` is the marching
    config's, ``fields``)."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config_cls)}
    return config_cls(**{**fields, **changes})
