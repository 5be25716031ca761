"""The data contract of the time-marching models (``marching1d``, ``arfno1d``, ``arfno2d``, ``fno3d``,
``artransolver2d``, ``marching2d``), and the helpers they share to read it.

A trajectory of a scalar field on a grid is a channels-last tensor ``u: (b, *grid, S)`` whose channel
``k`` is the state ``u_k = u(., t_k)`` (one scalar field per state, the states equally spaced in time).
A marching model's config has

- ``time_steps``: ``T >= 1``, the states it predicts;
- ``history``: ``h >= 1``, the states it is given (default 1),

and its forward is

    forward(x, pos=None, teacher=None) -> (b, *grid, h + T)

with ``x = (u_0, ..., u_{h-1}): (b, *grid, h)`` and ``pos: (b, *grid, d)`` the coordinates (default:
the config's uniform grid).  The output's channels ``0 .. h-1`` are ``x`` itself; channel ``h + k``
(``k = 0 .. T-1``) predicts the state ``u_{h+k}`` from the states ``0 .. h+k-1`` only (causal in time):

- ``teacher=None``: a rollout, each predicted state fed back as an input of the later steps;
- ``teacher: (b, *grid, h + T)``, the target trajectory (or any states to condition on): teacher
  forcing, the states conditioned on are ``x`` then ``teacher[..., h : h+T-1]`` (the teacher's
  channels ``0 .. h-1`` and its last are not read: the first states are ``x``, the last predicts
  nothing); all steps in one parallel pass where the model allows.  Teacher forcing on the model's own
  rollout is that rollout.

With ``h = 1`` this is ``x = u_0: (b, *grid, 1)`` -> ``(b, *grid, T + 1)``.  A model that predicts the
``T`` states at once from ``x`` (``fno3d``) takes ``teacher`` and ignores it: causal trivially.

Stepping models (a map of the last ``h`` states to the next one) share [`march`][]: one step
``u_{k+h} = G(u_k, ..., u_{k+h-1})`` rolled out, or applied to all ``T`` windows of the conditioning
states as one batch under teacher forcing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .checks import checks_values, non_finite, raise_first
from ..grids.shape_cache import shape_cached
from ..grids.transfer import band_limit


@dataclass
class MarchingFields:
    """The config fields every marching model has (its config lists it first among its bases):

    - ``time_steps``: the states ``T`` it predicts (the output holds ``h + T`` states).
    - ``history``: the states ``h`` it is given (``x`` holds states ``0 .. h-1`` as channels).
    """

    time_steps: int = 10
    history: int = 1


def check_time_steps(time_steps: object) -> int:
    if isinstance(time_steps, bool) or not isinstance(time_steps, int) or time_steps < 1:
        raise ValueError(f"time_steps must be an integer >= 1 (the number of steps T), got {time_steps!r}")
    return time_steps


def check_marching_config(config) -> None:
    """``time_steps >= 1``, ``history >= 1``, a scalar state, and a valid ``state_modes`` where the config has
    one (call it from the config's ``__post_init__``)."""
    check_time_steps(config.time_steps)
    h = config.history
    if isinstance(h, bool) or not isinstance(h, int) or h < 1:
        raise ValueError(f"{type(config).__name__}.history must be an integer >= 1 (the states the model is "
                         f"given), got {h!r}")
    check_scalar_state(config)
    if hasattr(config, "state_modes"):
        check_state_modes(config)


def check_scalar_state(config) -> None:
    """A marching model steps one scalar field: ``in_channels = out_channels = 1``."""
    channels = getattr(config, "in_channels", 1), getattr(config, "out_channels", 1)
    if channels != (1, 1):
        raise ValueError(
            f"{type(config).__name__}: a marching model steps a scalar field, in_channels = out_channels = 1 "
            f"(got {channels[0]}, {channels[1]}); the channels of x and of the output are the states"
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
    """A predicted state ``(B, *grid, 1)`` projected onto its lowest ``modes`` Fourier modes per grid axis
    (``|k_i| <= modes - 1`` on every axis: the product of the 1-D projections; None: as is).

    States of a diffusive equation carry almost nothing above a few modes once the first step has
    damped the initial condition's tail; without the projection, the harmonics a point-wise decoder
    adds are fed back and carried along the rollout."""
    if modes is None:
        return u
    for axis in range(1, u.dim() - 1):
        u = band_limit(u.movedim(axis, -1), modes).movedim(-1, axis)
    return u


def next_state(window: torch.Tensor, out: torch.Tensor, residual: bool, modes: int | None) -> torch.Tensor:
    """A step's prediction from a network's output ``out (B, *grid, 1)``: ``last + out`` (``residual``; the
    last state of ``window (B, *grid, h)``) or ``out`` itself, then [`limit_state`][]."""
    return limit_state(window[..., -1:] + out if residual else out, modes)


def time_coordinates(time_steps: int, batch: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``t_k = k / T`` for ``k = 0 .. T - 1`` (``T = time_steps``): ``(batch, T, 1)`` (a broadcast view of
    one tensor built once per ``T``, dtype and device: never modify it in place)."""
    return _step_times(time_steps, dtype, device).view(1, time_steps, 1).expand(batch, time_steps, 1)


@shape_cached
def _step_times(time_steps: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    return torch.arange(time_steps, dtype=dtype, device=device) / time_steps


def check_history_channels(x: torch.Tensor, history: int, ndim: int, where: str) -> None:
    """``x (b, *grid, c)`` with ``ndim`` grid axes must hold ``c = history`` states (shapes only: no value is
    read); other ranks are left to the model's grid check."""
    if isinstance(x, torch.Tensor) and x.dim() == ndim + 2 and x.shape[-1] != history:
        states = "state 0" if history == 1 else f"states 0..{history - 1}"
        raise ValueError(f"{where}: expected {history} input channel(s) in the last dim, the {states} the model "
                         f"steps from (history = {history}), got {x.shape[-1]} (shape {tuple(x.shape)}); give "
                         f"the first {history} states as channels, or build the model with history = {x.shape[-1]}")


def marching_inputs(model, x: torch.Tensor, pos: torch.Tensor | None) -> torch.Tensor:
    """The entry check of a marching grid model (``model.config.history`` states in ``x``, then the
    model's ``grid_inputs``): the coordinates ``(b, *grid, d)``."""
    check_history_channels(x, model.config.history, model.grid_ndim, type(model).__name__)
    return model.grid_inputs(x, pos)


def check_teacher(x: torch.Tensor, teacher: torch.Tensor, time_steps: int, where: str) -> None:
    """``teacher`` is a trajectory ``(b, *grid, h + T)`` on ``x``'s device (shapes only: no value is read)."""
    h = x.shape[-1]
    expected = (*x.shape[:-1], h + time_steps)
    if not isinstance(teacher, torch.Tensor) or tuple(teacher.shape) != expected:
        shape = tuple(teacher.shape) if isinstance(teacher, torch.Tensor) else type(teacher).__name__
        raise ValueError(f"{where}: teacher must be a trajectory of shape {expected} (batch, *grid, h + T = "
                         f"{h} + {time_steps} states) like the target, got {shape}")
    if teacher.device != x.device:
        raise ValueError(f"{where}: teacher is on {teacher.device} but x is on {x.device}; move it "
                         "(teacher.to(x.device))")


def teacher_states(x: torch.Tensor, teacher: torch.Tensor, time_steps: int, where: str) -> torch.Tensor:
    """The conditioning states ``(b, *grid, h + T - 1)``: ``x (b, *grid, h)`` then ``teacher[..., h : h+T-1]``
    (module doc); ``teacher`` checked ([`check_teacher`][], NaN/inf where ``checks_values`` says)."""
    h = x.shape[-1]
    check_teacher(x, teacher, time_steps, where)
    if checks_values(teacher):
        raise_first([(non_finite(teacher), lambda: f"{where}: teacher contains NaN or inf; check the trajectory data "
                                                   "and its normalization")])
    return torch.cat([x, teacher[..., h:h + time_steps - 1].to(x.dtype)], dim=-1)


def windows(states: torch.Tensor, history: int) -> torch.Tensor:
    """``(b, *grid, h + T - 1)`` -> ``(b T, *grid, h)``: window ``k`` holds the states ``k .. k+h-1``, the
    input of step ``k`` (sample-major: sample ``i``'s windows at rows ``i T .. i T + T - 1``)."""
    b, grid, steps = states.shape[0], states.shape[1:-1], states.shape[-1] - history + 1
    return states.unfold(-1, history, 1).movedim(-2, 1).reshape(b * steps, *grid, history)


def repeat_per_step(t: torch.Tensor, steps: int) -> torch.Tensor:
    """``(b, ...)`` -> ``(b T, ...)``: each sample repeated for its ``T = steps`` steps, sample-major like
    [`windows`][] (``t.repeat_interleave(steps, dim=0)``, written as a broadcast copy: the repeat count is
    a number, and no count tensor has to reach the device)."""
    return t.unsqueeze(1).expand(t.shape[0], steps, *t.shape[1:]).reshape(t.shape[0] * steps, *t.shape[1:])


def batch_as_steps(u: torch.Tensor, batch: int) -> torch.Tensor:
    """``(b T, *grid, 1)`` -> ``(b, *grid, T)``: the steps' predictions back as channels (inverse of the
    batching of [`windows`][])."""
    return u.reshape(batch, u.shape[0] // batch, *u.shape[1:-1]).movedim(1, -1)


Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def march(step: Step, x: torch.Tensor, pos: torch.Tensor, teacher: torch.Tensor | None, time_steps: int,
          where: str) -> torch.Tensor:
    """A stepping model's forward under the contract (module doc): ``x (b, *grid, h)``, ``pos (b, *grid, d)``
    -> ``(b, *grid, h + T)``.

    ``step(window, pos, t) -> (B, *grid, 1)`` maps the last ``h`` states ``window (B, *grid, h)`` at the
    coordinates ``pos (B, *grid, d)`` to the next state; ``t (B, 1)`` is the step's ``k / T``.  A rollout
    calls it ``T`` times on one window shifted by the new state; teacher forcing once, on the ``T`` windows
    of the conditioning states as one batch (``B = b T``)."""
    b, h = x.shape[0], x.shape[-1]
    t = time_coordinates(time_steps, b, x.dtype, x.device)
    if teacher is not None:
        states = teacher_states(x, teacher, time_steps, where)
        nxt = step(windows(states, h), repeat_per_step(pos, time_steps), t.reshape(b * time_steps, 1))
        return torch.cat([x, batch_as_steps(nxt, b)], dim=-1)
    window, out = x, [x]
    for k in range(time_steps):
        nxt = step(window, pos, t[:, k])
        out.append(nxt)
        window = torch.cat([window[..., 1:], nxt], dim=-1)
    return torch.cat(out, dim=-1)
