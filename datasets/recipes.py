"""Dataset recipes: the named kinds ``petrov generate`` knows, their parameters and how to make samples.

A [`Recipe`][] says what one sample is (input field ``x``, target ``y``), on which grid (periodic or
node grid, native resolution), which parameters it takes (a strict dataclass: unknown names are an
error) and how to produce the samples with given indices. Sample ``i`` depends only on ``(seed, i)``
(the GRFs are seeded per index), so chunks can be produced in any order and a run can resume.

Kinds (the FNO paper's recipes, checked against its released MATLAB scripts):

- ``burgers``: ``x = u0 ~ N(0, 625 (-Laplacian + 25 I)^-2)`` periodic on [0, 1), ``y = u(., t)`` of
  ``u_t + (u^2/2)_x = nu u_xx``; native grid 8192.
- ``burgers-trajectory``: the same equation, initial condition ``u0 ~ N(0, 625 (-Laplacian + 25 I)^-2)``
  (the same GRF samples for the same seed) and solver as ``burgers``, nu = 0.1 and t = 1 by default;
  ``y`` holds the snapshots ``u(., t_k)``, ``t_k = k t / T``, ``k = 0..T`` (``T = time_steps``, default 20,
  so ``y[:, 0] = x`` and ``y[:, T]`` is the ``burgers`` target up to solver error), taken from one time
  stepping. ``y`` is stored and loaded as ``(n_samples, n, T + 1)``: the snapshots are its channels.
- ``navier-stokes``: 2-D vorticity ``w_t + u.grad(w) = nu Laplacian(w) + f`` on the torus [0, 1)^2 (FNO's
  recipe, ``petrov.datasets.navier_stokes``): ``x = w0 ~ N(0, sigma^2 (-Laplacian + tau^2 I)^-alpha)``,
  ``y`` the snapshots ``w(., t_k)``, ``t_k = k t / T``, ``k = 0..T``, stored ``(n_samples, n, n, T + 1)``
  as ``burgers-trajectory`` stores them (``y[..., 0] = x``); nu = 1e-5, t = 20, T = 20, native grid 128.
- ``darcy``: ``x = a`` (12 where psi >= 0, 3 where psi < 0, psi a Neumann GRF), ``y = u`` solving
  ``-div(a grad u) = f``, u = 0 on the boundary; native node grid 421 (also the solve grid).
- ``darcy-inverse``: stored exactly as ``darcy``; the loader swaps the roles (input u, target a
  average-pooled to ``coarse_resolution``) and ``noise`` records the input noise level to use.
- ``imported``: a user's own arrays written by ``petrov import`` (``importing.import_arrays``); not
  generated, and its grid (dimension, size, periodic or nodes) is in each file's attributes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

import numpy as np

from ..common.config import asdict, from_dict
from ..common.registry import Registry
from . import navier_stokes
from .darcy import SOLVERS, solve_darcy
from .grf import darcy_coefficient, neumann_grf_2d
from .sampling import pool_kernel


@dataclass(frozen=True)
class BurgersParams:
    """Burgers equation and initial-condition GRF parameters."""

    nu: float = 0.1  # viscosity
    t: float = 1.0  # final time
    alpha: float = 2.0  # GRF smoothness exponent
    tau: float = 5.0  # GRF inverse length scale
    sigma: float = 25.0  # GRF amplitude


@dataclass(frozen=True)
class BurgersTrajectoryParams(BurgersParams):
    """Burgers parameters plus the time grid of the stored snapshots."""

    time_steps: int = 20  # T: snapshots at t_k = k t / T, k = 0..T


@dataclass(frozen=True)
class DarcyCoefficientParams:
    """``-div(a grad u) = f`` with the two-valued ``a`` = ``high`` where a Neumann GRF ψ ~ N(0, (-Δ + tau² I)^-alpha)
    is >= 0 and ``low`` elsewhere: the parameters the grid (``darcy``) and mesh (``darcy-mesh``) kinds share."""

    f: float = 1.0  # constant forcing
    high: float = 12.0  # coefficient where psi >= 0
    low: float = 3.0  # coefficient where psi < 0
    alpha: float = 2.0  # GRF smoothness exponent
    tau: float = 3.0  # GRF inverse length scale


# samples are stored in float32 (largest 3.4e38): a and u = O(|f| / min(a)) must stay well inside it
STORED_LIMIT = 1e30


def validate_darcy_coefficient(p: DarcyCoefficientParams) -> None:
    """ValueError unless ``high``, ``low``, ``tau`` > 0, ``f`` finite and nonzero, ``alpha`` > 1 (a
    finite-variance 2-D field), and ``high``, ``low``, ``|f|`` and ``|f| / min(high, low)`` (the scale of
    u) below ``STORED_LIMIT``, so that the samples fit float32. ``low`` >= ``high`` is allowed: the names
    only say which phase (psi >= 0 or < 0) takes which value, and psi is symmetric, so swapping the two
    values gives fields of the same distribution."""
    _positive(high=p.high, low=p.low, tau=p.tau)
    if not math.isfinite(p.f):
        raise ValueError(f"f must be finite, got {p.f}")
    if p.f == 0:
        raise ValueError("f = 0 makes u = 0 for every coefficient (u is 0 on the boundary): choose f != 0")
    for name, value in (("high", p.high), ("low", p.low), ("|f|", abs(p.f)),
                        ("|f| / min(high, low)", abs(p.f) / min(p.high, p.low))):
        if not value < STORED_LIMIT:
            raise ValueError(f"{name} = {value:.3g} is too large: the samples are stored in float32 (largest "
                             f"3.4e38), and a and u (of the order of |f| / min(high, low)) must stay below "
                             f"{STORED_LIMIT:.0e}; scale f, high and low down")
    if not p.alpha > 1.0:
        raise ValueError(f"alpha must be > 1 for a finite-variance 2-D field, got {p.alpha}")


@dataclass(frozen=True)
class DarcyParams(DarcyCoefficientParams):
    """Darcy equation, coefficient GRF and discretisation parameters."""

    averaging: Literal["arithmetic", "harmonic"] = "arithmetic"  # face coefficients
    solver: str = "auto"  # linear solver of solve_darcy: a name in petrov.datasets.darcy.SOLVERS


@dataclass(frozen=True)
class DarcyInverseParams(DarcyParams):
    """Darcy parameters plus the inverse problem's defaults (recorded, used by the loader/trainer)."""

    coarse_resolution: int = 36  # target grid: a average-pooled to it (141 -> 36 in the reference)
    noise: float = 0.0  # input noise level: u normalised per point, plus noise * N(0, 1)


