"""The Gauss-Newton pde inversion (petrov.inverse.newton): its Hessian product against the
finite-difference Jacobian, recovery of a representable coefficient, the bounds, the discrepancy stop,
and bad settings. float64 on 9-17 node grids."""
import numpy as np
import pytest
import torch

from petrov.datasets import solve_darcy
from petrov.inverse import Observations, invert
from petrov.inverse.config import inversion_config
from petrov.inverse.linearization import forward_state
from petrov.inverse.newton import SHRINK, _backtrack, _conjugate_gradient, _Problem
from petrov.inverse.parametrization import prolong, total_variation, total_variation_hessian


def smooth_coarse(n):
    x, y = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    return 7.5 + 3.5 * np.sin(2.5 * x + 0.5) * np.cos(2.0 * y - 0.3)


def misfit_residual(theta, obs, n_solver, n_u):
    """``S u(P theta) - obs`` written plainly: prolong, solve, sample."""
    a = prolong(torch.from_numpy(theta.reshape(1, n_u, n_u)), n_solver)[0].numpy()
    stride = (n_solver - 1) // (obs.shape[0] - 1)
    return solve_darcy(a[None])[0][::stride, ::stride] - obs


def dense_jacobian(theta, obs, n_solver, n_u, eps=1e-6):
    cols = []
    for k in range(theta.size):
        e = np.zeros(theta.size)
        e[k] = eps
        cols.append(((misfit_residual(theta + e, obs, n_solver, n_u) - misfit_residual(theta - e, obs, n_solver, n_u))
                     / (2 * eps)).ravel())
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("n_u", [5, 9])
def test_hessian_product_is_gauss_newton_plus_the_tv_hessian(n_u):
    rng = np.random.default_rng(0)
    n_solver, cfg = 9, inversion_config(grid=5, reg_weight=1e-3)
    obs = solve_darcy(rng.uniform(3, 12, (1, 9, 9)))[0][::2, ::2]
    theta = rng.uniform(4, 11, (n_u, n_u))
    problem = _Problem(obs, n_u, n_solver, cfg)
    _, _, lin, r, g_tv = problem.evaluate(theta)
    jac = dense_jacobian(theta.ravel(), obs, n_solver, n_u)
    tv_hessian = torch.autograd.functional.hessian(
        lambda t: cfg.reg_weight * total_variation(t.reshape(1, n_u, n_u), cfg.tv_delta).sum(),
        torch.from_numpy(theta.ravel())).numpy()
    dense = problem.scale * problem.h2 * jac.T @ jac + tv_hessian
    v = rng.standard_normal((n_u, n_u))
    np.testing.assert_allclose(problem.hessian_product(lin, problem.tv_hessian(theta), v).ravel(), dense @ v.ravel(),
                               rtol=1e-5, atol=1e-8 * np.abs(dense @ v.ravel()).max())
    # and the gradient: s P^T J^T h^2 r + grad TV
    grad_tv = torch.func.grad(lambda t: cfg.reg_weight * total_variation(t.reshape(1, n_u, n_u), cfg.tv_delta).sum())(
        torch.from_numpy(theta.ravel())).numpy()
    np.testing.assert_allclose(problem.gradient(lin, r, g_tv).ravel(),
                               problem.scale * problem.h2 * jac.T @ r.ravel() + grad_tv, rtol=1e-5, atol=1e-10)


@pytest.mark.parametrize("n, delta", [(4, 1.0), (7, 0.3)])
def test_total_variation_hessian_matches_torch_double_backward(n, delta):
    a = np.random.default_rng(n).uniform(3, 12, (n, n))
    reference = torch.autograd.functional.hessian(
        lambda t: total_variation(t.reshape(1, n, n), delta).sum(), torch.from_numpy(a.ravel())).numpy()
    sparse = total_variation_hessian(a, delta)
    assert sparse.shape == (n * n, n * n)
    np.testing.assert_allclose(sparse.toarray(), reference, rtol=1e-12, atol=1e-12 * np.abs(reference).max())


