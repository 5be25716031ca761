"""PDE-constrained inversion: L-BFGS-B on the finite-difference Darcy solve with adjoint gradients.

For each sample, minimize over the parameters theta (on the ``pde_grid`` node grid, default the output
grid)

    J(theta) = 1/2 ||S u(a_f) - u_obs||_h^2 / ||u_obs||_h^2 + reg_weight * TV_delta(a_c),
    a_c = to_coefficient(theta),  a_f = prolong(a_c, n_solver)

and return ``a_c`` on the output grid: ``a_c`` itself, or with a finer ``pde_grid`` the average pool of
``a_f`` to the output grid (the coefficient the solver used, averaged as the truth is), after
``snap_to_phases`` when ``snap > 0`` (on either grid): the values near 3 or 12 set to it, the
interfaces kept.

with ``u(a_f)`` petrov's 5-point solve. ``dJ/da_f`` comes from one adjoint solve
(``petrov.datasets.darcy_adjoint.misfit_and_gradient``, one SuperLU factorization per evaluation);
the chain through the prolongation, the parametrization and the regularizer is torch autograd
(float64). ``box`` parametrization: L-BFGS-B bounds ``[low, high]``; ``level-set``: unbounded.

Stopping: after ``max_iter`` iterations (or scipy's own tests), or with ``stop="discrepancy"`` at the
first iterate whose data misfit ``||S u(a) - u_obs||_h`` is within ``discrepancy`` times the expected
noise norm ``sqrt(h^2 sum_j sigma_j^2)`` (Morozov's discrepancy principle: fitting the data closer than
their noise adds noise to ``a``). ``trace=True`` keeps the answer of the iterates (every one up to 10,
then about 15% apart) with their CPU seconds and misfits, for error-versus-time curves.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import scipy.optimize
import torch

from ..common.host import to_numpy
from ..common.progress import progress_bar
from ..datasets import average_pool
from ..datasets.darcy_adjoint import misfit_and_gradient, observation_stride
from ..datasets.sampling import pool_kernel
from .config import InversionConfig
from .newton import fit_gauss_newton
from .parametrization import from_coefficient, prolong, snap_to_phases, to_coefficient, total_variation

# The relative misfit is ~1e-4..1e-6 near the solution, so scipy's default tolerances (pgtol 1e-5) stop
# L-BFGS-B after a few iterations; stop on the iteration budget or a negligible relative decrease instead.
LBFGS_OPTIONS = {"gtol": 1e-14, "ftol": 1e-12, "maxls": 40}


def solver_setup(n_obs: int, solver_resolution: int | None) -> tuple[int, int]:
    """``(n_solver, obs_stride)``: the solve grid and the stride taking the observations to the grid the
    misfit is measured on (the coarser of the two; the finer must be a strided refinement of it)."""
    n_solver = n_obs if solver_resolution is None else int(solver_resolution)
    if n_solver >= n_obs:
        observation_stride(n_solver, n_obs)  # S samples the solve at the observation nodes
        return n_solver, 1
    try:
        return n_solver, observation_stride(n_obs, n_solver)  # observations thinned to the solve grid
    except ValueError:
        raise ValueError(f"solver_resolution {n_solver} and the observation grid {n_obs} do not nest: "
                         f"(n - 1) of one must divide (n - 1) of the other") from None


def objective(theta: np.ndarray, u_obs: np.ndarray, n_solver: int, cfg: InversionConfig, *,
              with_misfit: bool = False):
    """``J`` and ``dJ/dtheta`` (flattened) for one sample's observation ``u_obs (m, m)``; with
    ``with_misfit`` also the data misfit ``||S u(a) - u_obs||_h``."""
    n_c = int(round(len(theta) ** 0.5))
    th = torch.tensor(theta.reshape(1, n_c, n_c), dtype=torch.float64, requires_grad=True)
    a_c = to_coefficient(th, cfg)
    a_f = prolong(a_c, n_solver)
    scale = 1.0 / float((u_obs**2).sum() / (u_obs.shape[0] - 1) ** 2)  # 1 / ||u_obs||_h^2
    misfit, grad_f, _ = misfit_and_gradient(to_numpy(a_f[0]), u_obs, cfg.f, cfg.averaging)
    reg = cfg.reg_weight * total_variation(a_c, cfg.tv_delta).sum()
    # backward of <a_f, dJ/da_f> + reg gives dJ/dtheta through the prolongation and parametrization
    ((a_f[0] * torch.from_numpy(scale * grad_f)).sum() + reg).backward()
    value, grad = scale * misfit + reg.item(), to_numpy(th.grad).ravel().copy()
    return (value, grad, float(np.sqrt(2.0 * misfit))) if with_misfit else (value, grad)


def unknown_grid(cfg: InversionConfig, n_solver: int) -> int:
    """The node grid of the pde unknown: ``pde_grid`` (checked against the solve and output grids) or
    the output grid."""
    if cfg.pde_grid is None or cfg.pde_grid == cfg.grid:
        return cfg.grid
    if not cfg.grid <= cfg.pde_grid <= n_solver:
        raise ValueError(f"pde_grid ({cfg.pde_grid}) must lie between the output grid ({cfg.grid}) and the "
                         f"solve grid ({n_solver})")
    try:
        pool_kernel(n_solver, cfg.grid)
    except ValueError as err:
        raise ValueError(f"pde_grid: the solve grid {n_solver} cannot be pooled to the output grid: {err}") from None
    return cfg.pde_grid


def output_coefficients(a_u: torch.Tensor, n_solver: int, cfg: InversionConfig) -> np.ndarray:
    """The answers ``(b, grid, grid)`` on the output grid from unknowns ``a_u (b, n_u, n_u)``: themselves on
    the output grid, else their prolongation to the solve grid average-pooled; values snapped first when
    ``cfg.snap > 0``."""
    a = a_u if a_u.shape[-1] == cfg.grid else prolong(a_u, n_solver)
    a = to_numpy(snap_to_phases(a, cfg.low, cfg.high, cfg.snap) if cfg.snap > 0 else a)
    return a if a.shape[-1] == cfg.grid else average_pool(a, cfg.grid)


def output_coefficient(a_u: torch.Tensor, n_solver: int, cfg: InversionConfig) -> np.ndarray:
    """[`output_coefficients`][] of the first unknown of ``a_u (b, n_u, n_u)``: ``(grid, grid)``."""
    return output_coefficients(a_u[:1], n_solver, cfg)[0]


def noise_norm(noise_std: np.ndarray | float | None, m: int) -> float:
    """Expected norm ``sqrt(h^2 sum_j sigma_j^2)`` (``h = 1/(m - 1)``) of Gaussian noise with the point-wise
    standard deviation ``noise_std`` (a scalar or ``(m, m)``; None: no noise) on an ``m x m`` node grid."""
    if noise_std is None:
        return 0.0
    sigma = np.broadcast_to(np.asarray(noise_std, dtype=np.float64), (m, m))
    return float(np.sqrt((sigma**2).sum())) / (m - 1)


def trace_points(max_iter: int, ratio: float = 1.15) -> set[int]:
    """The iterations a trace records: every one up to 10, then about ``ratio`` apart (log-spaced)."""
    points, k = set(range(11)), 10.0
    while k < max_iter:
        k *= ratio
        points.add(int(round(k)))
    return points


class _Run:
    """One sample's L-BFGS-B run: the objective (remembering its last point's data misfit), the
    discrepancy stop and the optional trace, with the CPU time of the trace left out of the clock."""

    def __init__(self, obs: np.ndarray, n_solver: int, n_u: int, cfg: InversionConfig, target: float, trace: bool):
        self.obs, self.n_solver, self.n_u, self.cfg, self.target = obs, n_solver, n_u, cfg, target
        self.points = trace_points(cfg.max_iter) if trace else set()
        self.records: list[tuple[int, float, float, np.ndarray]] = []
        self.last: tuple[np.ndarray, float] | None = None
        self.iteration, self.excluded, self.t0 = 0, 0.0, time.process_time()
        self.stopped = False

    def seconds(self) -> float:
        return time.process_time() - self.t0 - self.excluded

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad, misfit = objective(theta, self.obs, self.n_solver, self.cfg, with_misfit=True)
        self.last = (theta.copy(), misfit)
        return value, grad

    def misfit_at(self, theta: np.ndarray) -> float:
        """``||S u(a) - u_obs||_h`` at ``theta`` (the last evaluation's when it was there)."""
        if self.last is not None and np.array_equal(self.last[0], theta):
            return self.last[1]
        self(theta)
        return self.last[1]

    def record(self, theta: np.ndarray, misfit: float) -> None:
        t = time.process_time()
        seconds = t - self.t0 - self.excluded  # read before the recording's own work, which is excluded
        a_u = to_coefficient(torch.from_numpy(theta.reshape(1, self.n_u, self.n_u)), self.cfg)
        self.records.append((self.iteration, seconds, misfit, output_coefficient(a_u, self.n_solver, self.cfg)))
        self.excluded += time.process_time() - t

    def callback(self, intermediate_result) -> None:
        self.iteration += 1
        theta = intermediate_result.x
        stopping = self.cfg.stop == "discrepancy"
        misfit = self.misfit_at(theta) if (stopping or self.points) else float("nan")
        if self.iteration in self.points:
            self.record(theta, misfit)
        if stopping and misfit <= self.target:
            self.stopped = True
            raise StopIteration

    def trace(self) -> dict[str, np.ndarray]:
        return trace_arrays(self.records)


def trace_arrays(records: list[tuple[int, float, float, np.ndarray]]) -> dict[str, np.ndarray]:
    """The trace dict (iteration, cpu_seconds, misfit, a) of ``(iteration, seconds, misfit, a)`` records."""
    it, sec, mis, a = zip(*records)
    return {"iteration": np.array(it), "cpu_seconds": np.array(sec), "misfit": np.array(mis), "a": np.stack(a)}


def fit_sample(obs: np.ndarray, start: torch.Tensor, n_solver: int, cfg: InversionConfig,
               noise_std=None, trace: bool = False) -> tuple[torch.Tensor, dict[str, Any]]:
    """One sample: the unknown ``a_u (1, n_u, n_u)`` after L-BFGS-B (or, with ``optimizer="gauss-newton"``,
    [`petrov.inverse.newton.fit_gauss_newton`][]) from ``start (n_u, n_u)`` for the
    observation ``obs (m, m)`` on the misfit grid (already thinned), and its info (objective,
    iterations, solves, CPU seconds, the stop reason, the final data misfit, with ``trace`` the
    iterates' output coefficients at [`trace_points`][] with their CPU seconds and misfits)."""
    n_u = start.shape[-1]
    u_norm = float(np.sqrt((obs**2).sum())) / (obs.shape[0] - 1)
    target = cfg.discrepancy * max(noise_norm(noise_std, obs.shape[0]), cfg.discrepancy_floor * u_norm)
    if cfg.optimizer == "gauss-newton":
        records: list[tuple[int, float, float, np.ndarray]] = []

        def keep(iteration: int, seconds: float, misfit: float, theta: np.ndarray) -> None:
            records.append((iteration, seconds, misfit,
                            output_coefficient(torch.from_numpy(theta[None]), n_solver, cfg)))

        a_u, info = fit_gauss_newton(obs, start, n_solver, cfg, target, keep if trace else None)
        if trace:
            info["trace"] = trace_arrays(records)
        return a_u, info
    # one Bounds object, not n_u^2 (low, high) pairs: scipy converts a list of pairs in a Python loop
    bounds = scipy.optimize.Bounds(cfg.low, cfg.high) if cfg.parametrization == "box" else None
    run = _Run(obs, n_solver, n_u, cfg, target, trace)
    x0 = to_numpy(from_coefficient(start, cfg)).ravel()
    if trace:
        run.record(x0, run.misfit_at(x0))
    res = scipy.optimize.minimize(run, x0, jac=True, method="L-BFGS-B", bounds=bounds, callback=run.callback,
                                  options=LBFGS_OPTIONS | {"maxiter": cfg.max_iter, "maxcor": cfg.lbfgs_memory})
    seconds = run.seconds()
    a_u = to_coefficient(torch.from_numpy(res.x.reshape(1, n_u, n_u)), cfg)
    info = {"objective": float(res.fun), "iterations": int(res.nit), "solves": int(res.nfev),
            "cpu_seconds": seconds, "message": "discrepancy reached" if run.stopped else str(res.message),
            "misfit": run.misfit_at(res.x), "misfit_target": target}
    if trace:
        if not run.records or run.records[-1][0] != run.iteration:
            run.record(res.x, info["misfit"])
        info["trace"] = run.trace()
    return a_u, info


def invert_pde(u_obs: np.ndarray, cfg: InversionConfig, start: np.ndarray | None = None, *,
               noise_std: np.ndarray | None = None, trace: bool = False,
               posterior: Callable[..., dict[str, Any]] | None = None, progress: bool = True):
    """Recover ``a_c (N, grid, grid)`` from observations ``u_obs (N, m, m)`` (physical units), one L-BFGS-B
    run per sample from ``start`` (``(N, grid, grid)``, default the midpoint ``(low + high)/2``; prolonged
    to ``pde_grid`` when that is finer).

    ``noise_std``: the point-wise noise standard deviation, ``(m, m)`` or ``(N, m, m)`` (None: no noise),
    for ``stop="discrepancy"``. ``trace``: record the iterates ([`fit_sample`][]). ``posterior``:
    called per sample as ``posterior(i, a_fine, obs, noise_std)`` with the sample's position, the
    solver's coefficient ``a_fine (n_solver, n_solver)`` at the answer, its observation on the misfit
    grid and noise std; its dict is stored under ``info[i]["uncertainty"]``.

    Returns ``(a_c, info)``; ``info[i]`` holds the final objective, iterations, solves and CPU seconds.
    """
    n_solver, stride = solver_setup(u_obs.shape[-1], cfg.solver_resolution)
    n_u = unknown_grid(cfg, n_solver)
    if start is None:
        start = np.full((len(u_obs), n_u, n_u), cfg.threshold)
    start = prolong(torch.as_tensor(start, dtype=torch.float64), n_u)
    out, info = np.empty((len(u_obs), cfg.grid, cfg.grid)), []
    bar = progress_bar(range(len(u_obs)), desc="pde inversion", unit="sample", leave=False, enabled=progress)
    for i in bar:
        obs = np.ascontiguousarray(u_obs[i, ::stride, ::stride], dtype=np.float64)
        sigma = None if noise_std is None else np.asarray(noise_std)
        if sigma is not None:
            sigma = (sigma[i] if sigma.ndim == 3 else sigma)[::stride, ::stride]
        a_u, record = fit_sample(obs, start[i], n_solver, cfg, sigma, trace)
        out[i] = output_coefficient(a_u, n_solver, cfg)
        if posterior is not None:
            t0 = time.process_time()
            record["uncertainty"] = posterior(i, to_numpy(prolong(a_u, n_solver)[0]), obs, sigma)
            record["uncertainty_cpu_seconds"] = time.process_time() - t0
        info.append(record)
    return out, info
