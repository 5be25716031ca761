"""``arfno1d``: the autoregressive FNO baseline, one ``fno1d`` applied step by step.

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)``,
``x = (u_0..u_{h-1}): (b, n, h)`` -> trajectory ``(b, n, h + T)`` (channels ``0..h-1`` = ``x``);
``teacher: (b, n, h + T)`` gives the input states ``h..h+T-2`` (teacher forcing) instead of the model's own
predictions.  ``h = history`` (default 1), ``T = time_steps``.

One step (Markov in the last ``h`` states; [`petrov.operators.models.stepping`][]):

    u_{k+h} = B(u_{k+h-1} + F([u_k, ..., u_{k+h-1}, t_k]))   F an ``fno1d`` with h + 1 input channels,
                                                             t_k = k / T a constant channel; B the lowest
                                                             ``state_modes`` Fourier modes (None: identity)

The time channel is there because trained models see states normalized per snapshot (the target
normalizer is point-wise per time channel), so the one-step map in those units depends on k.
Teacher forcing runs all T steps as one batch.  The FNO fields of the config configure ``F``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..trajectory import MarchingFields, check_marching_config
from . import register_model
from .fno import FNO1d, FNO1dConfig
from .stepping import SteppingOperator, step_config


@dataclass
class ArFNO1dConfig(MarchingFields, FNO1dConfig):
    """The options of ``arfno1d``: the FNO fields configure the one-step map ``F``, and

    - ``time_steps``: steps ``T`` of a trajectory (the model returns ``h + T`` states).
    - ``history``: the states ``h`` a step is given (``x`` holds states ``0..h-1``).
    - ``state_modes``: keep only the lowest this many Fourier modes of every predicted state
      (periodic grids; ``None``: off).
    """

    time_steps: int = 20
    state_modes: Optional[int] = None  # band-limit each predicted state (as marching1d; None: off)

    def __post_init__(self):
        super().__post_init__()
        check_marching_config(self)


@register_model("arfno1d", ArFNO1dConfig)
class ArFNO1d(SteppingOperator):
    """``(b, n, h)`` [, ``pos (b, n, 1)``, ``teacher (b, n, h + T)``] -> ``(b, n, h + T)``."""

    ndim = 1
    time_channel = True

    def __init__(self, config: ArFNO1dConfig):
        step = FNO1d(step_config(config, FNO1dConfig, in_channels=config.history * config.fields + 1))
        super().__init__(config, step)