def test_backtracking_minimizes_the_quadratic_within_its_safeguards():
    # J(t) = 1 - t + t^2 (slope -1, minimum at 1/2): a failed trial at alpha = 2 gives J = 3
    assert _backtrack(2.0, 1.0, -2.0, 3.0) == pytest.approx(0.5)
    assert _backtrack(1.0, 1.0, -1.0, 100.0) == pytest.approx(SHRINK[0])  # a far minimum is clipped
    assert _backtrack(1.0, 1.0, -1.0, 1.0 - 0.999) == pytest.approx(SHRINK[1])  # nearly linear: at most halve
    assert _backtrack(1.0, 1.0, 0.5, 2.0) == pytest.approx(SHRINK[1])  # no descent: halve


def test_conjugate_gradient_solves_a_positive_definite_system():
    rng = np.random.default_rng(1)
    m = rng.standard_normal((12, 12))
    mat = m @ m.T + 12 * np.eye(12)
    b = rng.standard_normal(12)
    x, used = _conjugate_gradient(lambda v: mat @ v, b, 50, 1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(mat, b), rtol=1e-8)
    assert used <= 13  # exact arithmetic: at most n steps
    _, used = _conjugate_gradient(lambda v: mat @ v, b, 3, 1e-12)
    assert used == 3


@pytest.mark.filterwarnings("ignore:.*no two-valued cell")  # a smooth truth has no phases
def test_gauss_newton_recovers_a_smooth_coefficient_as_lbfgs_does():
    a_f = prolong(torch.from_numpy(smooth_coarse(5))[None], 17)
    u = solve_darcy(a_f.numpy())
    obs = Observations(u=u, sample_ids=np.array([0]), u_clean=u, a_true=a_f.numpy(), source="test")
    settings = {"grid": 5, "reg_weight": 0.0, "optimizer": "gauss-newton", "max_iter": 30, "cg_max_iter": 50,
                "cg_tol": 1e-6}
    result = invert(obs, "pde", settings=settings)
    assert np.abs(result.a[0] - smooth_coarse(5)).max() / 12 < 1e-3
    assert result.info[0]["iterations"] < 30 and result.info[0]["solves"] < 60  # few factorizations


def test_gauss_newton_stops_at_the_noise_level_within_the_bounds():
    rng = np.random.default_rng(5)
    a = np.where(rng.standard_normal((1, 13, 13)) > 0, 12.0, 3.0)
    u = solve_darcy(a)
    sigma = 1e-3 * np.abs(u).max()
    noisy = u + sigma * rng.standard_normal(u.shape)
    obs = Observations(u=noisy, sample_ids=np.array([0]), a_true=a, source="test",
                       noise_std=np.full((13, 13), sigma))
    result = invert(obs, "pde", settings={"grid": 13, "optimizer": "gauss-newton", "stop": "discrepancy",
                                          "max_iter": 200, "reg_weight": 1e-7}, trace=True)
    info = result.info[0]
    assert result.a.min() >= 3.0 and result.a.max() <= 12.0
    assert info["message"] == "discrepancy reached" and info["misfit"] <= info["misfit_target"]
    trace = info["trace"]
    assert trace["iteration"][0] == 0 and trace["iteration"][-1] == info["iterations"]
    assert np.all(np.diff(trace["cpu_seconds"]) >= 0) and (trace["misfit"][1:] <= trace["misfit"][0]).all()


def test_gauss_newton_settings_are_checked():
    with pytest.raises(ValueError, match="needs parametrization='box'"):
        inversion_config(optimizer="gauss-newton", parametrization="level-set")
    with pytest.raises(ValueError, match="is not one of"):
        inversion_config(optimizer="newton")
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="cg_tol must lie in"):
            inversion_config(cg_tol=bad)
    with pytest.raises(ValueError, match="cg_max_iter must be >= 1"):
        inversion_config(cg_max_iter=0)


def test_forward_state_solves_the_darcy_problem():
    a = np.random.default_rng(2).uniform(3, 12, (9, 9))
    lin = forward_state(a, 5, inversion_config())
    np.testing.assert_allclose(lin.u, solve_darcy(a[None])[0], rtol=1e-12, atol=1e-14)
    assert lin.stride == 2 and lin.weights is None
