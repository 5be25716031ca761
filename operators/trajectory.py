"""The data contract of the time-marching models (``marching1d``, ``arfno1d``, ``arfno2d``, ``fno3d``,
``artransolver2d``, ``marching2d``), and the helpers they share to read it.

A trajectory of ``F`` fields on a grid (``F = fields``, 1 by default: one scalar field) is a channels-last
tensor ``u: (b, *grid, S F)``, **state-major**: channel ``s F + f`` is field ``f`` of the state
``u_s = u(., t_s)`` (the ``S`` states equally spaced in time).  [`as_states`][] views it as
``(b, *grid, S, F)`` and [`as_channels`][] back.  A marching model's config has

- ``time_steps``: ``T >= 1``, the states it predicts;
- ``history``: ``h >= 1``, the states it is given (default 1);
- ``fields``: ``F >= 1``, the fields of one state (default 1; where the config has ``in_channels`` and
  ``out_channels`` they are the channels of one state: ``F``),

and its forward is

    forward(x, pos=None, teacher=None) -> (b, *grid, (h + T) F)

with ``x = (u_0, ..., u_{h-1}): (b, *grid, h F)`` and ``pos: (b, *grid, d)`` the coordinates (default:
the config's uniform grid).  The output's states ``0 .. h-1`` (channels ``0 .. h F - 1``) are ``x`` itself;
state ``h + k`` (``k = 0 .. T-1``) predicts ``u_{h+k}`` from the states ``0 .. h+k-1`` only (causal in
time):

- ``teacher=None``: a rollout, each predicted state fed back as an input of the later steps;
- ``teacher: (b, *grid, (h + T) F)``, the target trajectory (or any states to condition on): teacher
  forcing, the states conditioned on are ``x`` then the teacher's states ``h .. h+T-2`` (its states
  ``0 .. h-1`` and its last are not read: the first states are ``x``, the last predicts nothing); all
  steps in one parallel pass where the model allows.  Teacher forcing on the model's own rollout is that
  rollout.

With ``h = 1``, ``F = 1`` this is ``x = u_0: (b, *grid, 1)`` -> ``(b, *grid, T + 1)``.  A model that
predicts the ``T`` states at once from ``x`` (``fno3d``) takes ``teacher`` and ignores it: causal
trivially.

Stepping models (a map of the last ``h`` states to the next one) share [`march`][]: one step
``u_{k+h} = G(u_k, ..., u_{k+h-1})``, ``(B, *grid, h F) -> (B, *grid, F)``, rolled out, or applied to
all ``T`` windows of the conditioning states as one batch under teacher forcing; with ``residual`` the
step adds to the last state's ``F`` channels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .checks import checks_values, non_finite, raise_first
from ..grids.domain import all_periodic
from ..grids.shape_cache import shape_cached
from ..grids.transfer import band_limit


@dataclass
class MarchingFields:
    """The config fields every marching model has (its config lists it first among its bases):

    - ``time_steps``: the states ``T`` it predicts (the output holds ``h + T`` states).
    - ``history``: the states ``h`` it is given (``x`` holds states ``0 .. h-1`` as channels).
    - ``fields``: the fields ``F`` of one state (a state is ``F`` channels; module doc).
    """

    time_steps: int = 10
    history: int = 1
    fields: int = 1


def check_time_steps(time_steps: object) -> int:
    if isinstance(time_steps, bool) or not isinstance(time_steps, int) or time_steps < 1:
        raise ValueError(f"time_steps must be an integer >= 1 (the number of steps T), got {time_steps!r}")
    return time_steps


def check_marching_config(config) -> None:
    """``time_steps >= 1``, ``history >= 1``, ``fields >= 1``, state channels that agree with ``fields``, and a
    valid ``state_modes`` where the config has one (call it from the config's ``__post_init__``)."""
    check_time_steps(config.time_steps)
    name = type(config).__name__
    for field, what in (("history", "the states the model is given"), ("fields", "the fields of one state")):
        value = getattr(config, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}.{field} must be an integer >= 1 ({what}), got {value!r}")
    check_state_channels(config)
    if hasattr(config, "state_modes"):
        check_state_modes(config)


def check_state_channels(config) -> None:
    """A marching model's ``in_channels`` and ``out_channels`` (where its config has them) are the channels of
    one state, ``fields``: each must be ``fields`` or 1 (the default, from before ``fields``: read as
    ``fields``), and is set to ``fields``."""
    f = config.fields
    for name in ("in_channels", "out_channels"):
        if not hasattr(config, name):
            continue
        value = getattr(config, name)
        if value not in (1, f) or isinstance(value, bool):
            raise ValueError(
                f"{type(config).__name__}.{name} = {value!r} disagrees with fields = {f}: a marching model's "
                f"{name} is the channels of one state (the channels of x are h * fields); set fields = {value} "
                f"or leave {name} out"
            )
        setattr(config, name, f)


def check_state_modes(config) -> None:
    """``state_modes`` (None or an integer >= 1) band-limits the predicted states: periodic grids only."""
    modes = config.state_modes
    if modes is None:
        return
    if isinstance(modes, bool) or not isinstance(modes, int) or modes < 1:
        raise ValueError(f"{type(config).__name__}.state_modes must be None or an integer >= 1, got {modes!r}")
    if not all_periodic(config.periodic):
        raise ValueError(f"{type(config).__name__}.state_modes needs a periodic grid (Fourier modes) on "
                         "every axis; set periodic = true or state_modes = None")


def limit_state(u: torch.Tensor, modes: int | None) -> torch.Tensor:
    """A predicted state ``(B, *grid, F)`` projected onto its lowest ``modes`` Fourier modes per grid axis
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
    """A step's prediction from a network's output ``out (B, *grid, F)``: ``last + out`` (``residual``; the
    last state of ``window (B, *grid, h F)``, its last ``F`` channels) or ``out`` itself, then
    [`limit_state`][]."""
    return limit_state(window[..., -out.shape[-1]:] + out if residual else out, modes)


def as_states(u: torch.Tensor, fields: int) -> torch.Tensor:
    """``(b, *grid, S F) -> (b, *grid, S, F)``: the state-major channels as states of ``F = fields`` fields
    (a view; channel ``s F + f`` is ``[..., s, f]``)."""
    if u.shape[-1] % fields:
        raise ValueError(f"a trajectory of {fields} field(s) per state has a multiple of {fields} channels, got "
                         f"{u.shape[-1]} (shape {tuple(u.shape)})")
    return u.unflatten(-1, (u.shape[-1] // fields, fields))


def as_channels(u: torch.Tensor) -> torch.Tensor:
    """``(b, *grid, S, F) -> (b, *grid, S F)``, state-major: the inverse of [`as_states`][]."""
    return u.flatten(-2)


def time_coordinates(time_steps: int, batch: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``t_k = k / T`` for ``k = 0 .. T - 1`` (``T = time_steps``): ``(batch, T, 1)`` (a broadcast view of
    one tensor built once per ``T``, dtype and device: never modify it in place)."""
    return _step_times(time_steps, dtype, device).view(1, time_steps, 1).expand(batch, time_steps, 1)


@shape_cached
def _step_times(time_steps: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    return torch.arange(time_steps, dtype=dtype, device=device) / time_steps


def check_history_channels(x: torch.Tensor, history: int, ndim: int, where: str, fields: int = 1) -> None:
    """``x (b, *grid, c)`` with ``ndim`` grid axes must hold ``c = history * fields`` channels, ``history``
    states of ``fields`` fields (shapes only: no value is read); other ranks are left to the model's grid
    check."""
    if isinstance(x, torch.Tensor) and x.dim() == ndim + 2 and x.shape[-1] != history * fields:
        states = "state 0" if history == 1 else f"states 0..{history - 1}"
        c = x.shape[-1]
        if fields == 1:
            raise ValueError(f"{where}: expected {history} input channel(s) in the last dim, the {states} the "
                             f"model steps from (history = {history}), got {c} (shape {tuple(x.shape)}); give the "
                             f"first {history} states as channels, or build the model with history = {c}")
        hint = f" or history = {c // fields}" if c % fields == 0 else ""
        raise ValueError(f"{where}: expected {history * fields} input channels in the last dim, the {states} the "
                         f"model steps from, {fields} fields each (history = {history}, fields = {fields}, "
                         f"state-major: channel s * {fields} + f), got {c} (shape {tuple(x.shape)}); give the "
                         f"first {history} states' fields as channels, or build the model with matching fields"
                         f"{hint}")


def marching_inputs(model, x: torch.Tensor, pos: torch.Tensor | None) -> torch.Tensor:
    """The entry check of a marching grid model (``model.config.history`` states in ``x``, then the
    model's ``grid_inputs``): the coordinates ``(b, *grid, d)``."""
    check_history_channels(x, model.config.history, model.grid_ndim, type(model).__name__, state_fields(model.config))
    return model.grid_inputs(x, pos)


def state_fields(config) -> int:
    """``config.fields`` (1 for a config without it: one scalar field per state)."""
    return getattr(config, "fields", 1)


def check_teacher(x: torch.Tensor, teacher: torch.Tensor, time_steps: int, where: str, fields: int = 1) -> None:
    """``teacher`` is a trajectory ``(b, *grid, (h + T) F)`` on ``x``'s device, ``x (b, *grid, h F)``
    (shapes only: no value is read)."""
    h = x.shape[-1] // fields
    expected = (*x.shape[:-1], (h + time_steps) * fields)
    if not isinstance(teacher, torch.Tensor) or tuple(teacher.shape) != expected:
        shape = tuple(teacher.shape) if isinstance(teacher, torch.Tensor) else type(teacher).__name__
        per = "" if fields == 1 else f", {fields} fields each"
        raise ValueError(f"{where}: teacher must be a trajectory of shape {expected} (batch, *grid, h + T = "
                         f"{h} + {time_steps} states{per}) like the target, got {shape}")
    if teacher.device != x.device:
        raise ValueError(f"{where}: teacher is on {teacher.device} but x is on {x.device}; move it "
                         "(teacher.to(x.device))")


def teacher_states(x: torch.Tensor, teacher: torch.Tensor, time_steps: int, where: str,
                   fields: int = 1) -> torch.Tensor:
    """The conditioning states ``(b, *grid, (h + T - 1) F)``: ``x (b, *grid, h F)`` then the teacher's states
    ``h .. h+T-2`` (module doc); ``teacher`` checked ([`check_teacher`][], NaN/inf where ``checks_values``
    says)."""
    h = x.shape[-1]  # channels: h F
    check_teacher(x, teacher, time_steps, where, fields)
    if checks_values(teacher):
        raise_first([(non_finite(teacher), lambda: f"{where}: teacher contains NaN or inf; check the trajectory data "
                                                   "and its normalization")])
    return torch.cat([x, teacher[..., h:h + (time_steps - 1) * fields].to(x.dtype)], dim=-1)


def windows(states: torch.Tensor, history: int, fields: int = 1) -> torch.Tensor:
    """``(b, *grid, (h + T - 1) F)`` -> ``(b T, *grid, h F)``: window ``k`` holds the states ``k .. k+h-1``
    (state-major), the input of step ``k`` (sample-major: sample ``i``'s windows at rows ``i T .. i T + T - 1``)."""
    b, grid = states.shape[0], states.shape[1:-1]
    steps = states.shape[-1] // fields - history + 1
    w = as_states(states, fields).unfold(-2, history, 1)  # (b, *grid, T, F, h)
    return w.movedim(-3, 1).transpose(-1, -2).reshape(b * steps, *grid, history * fields)


def repeat_per_step(t: torch.Tensor, steps: int) -> torch.Tensor:
    """``(b, ...)`` -> ``(b T, ...)``: each sample repeated for its ``T = steps`` steps, sample-major like
    [`windows`][] (``t.repeat_interleave(steps, dim=0)``, written as a broadcast copy: the repeat count is
    a number, and no count tensor has to reach the device)."""
    return t.unsqueeze(1).expand(t.shape[0], steps, *t.shape[1:]).reshape(t.shape[0] * steps, *t.shape[1:])


def batch_as_steps(u: torch.Tensor, batch: int) -> torch.Tensor:
    """``(b T, *grid, F)`` -> ``(b, *grid, T F)``: the steps' predictions back as states, state-major (inverse
    of the batching of [`windows`][])."""
    steps = u.shape[0] // batch
    return as_channels(u.reshape(batch, steps, *u.shape[1:]).movedim(1, -2))


Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def march(step: Step, x: torch.Tensor, pos: torch.Tensor, teacher: torch.Tensor | None, time_steps: int,
          where: str, fields: int = 1) -> torch.Tensor:
    """A stepping model's forward under the contract (module doc): ``x (b, *grid, h F)``, ``pos (b, *grid,
    d)`` -> ``(b, *grid, (h + T) F)``, ``F = fields``.

    ``step(window, pos, t) -> (B, *grid, F)`` maps the last ``h`` states ``window (B, *grid, h F)`` at the
    coordinates ``pos (B, *grid, d)`` to the next state; ``t (B, 1)`` is the step's ``k / T``.  A rollout
    calls it ``T`` times on one window shifted by the new state; teacher forcing once, on the ``T`` windows
    of the conditioning states as one batch (``B = b T``)."""
    b, h = x.shape[0], x.shape[-1] // fields
    t = time_coordinates(time_steps, b, x.dtype, x.device)
    if teacher is not None:
        states = teacher_states(x, teacher, time_steps, where, fields)
        nxt = step(windows(states, h, fields), repeat_per_step(pos, time_steps), t.reshape(b * time_steps, 1))
        return torch.cat([x, batch_as_steps(nxt, b)], dim=-1)
    window, out = x, [x]
    for k in range(time_steps):
        nxt = step(window, pos, t[:, k])
        out.append(nxt)
        window = torch.cat([window[..., fields:], nxt], dim=-1)
    return torch.cat(out, dim=-1)
