"""The data contract of the time-marching models (``marching1d``, ``arfno1d``).

A trajectory of a scalar field on a 1-D grid is a channels-last tensor ``u: (b, n, T + 1)`` whose
channel ``k`` is the state ``u_k = u(., t_k)``, ``t_k = k / T`` (a fraction of the simulated time
span), ``u_0`` the initial condition.  A marching model

    forward(x, pos=None, teacher=None) -> (b, n, T + 1)

takes ``x = u_0: (b, n, 1)`` and returns the whole trajectory, channel 0 being ``x`` itself and
``u_{k+1} = G(u_0, ..., u_k)`` (one step, causal in time):

- ``teacher=None``: a rollout, each predicted state fed back as the next input;
- ``teacher: (b, n, T + 1)`` (the target trajectory itself, or any states to condition on): teacher
  forcing, ``out[..., k + 1] = G(x, teacher[..., 1], ..., teacher[..., k])`` for all k at once
  (channels 0 and T of ``teacher`` are not read: state 0 is ``x``, state T predicts nothing).

This module holds the helpers both models use to read that contract.
"""
from __future__ import annotations

import torch

from .checks import checks_values, non_finite, raise_first
from ..grids.layout import channels_first, channels_last
from ..grids.shape_cache import shape_cached
from ..grids.transfer import band_limit


def check_time_steps(time_steps: object) -> int:
    if isinstance(time_steps, bool) or not isinstance(time_steps, int) or time_steps < 1:
        raise ValueError(f"time_steps must be an integer >= 1 (the number of steps T), got {time_steps!r}")
    return time_steps


def check_scalar_state(config) -> None:
    """A marching model steps one scalar field: ``in_channels = out_channels = 1``."""
    if config.in_channels != 1 or config.out_channels != 1:
        raise ValueError(
            f"{type(config).__name__}: a marching model steps a scalar field, in_channels = out_channels = 1 "
            f"(got {config.in_channels}, {config.out_channels}); the output's channels are the T + 1 snapshots"
        )


def check_state_modes(config) -> None:
    """``state_modes`` (None or an integer >= 1) band-limits the predicted states: periodic grids only."""
    modes = config.state_modes
    if modes is None:
        return
    if isinstance(modes, bool) or not isinstance(modes, int) or modes < 1:
        raise ValueError(f"{type(config).__name__}.state_modes must be None or an integer >= 1, got {modes!r}")
    if not config.periodic:
        raise ValueError(f"{type(config).__name__}.state_modes needs a periodic grid (Fourier modes); "
                         "set periodic = true or state_modes = None")


def limit_state(u: torch.Tensor, modes: int | None) -> torch.Tensor:
    """A predicted state ``(B, n, 1)`` projected onto its lowest ``modes`` Fourier modes (None: as is).

    States of a diffusive equation carry almost nothing above a few modes once the first step has
    damped the initial condition's tail; without the projection, the harmonics a point-wise decoder
    adds are fed back and carried along the rollout."""
    return u if modes is None else channels_last(band_limit(channels_first(u), modes))


def time_coordinates(time_steps: int, batch: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``t_k = k / T`` for the states ``k = 0 .. T - 1`` that predict a next one: ``(batch, T, 1)`` (a
    broadcast view of one tensor built once per ``T``, dtype and device: never modify it in place)."""
    return _step_times(time_steps, dtype, device).view(1, time_steps, 1).expand(batch, time_steps, 1)


@shape_cached
def _step_times(time_steps: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    return torch.arange(time_steps, dtype=dtype, device=device) / time_steps


def teacher_states(x: torch.Tensor, teacher: torch.Tensor, time_steps: int, where: str) -> torch.Tensor:
    """The conditioning states ``(b, n, T)``: ``x`` then ``teacher[..., 1:T]`` (module doc)."""
    b, n, _ = x.shape
    if not isinstance(teacher, torch.Tensor) or teacher.ndim != 3 or tuple(teacher.shape) != (b, n, time_steps + 1):
        shape = tuple(teacher.shape) if isinstance(teacher, torch.Tensor) else type(teacher).__name__
        raise ValueError(f"{where}: teacher must be a trajectory of shape ({b}, {n}, {time_steps + 1}) "
                         f"(batch, points, T + 1 snapshots) like the target, got {shape}")
    if teacher.device != x.device:
        raise ValueError(f"{where}: teacher is on {teacher.device} but x is on {x.device}; move it "
                         "(teacher.to(x.device))")
    if checks_values(teacher):
        raise_first([(non_finite(teacher), lambda: f"{where}: teacher contains NaN or inf; check the trajectory data "
                                                   "and its normalization")])
    return torch.cat([x, teacher[..., 1:time_steps].to(x.dtype)], dim=-1)


def steps_as_batch(states: torch.Tensor) -> torch.Tensor:
    """``(b, n, T)`` -> ``(b T, n, 1)``: every state a sample of the one-step map (sample-major)."""
    b, n, t = states.shape
    return states.permute(0, 2, 1).reshape(b * t, n, 1)


def repeat_per_step(t: torch.Tensor, steps: int) -> torch.Tensor:
    """``(b, ...)`` -> ``(b T, ...)``: each sample repeated for its ``T = steps`` states, sample-major like
    ``steps_as_batch`` (``t.repeat_interleave(steps, dim=0)``, written as a broadcast copy: the
    repeat count is a number, and no count tensor has to reach the device)."""
    return t.unsqueeze(1).expand(t.shape[0], steps, *t.shape[1:]).reshape(t.shape[0] * steps, *t.shape[1:])


def batch_as_steps(u: torch.Tensor, batch: int) -> torch.Tensor:
    """Inverse of [`steps_as_batch`][]: ``(b T, n, 1)`` -> ``(b, n, T)``."""
    bt, n, _ = u.shape
    return u.reshape(batch, bt // batch, n).permute(0, 2, 1)
