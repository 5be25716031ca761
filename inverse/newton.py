"""PDE-constrained inversion by projected Gauss-Newton with conjugate gradients (``optimizer="gauss-newton"``).

The objective is the pde method's ([`pde`][]), with the box parametrization ``a_c = theta`` on the
unknown's ``n_u`` node grid and ``P`` the bilinear prolongation to the solve grid:

    J(theta) = 1/2 s ||S u(P theta) - u_obs||_h^2 + reg_weight * TV_delta(theta),   s = 1/||u_obs||_h^2

Each outer iteration factorizes ``A(P theta)`` once ([`linearization.forward_state`][]) and uses that
factorization for the gradient and for every product with the Gauss-Newton Hessian

    H v = s P^T J^T W J P v + reg_weight * Hess(TV) v,      W = h^2 (the misfit's quadrature weight)

(``J v`` and ``J^T w`` a triangular solve pair each, ``Hess(TV)`` a sparse matrix assembled once per
step). The step solves ``H p = -g`` on the free unknowns (those not held at a bound by the gradient) by at
most ``cg_max_iter`` conjugate-gradient iterations to the relative residual ``cg_tol``, then backtracks
along the projected path ``clip(theta + alpha p, low, high)`` until the Armijo condition holds. Every
trial costs a factorization, so the search starts from twice the previous step's accepted ``alpha``
(capped at 1) and backtracks to the minimizer of the quadratic through ``J(0)``, the slope and
``J(alpha)``, kept within ``[0.1, 0.5] alpha`` (the safeguarded interpolation of Nocedal & Wright, ch. 3.5):
the truncated Gauss-Newton step overshoots by a similar factor from one step to the next. L-BFGS-B
needs a factorization per iteration and a hundred or more iterations to fit 1% noise at 141 x 141;
here the curvature comes from the cheap solves, so a few dozen factorizations do.

Stops when the data misfit ``||S u - u_obs||_h`` reaches the target (``stop="discrepancy"``), after
``max_iter`` outer iterations, when a step lowers ``J`` by less than ``FTOL`` of it, or when the line
search fails. Same contract as
[`petrov.inverse.pde.fit_sample`][].
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse.linalg
import torch

from ..common.host import to_numpy
from .config import InversionConfig
from .linearization import Linearization, forward_state
from .parametrization import prolong, total_variation, total_variation_hessian

ARMIJO = 1e-4  # sufficient decrease along the projected path
FTOL = 1e-12  # converged when a step lowers J by less than this fraction (L-BFGS-B's ftol in .pde)
MAX_BACKTRACKS = 20
SHRINK = (0.1, 0.5)  # each backtrack scales alpha by a factor within these bounds


def _axis_prolongation(n_u: int, n_solver: int) -> np.ndarray:
    """``P_1 (n_solver, n_u)`` with ``prolong(theta) = P_1 theta P_1^T``: the bilinear prolongation is a
    product of one linear interpolation per axis, read off by prolonging fields constant along the second
    axis. Two small matrix products per use instead of a torch call and its autograd adjoint (~1.4 ms per
    Hessian product at 36 -> 141, about half a solve pair)."""
    fields = np.eye(n_u)[:, :, None] * np.ones(n_u)[None, None, :]
    return to_numpy(prolong(torch.from_numpy(fields), n_solver)[:, :, 0]).T


class _Problem:
    """The objective's pieces for one observation ``obs (m, m)`` on the misfit grid."""

    def __init__(self, obs: np.ndarray, n_u: int, n_solver: int, cfg: InversionConfig):
        self.obs, self.n_u, self.n_solver, self.cfg = obs, n_u, n_solver, cfg
        self.h2 = 1.0 / (obs.shape[0] - 1) ** 2
        self.scale = 1.0 / float((obs**2).sum() * self.h2)
        self.factorizations = 0
        self.axis = None if n_u == n_solver else _axis_prolongation(n_u, n_solver)

    def prolong(self, theta: np.ndarray) -> np.ndarray:
        """``P theta``: ``(n_u, n_u)`` -> ``(n_solver, n_solver)``."""
        return theta if self.axis is None else self.axis @ theta @ self.axis.T

    def prolong_t(self, w: np.ndarray) -> np.ndarray:
        """``P^T w``: ``(n_solver, n_solver)`` -> ``(n_u, n_u)``."""
        return w if self.axis is None else self.axis.T @ w @ self.axis

    def evaluate(self, theta: np.ndarray) -> tuple[float, float, Linearization, np.ndarray, np.ndarray]:
        """``(J, misfit ||S u - u_obs||_h, linearization, residual, grad TV)`` at ``theta (n_u, n_u)``."""
        lin = forward_state(self.prolong(theta), self.obs.shape[0], self.cfg)
        self.factorizations += 1
        r = lin.u[::lin.stride, ::lin.stride] - self.obs
        data = float(self.h2 * (r * r).sum())
        leaf = torch.tensor(theta[None], dtype=torch.float64, requires_grad=True)
        tv = self.cfg.reg_weight * total_variation(leaf, self.cfg.tv_delta).sum()
        (g_tv,) = torch.autograd.grad(tv, leaf)
        return 0.5 * self.scale * data + tv.item(), float(np.sqrt(data)), lin, r, to_numpy(g_tv)[0]

    def gradient(self, lin: Linearization, r: np.ndarray, g_tv: np.ndarray) -> np.ndarray:
        return self.scale * self.prolong_t(lin.vjp(self.h2 * r[None])[0]) + g_tv

    def tv_hessian(self, theta: np.ndarray):
        """``reg_weight * Hess(TV)`` at ``theta`` as a sparse ``(n_u^2, n_u^2)`` matrix."""
        return self.cfg.reg_weight * total_variation_hessian(theta, self.cfg.tv_delta)

    def hessian_product(self, lin: Linearization, tv_hessian, v: np.ndarray) -> np.ndarray:
        """``H v`` (Gauss-Newton for the misfit, exact for the TV term)."""
        misfit = self.scale * self.prolong_t(lin.vjp(self.h2 * lin.jvp(self.prolong(v)[None]))[0])
        return misfit + (tv_hessian @ v.ravel()).reshape(v.shape)


