"""``artransolver2d``: Transolver stepping a 2-D field autoregressively, as Neural-Solver-Library runs it on
Navier–Stokes (its ``exp_dynamic_autoregressive``: the last ``h`` states are the point features ``fx``, the
coordinates the positions ``x``, one new state per call, the window shifted by it).

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)``,
``x = (u_0..u_{h-1}): (b, n1, n2, h)`` -> ``(b, n1, n2, h + T)`` (channels ``0..h-1`` = ``x``); ``teacher:
(b, n1, n2, h + T)`` gives the states ``h..h+T-2``: all ``T`` windows of true states as one batch (the
reference's default ``teacher_forcing = 1`` trains on the same windows, one call per step).  One step
([`petrov.operators.models.stepping`][]):

    u_{k+h} = B(F([u_k, ..., u_{k+h-1}], pos))            (residual = false, the reference's)
    u_{k+h} = B(u_{k+h-1} + F([u_k, ..., u_{k+h-1}], pos))  (residual = true)

``F`` is petrov's ``transolver2d`` ([`petrov.operators.models.transolver`][]) with ``h`` input channels on
the periodic grid: linear projections, slice tokens as quadratures, the slice projections started
orthogonal, coordinates as ``(cos 2πx, sin 2πx)`` per axis or, with ``unified_pos = R``, as the distances on
the torus to the nodes of an ``R x R`` reference grid (the reference's NS run: ``R = 8``); ``B`` the lowest
``state_modes`` Fourier modes per axis (None: identity).  The reference's structured-mesh attention projects
with 3x3 convolutions (a stencil one grid spacing wide: not one operator at every resolution); this one
is pointwise, so it evaluates at 32, 64 and 128 as one map.

``REFERENCE_CONFIG``: the published NS size (``scripts/StandardBench/ns/Transolver.sh``: n_hidden 256, 8 layers,
8 heads, 32 slices, mlp_ratio 2, unified_pos with ref 8; ``REFERENCE_PARAMETERS`` its count with ``history = 10``
and linear projections).
The defaults are smaller: a step of that size on 80 windows of 64 x 64 (batch 8, T = 10) takes about a
minute of one CPU core (forward and backward).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...grids.domain import Periodic
from ..trajectory import MarchingFields, check_marching_config
from . import register_model
from .stepping import SteppingOperator, step_config
from .transolver import Transolver2d, Transolver2dConfig


@dataclass
class ArTransolver2dConfig(MarchingFields, Transolver2dConfig):
    """The options of ``artransolver2d``: ``transolver2d``'s configure the step map ``F`` (a periodic grid
    without a boundary by default), and

    - ``time_steps``: the states ``T`` it predicts (the model returns ``h + T`` states).
    - ``history``: the states ``h`` a step is given (``x`` holds states ``0..h-1``; the reference's NS: 10).
    - ``residual``: predict the change of the last state (``u + F``) instead of the state (the reference).
    - ``state_modes``: keep only the lowest this many Fourier modes per axis of every predicted state
      (periodic grids; ``None``: off).
    """

    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    n_slices: int = 32
    dim_feedforward: Optional[int] = 128  # the reference's NS: mlp_ratio 2
    unified_pos: int = 8
    periodic: Periodic = True
    dirichlet: bool = False
    residual: bool = False
    state_modes: Optional[int] = None

    def __post_init__(self):
        super().__post_init__()
        check_marching_config(self)


REFERENCE_CONFIG = {"d_model": 256, "n_layers": 8, "n_heads": 8, "n_slices": 32, "dim_feedforward": 512,
                    "unified_pos": 8, "history": 10}
# counted by hand from Neural-Solver-Library's Transolver with linear projections in place of its 3x3
# convolutions (and without its 256-entry placeholder): 169,728 + 8 x 465,448 + 769
REFERENCE_PARAMETERS = 3_894_081


@register_model("artransolver2d", ArTransolver2dConfig)
class ArTransolver2d(SteppingOperator):
    """Transolver stepping a 2-D field from its last h states: ``(b, n1, n2, h)`` -> ``(b, n1, n2, h + T)``."""

    ndim = 2

    def __init__(self, config: ArTransolver2dConfig):
        step = Transolver2d(step_config(config, Transolver2dConfig, in_channels=config.history * config.fields))
        super().__init__(config, step)