@dataclass(frozen=True)
class Recipe:
    """A dataset kind. ``produce(params, resolution, seed, indices, workers) -> (x, y)`` float64 arrays
    ``(len(indices), *sample_shape)`` (the grid; for y of a trajectory kind ``(*grid, snapshots)``);
    ``validate(params, resolution)`` raises ValueError on impossible values."""

    name: str
    description: str
    family: str  # kinds of one family store the same fields and can be read as each other
    params_cls: type
    native_resolution: int
    periodic: bool
    dim: int
    x_name: str
    y_name: str
    produce: Callable[..., tuple[np.ndarray, np.ndarray]] | None  # None: not generated (imported data)
    validate: Callable[[Any, int], None]
    solver_settings: Callable[[Any], dict]
    inverse: bool = False  # loader: input = stored y, target = stored x pooled to coarse_resolution
    # y holds this many time snapshots (stored as a trailing channel axis); None: one field
    snapshots: Callable[[Any], int] | None = None
    uses_workers: bool = False  # produce() can farm samples out to a process pool

    @property
    def generatable(self) -> bool:
        return self.produce is not None

    @property
    def grid_kind(self) -> str:
        return "periodic" if self.periodic else "nodes"

    def grid(self, resolution: int) -> tuple[int, ...]:
        return (resolution,) * self.dim

    def sample_shape(self, name: str, params, resolution: int) -> tuple[int, ...]:
        """Shape of one stored sample of field ``"x"`` or ``"y"``: the grid, then the snapshots if any."""
        tail = (self.snapshots(params),) if name == "y" and self.snapshots is not None else ()
        return self.grid(resolution) + tail

    def make_params(self, params: Mapping[str, Any] | None = None):
        """Strict parameter dataclass from a mapping (unknown names list the valid ones)."""
        return from_dict(self.params_cls, dict(params or {}), context=f"{self.name} parameters")


RECIPES: Registry[Recipe] = Registry("dataset kind")
"""The dataset kinds by name (``petrov generate KIND``), each a [`Recipe`][]."""


def add_kind(registry: Registry, cls: type, name: str, **fields: Any) -> Any:
    """Make the kind ``cls(name=name, family=name, **fields)`` (a grid [`Recipe`][] or a mesh recipe; ``fields``
    may name another family), register it in ``registry`` under ``name`` and return it."""
    return registry.register(name)(cls(**{"name": name, "family": name, **fields}))


def add_imported_kind(registry: Registry, cls: type, name: str, how: str, **fields: Any) -> Any:
    """``add_kind`` for a user's own data (fields ``x`` and ``y``, no solver): not generated, its ``validate``
    refuses, saying ``how`` such a file is written."""

    def refuse(*_: Any) -> None:
        raise ValueError(f"{name!r} data are not generated; write such a file with {how}")

    return add_kind(registry, cls, name, x_name="x", y_name="y", validate=refuse, solver_settings=lambda p: {}, **fields)