def _conjugate_gradient(product, b: np.ndarray, max_iter: int, tol: float) -> tuple[np.ndarray, int]:
    """``x`` with ``product(x) ~ b`` (``product`` symmetric positive semi-definite on ``(n, n)`` fields) by
    scipy's conjugate gradients from 0, at most ``max_iter`` iterations, to ``||b - product(x)|| <= tol
    ||b||``; and the number of iterations."""
    shape, used = b.shape, [0]
    op = scipy.sparse.linalg.LinearOperator((b.size, b.size), matvec=lambda v: product(v.reshape(shape)).ravel(),
                                            dtype=np.float64)
    x, _ = scipy.sparse.linalg.cg(op, b.ravel(), rtol=tol, atol=0.0, maxiter=max_iter,
                                  callback=lambda _: used.__setitem__(0, used[0] + 1))
    return x.reshape(shape), used[0]


def _backtrack(alpha: float, value: float, slope: float, trial_value: float) -> float:
    """The next, shorter ``alpha`` after the trial at ``alpha`` failed: the minimizer of the quadratic
    ``q(t)`` with ``q(0) = value``, ``q'(0) = slope / alpha`` and ``q(alpha) = trial_value``, kept within
    ``SHRINK`` times ``alpha`` (halving when the slope gives no descent or the fit has no minimum)."""
    d0 = slope / alpha
    curvature = trial_value - value - d0 * alpha
    if d0 >= 0 or curvature <= 0:
        return SHRINK[1] * alpha
    return float(np.clip(-d0 * alpha * alpha / (2 * curvature), SHRINK[0] * alpha, SHRINK[1] * alpha))


def fit_gauss_newton(obs: np.ndarray, start: torch.Tensor, n_solver: int, cfg: InversionConfig,
                     target: float, trace_record=None) -> tuple[torch.Tensor, dict[str, Any]]:
    """One sample: the unknown ``(1, n_u, n_u)`` from ``start (n_u, n_u)`` for the observation ``obs (m, m)``
    and its info (objective, outer iterations, factorizations as ``solves``, CG products, CPU seconds,
    stop reason, final misfit and its target). ``trace_record(iteration, seconds, misfit, theta)`` is
    called at the start and after every iteration (its own time is left out of the clock)."""
    if cfg.parametrization != "box":
        raise ValueError("optimizer 'gauss-newton' works on the box parametrization; use "
                         f"parametrization='box' or optimizer='lbfgs' (got {cfg.parametrization!r})")
    t0, excluded = time.process_time(), 0.0
    problem = _Problem(obs, start.shape[-1], n_solver, cfg)
    theta = np.clip(to_numpy(start, np.float64), cfg.low, cfg.high)
    value, misfit, lin, r, g_tv = problem.evaluate(theta)
    stop_on_misfit = cfg.stop == "discrepancy"
    iteration, products, message, alpha = 0, 0, "iteration limit reached", 0.5

    def record():
        nonlocal excluded
        if trace_record is not None:
            t = time.process_time()
            trace_record(iteration, t - t0 - excluded, misfit, theta)
            excluded += time.process_time() - t

    record()
    while True:
        if stop_on_misfit and misfit <= target:
            message = "discrepancy reached"
            break
        if iteration >= cfg.max_iter:
            break
        g = problem.gradient(lin, r, g_tv)
        free = ~(((theta <= cfg.low) & (g > 0)) | ((theta >= cfg.high) & (g < 0)))
        tv_hessian = problem.tv_hessian(theta)
        step, used = _conjugate_gradient(lambda v: problem.hessian_product(lin, tv_hessian, v * free) * free,
                                         -g * free, cfg.cg_max_iter, cfg.cg_tol)
        products += used
        alpha, accepted = min(1.0, 2.0 * alpha), False
        for _ in range(MAX_BACKTRACKS):
            trial = np.clip(theta + alpha * step, cfg.low, cfg.high)
            t_value, t_misfit, t_lin, t_r, t_g_tv = problem.evaluate(trial)
            slope = float((g * (trial - theta)).sum())
            if t_value <= value + ARMIJO * slope:
                accepted = True
                break
            alpha = _backtrack(alpha, value, slope, t_value)
        if not accepted:
            message = "line search failed"
            break
        decrease = value - t_value
        theta, value, misfit, lin, r, g_tv = trial, t_value, t_misfit, t_lin, t_r, t_g_tv
        iteration += 1
        record()
        if decrease <= FTOL * max(abs(value), 1.0):
            message = "converged"
            break
    info = {"objective": value, "iterations": iteration, "solves": problem.factorizations,
            "hessian_products": products, "cpu_seconds": time.process_time() - t0 - excluded,
            "message": message, "misfit": misfit, "misfit_target": target}
    return torch.from_numpy(theta[None]), info


__all__ = ["fit_gauss_newton"]
