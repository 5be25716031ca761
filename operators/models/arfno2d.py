"""``arfno2d``: FNO's 2-D baseline for time-dependent flows, one ``fno2d`` stepping one state from the last
``h``, rolled out (the FNO paper's Navier–Stokes model, its script ``fourier_2d_time.py``).

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)``,
``x = (u_0..u_{h-1}): (b, n1, n2, h)`` -> ``(b, n1, n2, h + T)`` (channels ``0..h-1`` = ``x``); ``teacher:
(b, n1, n2, h + T)`` gives the states ``h..h+T-2`` (teacher forcing: all ``T`` windows of true states as one
batch).  One step ([`petrov.operators.models.stepping`][]):

    u_{k+h} = B(F([u_k, ..., u_{k+h-1}], pos))            (residual = false, the reference's)
    u_{k+h} = B(u_{k+h-1} + F([u_k, ..., u_{k+h-1}], pos))  (residual = true)

``F`` an ``fno2d`` with ``h`` input channels and the 2 coordinates (lift to ``width``, ``n_layers`` spectral
blocks with ``modes`` modes per axis, the last without activation, MLP ``width -> proj_hidden -> 1``); ``B``
the lowest ``state_modes`` Fourier modes per axis (None: identity).  No time channel: the states of a
trajectory are normalized alike (one mean and standard deviation for all), so one map serves every step.

The reference's facts (zongyi-li/fourier_neural_operator, ``fourier_2d_time.py``): the previous 10 states
and the coordinates ``(x, y)`` as 12 input channels, width 20, 12 modes per axis, 4 layers, a 128-wide
projection, GELU, no padding on the periodic domain, the state predicted directly (no residual), trained
by rolling out the 10 output states with the loss summed over the steps.  These are the defaults here
(``history`` = 1 by the contract; NS's set-up is ``history = 10``, ``time_steps = 10``), and the model is
petrov's ``fno2d``: the coordinates are the periodic grid ``i/n`` (the reference's are ``linspace(0, 1,
n)``), and the spectral weights start as the reference's (uniform on ``[0, 1/width²)``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...grids.domain import Periodic
from ..trajectory import MarchingFields, check_marching_config
from . import register_model
from .fno import FNO2d, FNO2dConfig
from .stepping import SteppingOperator, step_config


@dataclass
class ArFNO2dConfig(MarchingFields, FNO2dConfig):
    """The options of ``arfno2d``: the FNO fields configure the step map ``F`` (defaults: the reference's
    Navier–Stokes sizes), and

    - ``time_steps``: the states ``T`` it predicts (the model returns ``h + T`` states).
    - ``history``: the states ``h`` a step is given (``x`` holds states ``0..h-1``; FNO's NS: 10).
    - ``residual``: predict the change of the last state (``u + F``) instead of the state (the reference).
    - ``state_modes``: keep only the lowest this many Fourier modes per axis of every predicted state
      (``None``: off).
    """

    width: int = 20
    modes: int = 12
    proj_hidden: int = 128
    periodic: Periodic = True
    residual: bool = False
    state_modes: Optional[int] = None

    def __post_init__(self):
        super().__post_init__()
        check_marching_config(self)


@register_model("arfno2d", ArFNO2dConfig)
class ArFNO2d(SteppingOperator):
    """FNO-2D stepping a 2-D field from its last h states: ``(b, n1, n2, h)`` -> ``(b, n1, n2, h + T)``."""

    ndim = 2

    def __init__(self, config: ArFNO2dConfig):
        step = FNO2d(step_config(config, FNO2dConfig, in_channels=config.history * config.fields))
        super().__init__(config, step)