def get_recipe(kind: str) -> Recipe:
    """The recipe registered as ``kind`` (KeyError listing the registered kinds otherwise)."""
    return RECIPES.get(kind)


def is_trajectory(kind: str | None) -> bool:
    """Whether data of ``kind`` store trajectories (``y``: snapshots as the trailing channels); mesh kinds
    (``petrov.datasets.mesh``) and unknown names do not."""
    return kind is not None and kind in RECIPES and get_recipe(kind).snapshots is not None


def is_inverse(kind: str | None) -> bool:
    """Whether grid data of ``kind`` pose an inverse problem (input the stored solution, target the stored
    coefficient pooled to a coarse grid); mesh kinds and unknown names do not."""
    return kind is not None and kind in RECIPES and bool(get_recipe(kind).inverse)


def list_kinds() -> list[str]:
    """The registered dataset kinds (``petrov generate --help`` lists them)."""
    return RECIPES.names()


def default_params(kind: str) -> dict[str, Any]:
    """The parameters of dataset ``kind`` with their defaults (the options ``petrov generate`` takes)."""
    return asdict(get_recipe(kind).params_cls())


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite positive number, got {value}")


def _check_resolution(resolution: int, minimum: int) -> None:
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)) or resolution < minimum:
        raise ValueError(f"resolution must be an integer >= {minimum}, got {resolution!r}")


# --- Burgers -------------------------------------------------------------------------------------


def _validate_burgers(p: BurgersParams, resolution: int) -> None:
    _positive(nu=p.nu, t=p.t, tau=p.tau, sigma=p.sigma)
    from .burgers import LARGEST_NU  # the solver's limit

    if p.nu > LARGEST_NU:
        raise ValueError(f"nu={p.nu:g} is beyond the solver's largest ({LARGEST_NU:g}); choose a smaller --nu: "
                         f"from 4 pi^2 nu t > 37 on, u(t) is the mean of u0 to double precision (the rest decays "
                         f"at least like exp(-4 pi^2 nu t))")
    if not p.alpha > 0.5:  # the 1-D field needs alpha > 1/2 to have finite variance
        raise ValueError(f"alpha must be > 0.5 for a finite-variance 1-D field, got {p.alpha}")
    _check_resolution(resolution, 4)


def _produce_burgers(p: BurgersParams, resolution: int, seed: int, indices, workers: int = 0):
    # The solver chooses its own internal grid and time step and returns values on this grid;
    # it is batched and vectorised, so ``workers`` is not used here.
    from .burgers import solve_burgers
    from .grf import periodic_grf_1d

    u0 = periodic_grf_1d(resolution, seed, indices, alpha=p.alpha, tau=p.tau, sigma=p.sigma)
    return u0, solve_burgers(u0, nu=p.nu, t=p.t)


def _burgers_solver(p: BurgersParams) -> dict:
    return {"solver": "petrov.datasets.burgers.solve_burgers", "method": "ETDRK4 pseudo-spectral, 2/3 dealiased",
            "nu": p.nu, "t": p.t}


_BURGERS_GRID = dict(native_resolution=8192, periodic=True, dim=1, x_name="u0", y_name="u")

add_kind(
    RECIPES, Recipe, "burgers",
    description="Burgers u_t + (u^2/2)_x = nu u_xx on [0,1) periodic; x = u(.,0), y = u(.,t)",
    params_cls=BurgersParams,
    produce=_produce_burgers,
    validate=_validate_burgers,
    solver_settings=_burgers_solver,
    **_BURGERS_GRID,
)


def snapshot_times(p: BurgersTrajectoryParams) -> np.ndarray:
    """``t_k = k t / T``, ``k = 0..T`` (float64; the last one is exactly t)."""
    return np.linspace(0.0, p.t, p.time_steps + 1)


def _validate_burgers_trajectory(p: BurgersTrajectoryParams, resolution: int) -> None:
    _validate_burgers(p, resolution)
    if isinstance(p.time_steps, bool) or not isinstance(p.time_steps, int) or p.time_steps < 1:
        raise ValueError(f"time_steps must be an integer >= 1, got {p.time_steps!r}")


def _produce_burgers_trajectory(p: BurgersTrajectoryParams, resolution: int, seed: int, indices, workers: int = 0):
    # same GRF samples and solver as "burgers"; the snapshots come from one time stepping
    from .burgers import solve_burgers_trajectory
    from .grf import periodic_grf_1d

    u0 = periodic_grf_1d(resolution, seed, indices, alpha=p.alpha, tau=p.tau, sigma=p.sigma)
    trajectory = solve_burgers_trajectory(u0, nu=p.nu, times=snapshot_times(p))  # (b, T + 1, n)
    return u0, np.moveaxis(trajectory, 1, -1)  # snapshots as the trailing channel axis


