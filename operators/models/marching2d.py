"""``marching2d``: petrov's resolution-invariant attention operator marching a 2-D field in time (e.g.
vorticity on the torus), one step from the last ``h`` states, rolled out.

Data contract ([`petrov.operators.trajectory`][]): ``forward(x, pos=None, teacher=None)``,
``x = (u_0..u_{h-1}): (b, n1, n2, h)`` -> ``(b, n1, n2, h + T)`` (channels ``0..h-1`` = ``x``); ``teacher:
(b, n1, n2, h + T)`` gives the states ``h..h+T-2`` (teacher forcing: all ``T`` windows as one batch).

One step ([`petrov.operators.models.stepping`][]), ``W = [u_k, ..., u_{k+h-1}]`` the window:

    f = MLP([W, c(pos)])                  (B, c_f, n1, n2)  pointwise, c(pos) = (cos 2πx, sin 2πx) per axis
    z = A(R f)                            (B, m, m, c_f)    R: Fourier truncation to the latent grid's
                                                            frequencies; A: ``n_layers`` encoder layers
                                                            (any registered mixer) [+ a latent spectral
                                                            block, ``latent_modes``] on the m x m points
    Δ = D(f + P z)                        (B, n1, n2, 1)    P: trigonometric interpolation back; D: spectral
                                                            decoder (``modes`` fixed) or pointwise MLP
    u_{k+h} = B(u_{k+h-1} + Δ)                              residual; B: lowest ``state_modes`` modes

``f -> Δ`` is ``latent2d`` on a periodic grid (``petrov.operators.latent_encoder``: the latent grid is fixed in
physical space, every map between it and the input grid converges under refinement), with ``h`` input
channels; so the step, and the rollout of steps, is one map at 32, 64 and 128 points per axis.

Why the history as channels (and not a causal attention over time, as ``marching1d``): between two
recorded states of FNO's Navier–Stokes at ν = 1e-5 the vorticity moves by about a tenth of the domain
(rms speed 0.13: 8 cells of 64) and changes by about 30% (relative L², states 10 to 20 of 16 trajectories
solved at 64 x 64), at every scale of the grid.  With the states as channels of the pointwise lift, the time
differences ``u_{k+h-1} - u_{k+h-2}``, ... are available at every point and every scale (linear
extrapolation in time is one linear layer), while the latent path, which must be coarse to be cheap,
supplies the nonlocal part (the velocity is a global function of the vorticity).  A causal attention over
time as ``marching1d``'s mixes a few global tokens per state, which carry no fine-scale information, and
its cost grows with the history; here the history costs ``h`` more inputs of the first linear layer.
Residual form (``u + Δ``): the step changes the state by a fraction of its size, and keeping the last
state (Δ = 0, persistence: 54% error over those 10 states) is one output away.  ``state_modes`` is off by
default: vorticity at ν = 1e-5 keeps its energy up to the grid's resolution, and a projection would
throw away true small scales of the given states (it is the remedy for diffusive problems, where the
pointwise layers' harmonics are the only small scales).

Cost: ``benchmarks/ns_step_times.py`` measures a training step.  Not translation-equivariant: the attention sees the
latent grid's coordinates, and the lift the input's; on the torus with a fixed forcing the absolute
position is information a step needs anyway.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...grids.domain import Periodic, all_periodic
from ..trajectory import MarchingFields, check_marching_config
from . import register_model
from .latent import Latent2d, Latent2dConfig
from .stepping import SteppingOperator, step_config


@dataclass
class Marching2dConfig(MarchingFields, Latent2dConfig):
    """The options of ``marching2d``: ``latent2d``'s configure the step map (on a periodic grid: Fourier
    transfers; ``mixer`` any registered mixer; ``decoder`` ``"spectral"`` or ``"pointwise"``), and

    - ``time_steps``: the states ``T`` it predicts (the model returns ``h + T`` states).
    - ``history``: the states ``h`` a step is given (``x`` holds states ``0..h-1``; NS: 10).
    - ``residual``: predict the change of the last state (``u + Δ``; False: the state itself).
    - ``state_modes``: keep only the lowest this many Fourier modes per axis of every predicted state
      (``None``: off).
    """

    n_layers: int = 3
    latent_size: int = 16
    fine_width: int = 16
    latent_modes: int = 6
    decoder_width: int = 16
    decoder_hidden: Optional[int] = 64
    modes: int = 12
    periodic: Periodic = True
    dirichlet: bool = False
    residual: bool = True
    state_modes: Optional[int] = None

    def __post_init__(self):
        super().__post_init__()
        check_marching_config(self)
        if not all_periodic(self.periodic) or self.dirichlet:
            raise ValueError("Marching2dConfig: marching2d steps fields on the periodic grid (the torus): set "
                             "periodic = true and dirichlet = false")
        if self.causal:
            raise ValueError("Marching2dConfig: the latent attention mixes points in space, which have no order; "
                             "causal must be false (the steps are causal by construction)")


@register_model("marching2d", Marching2dConfig)
class Marching2d(SteppingOperator):
    """Resolution-invariant latent attention stepping a 2-D field: ``(b, n1, n2, h)`` -> ``(b, n1, n2, h + T)``."""

    ndim = 2

    def __init__(self, config: Marching2dConfig):
        step = Latent2d(step_config(config, Latent2dConfig, in_channels=config.history * config.fields))
        super().__init__(config, step)
