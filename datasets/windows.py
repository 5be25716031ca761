"""Which states of a stored trajectory a marching model sees: a [`Window`][] of the states.

A trajectory file stores the states of every sample as the trailing channels of ``y``, ``(N, *grid, S)``
(``burgers-trajectory``: ``S = T + 1`` snapshots from ``u_0``; ``navier-stokes``: ``w_0`` and the states at
``t = 1 .. T``).  A model is given the first ``history`` states of a window and predicts the rest:

    window  = y[..., first : first + states]          (states None: to the last stored state)
    x       = window[..., :history]                   the given states
    y       = window                                  the target, the given states included

so that ``x`` is the first ``history`` channels of ``y`` (a marching model returns them as they are; see
``petrov.operators.trajectory``).  FNO's Navier–Stokes benchmark at ν = 1e-5 (``w_0`` and 20 states stored,
the 10 states after ``w_0`` in, the next 10 out) is ``Window(history=10, first=1)``; the 1-D default,
``Window()``, is ``x = u_0`` and ``y`` the whole trajectory.

A time-series file (kind ``time-series``) stores ``F`` fields per state, ``y (N, *grid, S, F)``; its window
is returned flattened, state-major: ``(N, *grid, W * F)`` with channel ``s * F + f`` field ``f`` of window
state ``s``, and ``x`` its first ``history * F`` channels (``apply(..., field_axis=True)``). For ``F = 1``
this is the window of the other trajectory kinds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    """``history`` given states, the window starting at stored state ``first``, ``states`` long (None: to the
    last stored state)."""

    history: int = 1
    first: int = 0
    states: int | None = None

    def __post_init__(self):
        for name, value, low in (("history", self.history, 1), ("first", self.first, 0),
                                 ("states", self.states, self.history + 1)):
            if value is None and name == "states":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"a trajectory window's {name} must be an integer >= {low}, got {value!r}")

    def bounds(self, stored: int, where: str = "the trajectories") -> tuple[int, int]:
        """``(first, end)`` of the window among ``stored`` states; ValueError if it does not fit."""
        end = stored if self.states is None else self.first + self.states
        if end > stored or end - self.first <= self.history:
            wanted = f"{self.states} states from state {self.first}" if self.states else f"states {self.first}.."
            raise ValueError(f"{where} hold {stored} states (0..{stored - 1}); a window of {wanted} with "
                             f"{self.history} given and at least one to predict does not fit: lower "
                             f"data.first_state, data.history or data.states")
        return self.first, end

    def apply(self, y: np.ndarray, where: str = "the trajectories",
              field_axis: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of stored trajectories ``y (..., S)``: the window's given states and the whole window.
        ``field_axis``: ``y`` is ``(..., S, F)``, and both are flattened state-major, ``(..., W * F)`` and
        ``(..., history * F)``."""
        if not field_axis:
            first, end = self.bounds(y.shape[-1], where)
            window = y[..., first:end]
            return window[..., :self.history], window
        first, end = self.bounds(y.shape[-2], where)
        fields = y.shape[-1]
        window = y[..., first:end, :].reshape(*y.shape[:-2], (end - first) * fields)
        return window[..., :self.history * fields], window


__all__ = ["Window"]
