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
"""
from __future__ import annotations

import time

import numpy as np
import scipy.optimize
import torch

from petrov.common.progress import progress_bar
from petrov.datasets import average_pool
from petrov.datasets.darcy_adjoint import misfit_and_gradient, observation_stride
from petrov.datasets.sampling import pool_kernel

from .config import InversionConfig
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


def objective(theta: np.ndarray, u_obs: np.ndarray, n_solver: int, cfg: InversionConfig) -> tuple[float, np.ndarray]:
    """``J`` and ``dJ/dtheta`` (flattened) for one sample's observation ``u_obs (m, m)``."""
    n_c = int(round(len(theta) ** 0.5))
    th = torch.tensor(theta.reshape(1, n_c, n_c), dtype=torch.float64, requires_grad=True)
    a_c = to_coefficient(th, cfg)
    a_f = prolong(a_c, n_solver)
    scale = 1.0 / float((u_obs**2).sum() / (u_obs.shape[0] - 1) ** 2)  # 1 / ||u_obs||_h^2
    misfit, grad_f, _ = misfit_and_gradient(a_f[0].detach().numpy(), u_obs, cfg.f, cfg.averaging)
    reg = cfg.reg_weight * total_variation(a_c, cfg.tv_delta).sum()
    # backward of <a_f, dJ/da_f> + reg gives dJ/dtheta through the prolongation and parametrization
    ((a_f[0] * torch.from_numpy(scale * grad_f)).sum() + reg).backward()
    return scale * misfit + reg.item(), th.grad.numpy().ravel().copy()


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


def output_coefficient(a_u: torch.Tensor, n_solver: int, cfg: InversionConfig) -> np.ndarray:
    """The answer on the output grid from the unknown ``a_u (1, n_u, n_u)``: itself on the output grid,
    else its prolongation to the solve grid average-pooled; values snapped first when ``cfg.snap > 0``."""
    a = a_u if a_u.shape[-1] == cfg.grid else prolong(a_u, n_solver)
    a = (snap_to_phases(a, cfg.low, cfg.high, cfg.snap) if cfg.snap > 0 else a).numpy()
    return a[0] if a.shape[-1] == cfg.grid else average_pool(a, cfg.grid)[0]


def invert_pde(u_obs: np.ndarray, cfg: InversionConfig, start: np.ndarray | None = None):
    """Recover ``a_c (N, grid, grid)`` from observations ``u_obs (N, m, m)`` (physical units), one L-BFGS-B
    run per sample from ``start`` (``(N, grid, grid)``, default the midpoint ``(low + high)/2``; prolonged
    to ``pde_grid`` when that is finer).

    Returns ``(a_c, info)``; ``info[i]`` holds the final objective, iterations, solves and CPU seconds.
    """
    n_solver, stride = solver_setup(u_obs.shape[-1], cfg.solver_resolution)
    n_u = unknown_grid(cfg, n_solver)
    if start is None:
        start = np.full((len(u_obs), n_u, n_u), cfg.threshold)
    start = prolong(torch.as_tensor(start, dtype=torch.float64), n_u)
    bounds = [(cfg.low, cfg.high)] * (n_u * n_u) if cfg.parametrization == "box" else None
    out, info = np.empty((len(u_obs), cfg.grid, cfg.grid)), []
    for i, obs in enumerate(progress_bar(u_obs, desc="pde inversion", unit="sample", leave=False)):
        obs = np.ascontiguousarray(obs[::stride, ::stride], dtype=np.float64)
        t0 = time.process_time()
        x0 = from_coefficient(start[i], cfg).numpy().ravel()
        res = scipy.optimize.minimize(objective, x0, args=(obs, n_solver, cfg), jac=True, method="L-BFGS-B",
                                      bounds=bounds, options=LBFGS_OPTIONS | {"maxiter": cfg.max_iter})
        a_u = to_coefficient(torch.from_numpy(res.x.reshape(1, n_u, n_u)), cfg)
        out[i] = output_coefficient(a_u, n_solver, cfg)
        info.append({"objective": float(res.fun), "iterations": int(res.nit), "solves": int(res.nfev),
                     "cpu_seconds": time.process_time() - t0, "message": str(res.message)})
    return out, info