def _burgers_trajectory_solver(p: BurgersTrajectoryParams) -> dict:
    return {**_burgers_solver(p), "solver": "petrov.datasets.burgers.solve_burgers_trajectory",
            "times": snapshot_times(p).tolist()}


add_kind(
    RECIPES, Recipe, "burgers-trajectory",
    description="Burgers u_t + (u^2/2)_x = nu u_xx on [0,1) periodic; x = u(.,0), "
    "y = u(.,t_k) at t_k = k t / T, k = 0..T",
    params_cls=BurgersTrajectoryParams,
    **_BURGERS_GRID,
    produce=_produce_burgers_trajectory,
    validate=_validate_burgers_trajectory,
    solver_settings=_burgers_trajectory_solver,
    snapshots=lambda p: p.time_steps + 1,
)


# --- Darcy ---------------------------------------------------------------------------------------


def _validate_darcy(p: DarcyParams, resolution: int) -> None:
    validate_darcy_coefficient(p)
    if p.solver not in SOLVERS:
        raise ValueError(SOLVERS.unknown_message(p.solver))
    _check_resolution(resolution, 3)


def _produce_darcy(p: DarcyParams, resolution: int, seed: int, indices, workers: int = 0):
    psi = neumann_grf_2d(resolution, seed, indices, alpha=p.alpha, tau=p.tau)
    a = darcy_coefficient(psi, high=p.high, low=p.low)
    u = solve_darcy(a, p.f, averaging=p.averaging, solver=p.solver, workers=workers)
    return a, u


def _darcy_solver(p: DarcyParams) -> dict:
    return {"solver": "petrov.datasets.darcy.solve_darcy", "method": "5-point finite differences, node grid",
            "averaging": p.averaging, "linear_solver": p.solver}


def _validate_darcy_inverse(p: DarcyInverseParams, resolution: int) -> None:
    _validate_darcy(p, resolution)
    if not (math.isfinite(p.noise) and p.noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {p.noise}")
    pool_kernel(resolution, p.coarse_resolution)  # the target grid must be reachable


_DARCY_COMMON = dict(
    family="darcy",
    native_resolution=421,
    periodic=False,
    dim=2,
    x_name="a",
    y_name="u",
    produce=_produce_darcy,
    solver_settings=_darcy_solver,
    uses_workers=True,
)

add_kind(
    RECIPES, Recipe, "darcy",
    description="Darcy -div(a grad u) = f on (0,1)^2, u = 0 on the boundary; x = a, y = u",
    params_cls=DarcyParams,
    validate=_validate_darcy,
    **_DARCY_COMMON,
)

add_kind(
    RECIPES, Recipe, "darcy-inverse",
    description="inverse Darcy: stored as darcy (x = a, y = u); loaded as input u (+ noise), "
    "target a average-pooled to coarse_resolution",
    params_cls=DarcyInverseParams,
    validate=_validate_darcy_inverse,
    inverse=True,
    **_DARCY_COMMON,
)


# --- Navier-Stokes (parameters, checks and solves in petrov.datasets.navier_stokes) -----------------

add_kind(
    RECIPES, Recipe, "navier-stokes",
    description="2-D Navier-Stokes w_t + u.grad w = nu lap w + f on the torus [0,1)^2 (vorticity); x = w(.,0), "
    "y = w(.,t_k) at t_k = k t / T, k = 0..T",
    params_cls=navier_stokes.NavierStokesParams,
    native_resolution=128,
    periodic=True,
    dim=2,
    x_name="w0",
    y_name="w",
    produce=navier_stokes.produce,
    validate=navier_stokes.validate,
    solver_settings=navier_stokes.solver_settings,
    snapshots=lambda p: p.time_steps + 1,
    uses_workers=True,
)


# --- imported ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportedParams:
    """No parameters: the data come from the user's arrays."""


add_imported_kind(
    RECIPES, Recipe, "imported", "`petrov import` (import_arrays)",
    description="a user's own input/output arrays (petrov import); grid and channels from the file",
    params_cls=ImportedParams, produce=None, periodic=False,
    native_resolution=0, dim=0,  # per file: the native_resolution, dim and grid attributes
)


def _states_per_file(_params: Any) -> int:
    raise ValueError("a time-series file's number of states is per file (its time_steps attribute)")


add_imported_kind(
    RECIPES, Recipe, "time-series", "`petrov import --series` or `petrov import --from pdebench|the-well`",
    description="a time series of one or more fields on a grid (petrov import); y = the states (N, *grid, S, F), "
    "x = the first state",
    params_cls=ImportedParams, produce=None, periodic=False, snapshots=_states_per_file,
    native_resolution=0, dim=0,  # per file: native_shape, axis_grids, fields, time_steps
)
