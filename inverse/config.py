"""Settings of an inversion: one strict dataclass shared by the three methods (unknown keys are errors)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping, Optional

from ..common.config import from_dict


@dataclass(frozen=True)
class InversionConfig:
    """What is optimized and how: the settings of ``petrov invert`` (``--set name=value``) and of
    [`invert`][petrov.inverse.invert].

    The unknown is the coefficient on a coarse ``grid x grid`` node grid, prolonged bilinearly to the
    solve/observation grid.  The pde method minimizes
    ``1/2 ||S u(a) - u_obs||_h^2 / ||u_obs||_h^2 + reg_weight * TV_delta(a)``.

    The unknown and its prior knowledge:

    - ``grid``: nodes per side of the unknown's grid (``None``: the learned model's output grid, else 36).
    - ``parametrization``: ``"box"`` (a itself, kept in ``[low, high]``) or ``"level-set"``
      (``a = low + (high - low) sigmoid(phi/tau)``).
    - ``low``, ``high``: the two values of the coefficient (3 and 12 in the Darcy recipe).
    - ``tau``: the level-set sharpness (in units of phi).
    - ``reg_weight``: the weight of the total variation.
    - ``tv_delta``: the smoothing of ``|grad a|`` in the total variation (units of a per unit length).

    The pde method (petrov's finite-difference solver and its adjoint):

    - ``averaging``: ``"arithmetic"`` or ``"harmonic"`` means of a on the cell faces.
    - ``f``: the right-hand side of ``-div(a grad u) = f``.
    - ``solver_resolution``: the solve grid (``None``: the observation grid).
    - ``pde_grid``: the pde method's unknown on a finer node grid instead (e.g. the solve grid), its
      prolongation average-pooled to the output grid as the truth is: the recovered 3/12 interfaces
      can then fall between output nodes (``None``: the output grid).
    - ``snap``: with a finer ``pde_grid``: the fine values within ``snap`` of ``low`` or ``high`` are
      set to that value before pooling (0: off).
    - ``max_iter``: iterations per sample (L-BFGS-B's, or Gauss-Newton's outer steps).
    - ``lbfgs_memory``: correction pairs L-BFGS-B keeps (scipy's ``maxcor``).
    - ``optimizer``: ``"lbfgs"`` (L-BFGS-B) or ``"gauss-newton"`` (projected Gauss-Newton,
      [`petrov.inverse.newton`][]; needs ``parametrization = "box"``).
    - ``cg_max_iter``: Gauss-Newton: conjugate-gradient iterations per step.
    - ``cg_tol``: Gauss-Newton: the relative residual at which the conjugate gradients stop.
    - ``stop``: ``"iterations"`` (run ``max_iter`` iterations) or ``"discrepancy"`` (stop as soon as
      the data misfit ``||S u(a) - u_obs||_h`` falls to ``discrepancy`` times the expected noise norm
      ``sqrt(h^2 sum_j sigma_j^2)``: Morozov's discrepancy principle; ``max_iter`` stays the cap).
    - ``discrepancy``: the factor of the noise norm at which ``stop = "discrepancy"`` stops.
    - ``discrepancy_floor``: the noise norm is taken as at least this fraction of ``||u_obs||_h``, so
      clean data (sigma = 0) also stop once they are fitted that closely.

    The uncertainty of a pde answer (a Laplace approximation, [`petrov.inverse.laplace`][]):

    - ``prior_std``, ``prior_length``: scale and correlation length of the Gaussian smoothness prior.
    - ``posterior_rank``: the rank of the Gauss-Newton Hessian of the posterior.
    - ``posterior_samples``: posterior samples drawn for the phase probabilities and the intervals.
    - ``interval``: the nominal probability of the error interval (0.9: a 90% interval).
    - ``error_scale``: ``(c_low, c_high)``: the interval is ``[c_low, c_high]`` times the posterior
      median error (split-conformal factors measured on validation samples,
      [`petrov.inverse.calibration.conformal_scale`][]); ``None``: the posterior's quantiles of the
      error.

    The surrogate method (gradient descent through a trained forward operator):

    - ``steps``: Adam steps.
    - ``lr``: Adam's learning rate.
    - ``batch_size``: samples optimized together.
    """

    grid: int | None = None
    parametrization: Literal["box", "level-set"] = "box"
    low: float = 3.0
    high: float = 12.0
    tau: float = 1.0  # level-set sharpness (in units of phi)
    reg_weight: float = 1e-6  # weight of the total variation
    tv_delta: float = 1.0  # smoothing of |grad a| (units of a per unit length)
    # pde: finite-difference solver
    averaging: Literal["arithmetic", "harmonic"] = "arithmetic"
    f: float = 1.0
    solver_resolution: int | None = None  # None: the observation grid
    pde_grid: int | None = None  # the pde unknown's node grid (None: the output grid)
    snap: float = 0.0  # with a finer pde_grid: fine values within snap of low/high set to it before pooling
    max_iter: int = 200  # L-BFGS-B iterations per sample
    lbfgs_memory: int = 10  # L-BFGS-B correction pairs kept (scipy's maxcor)
    optimizer: Literal["lbfgs", "gauss-newton"] = "lbfgs"  # pde: L-BFGS-B, or projected Gauss-Newton-CG (box)
    cg_max_iter: int = 50  # gauss-newton: CG iterations per step (more buy better steps than more steps do at 141^2)
    cg_tol: float = 0.1  # gauss-newton: relative residual at which CG stops
    stop: Literal["iterations", "discrepancy"] = "iterations"
    discrepancy: float = 1.0  # tau: stop when the misfit <= tau * the noise norm (stop="discrepancy")
    discrepancy_floor: float = 1e-3  # the noise norm used is >= this fraction of ||u_obs||_h
    # uncertainty of the pde answer: Laplace approximation
    prior_std: float = 3.0  # (3, 0.05): the sharpest calibrated intervals on validation samples (141 -> 36)
    prior_length: float = 0.05
    posterior_rank: int = 100
    posterior_samples: int = 200
    interval: float = 0.9
    error_scale: Optional[tuple[float, float]] = None
    # surrogate: gradient descent through a trained forward operator
    steps: int = 300
    lr: float = 0.05
    batch_size: int = 16

    def __post_init__(self):
        for name in ("low", "high", "tau", "tv_delta", "f", "discrepancy", "prior_std", "prior_length"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"inversion setting {name} must be finite, got {getattr(self, name)}")
        if not 0 < self.low < self.high:
            raise ValueError(f"need 0 < low < high for the coefficient bounds, got low={self.low}, high={self.high}")
        for name in ("tau", "tv_delta", "lr", "discrepancy", "prior_std", "prior_length"):
            if not getattr(self, name) > 0:
                raise ValueError(f"inversion setting {name} must be > 0, got {getattr(self, name)}")
        if not (math.isfinite(self.reg_weight) and self.reg_weight >= 0):
            raise ValueError(f"reg_weight must be a finite number >= 0, got {self.reg_weight}")
        if not (math.isfinite(self.discrepancy_floor) and 0 <= self.discrepancy_floor < 1):
            raise ValueError(f"discrepancy_floor must lie in [0, 1), got {self.discrepancy_floor}")
        if not (math.isfinite(self.snap) and 0 <= self.snap <= 0.5 * (self.high - self.low)):
            raise ValueError(f"snap must lie in [0, (high - low)/2] = [0, {0.5 * (self.high - self.low):g}] "
                             f"(0: off), got {self.snap}")
        if self.grid is not None and self.grid < 2:
            raise ValueError(f"grid must be >= 2 nodes per side, got {self.grid}")
        if self.pde_grid is not None and self.pde_grid < 2:
            raise ValueError(f"pde_grid must be >= 2 nodes per side, got {self.pde_grid}")
        if self.solver_resolution is not None and self.solver_resolution < 3:
            raise ValueError(f"solver_resolution must be >= 3, got {self.solver_resolution}")
        if self.error_scale is not None and not (len(self.error_scale) == 2 and all(map(math.isfinite, self.error_scale))
                                                 and 0 <= self.error_scale[0] <= self.error_scale[1]):
            raise ValueError(f"error_scale must be two finite factors 0 <= low <= high, got {self.error_scale}")
        if not 0 < self.interval < 1:
            raise ValueError(f"interval must lie in (0, 1) (e.g. 0.9 for a 90% interval), got {self.interval}")
        if self.optimizer == "gauss-newton" and self.parametrization != "box":
            raise ValueError("optimizer 'gauss-newton' needs parametrization='box' (it projects on the bounds)")
        if not (math.isfinite(self.cg_tol) and 0 < self.cg_tol < 1):
            raise ValueError(f"cg_tol must lie in (0, 1), got {self.cg_tol}")
        for name in ("max_iter", "lbfgs_memory", "cg_max_iter", "steps", "batch_size", "posterior_rank", "posterior_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"inversion setting {name} must be >= 1, got {getattr(self, name)}")

    @property
    def threshold(self) -> float:
        """The phase threshold (midpoint of the two values: 7.5 for 3 and 12)."""
        return 0.5 * (self.low + self.high)


def inversion_config(settings: InversionConfig | Mapping[str, Any] | None = None, **overrides) -> InversionConfig:
    """An [`InversionConfig`][] from a config, a mapping (strict) or nothing, with ``overrides`` applied."""
    if isinstance(settings, InversionConfig):
        return replace(settings, **overrides) if overrides else settings
    return from_dict(InversionConfig, {**dict(settings or {}), **overrides}, context="inversion settings")
