"""Burgers solver: 4th order in time, agreement with an independent integration, refinement, types, errors."""
import math

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp
from scipy.special import ive

from petrov.datasets.burgers import (
    CFL_CONSTANT, DT_CONSTANT, DT_MAX, choose_internal_grid, choose_time_step, etdrk4_coefficients, solve_burgers,
)
from petrov.datasets.grf import periodic_grf_1d


def rel_l2(a, b):
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


def smooth_initial(n):
    x = np.arange(n) / n
    return (np.sin(2 * np.pi * x) + 0.5 * np.cos(4 * np.pi * x))[None, :]


def test_fourth_order_in_time():
    # Fixed grid, equal steps: errors against a tiny-step reference shrink 16x per halving.
    u0 = smooth_initial(64)
    solve = lambda dt: solve_burgers(u0, 0.1, n_internal=64, dt=dt, start_levels=0)
    ref = solve(5e-4)
    errors = [rel_l2(solve(dt), ref)[0] for dt in (0.005, 0.0025, 0.00125)]
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all((orders > 3.6) & (orders < 4.4)), (errors, orders)


def spectral_burgers_rhs(n, nu):
    """Plain pseudo-spectral semi-discretisation u' = -D1 (u^2/2) + nu D2 u with dense DFT matrices."""
    k = np.fft.fftfreq(n, 1.0 / n)
    k_odd = np.where(np.abs(k) == n // 2, 0.0, k)  # the Nyquist mode has no real derivative
    dft = np.fft.fft(np.eye(n), axis=0)
    d1 = np.real(np.fft.ifft(2j * np.pi * k_odd[:, None] * dft, axis=0))
    d2 = np.real(np.fft.ifft(-((2 * np.pi * k[:, None]) ** 2) * dft, axis=0))
    return lambda t, u: -d1 @ (0.5 * u * u) + nu * (d2 @ u)


def test_matches_independent_integration():
    # Same equation, same (trigonometric interpolant of the) initial data, integrated by DOP853 on a plain
    # non-dealiased 64-point spectral discretisation; the solver refines internally.
    n, nu = 64, 0.1
    u0 = periodic_grf_1d(n, seed=7, indices=[0, 1])
    rhs = spectral_burgers_rhs(n, nu)
    ref = np.stack([solve_ivp(rhs, (0, 1), u, method="DOP853", rtol=1e-10, atol=1e-12).y[:, -1] for u in u0])
    err = rel_l2(solve_burgers(u0, nu), ref)
    assert err.max() < 1e-6, err


def test_small_viscosity_refines_and_converges():
    n, nu = 64, 0.01
    u0 = periodic_grf_1d(n, seed=3, indices=[0, 1])
    auto_grid = choose_internal_grid(n, nu, float(np.abs(u0).max()))
    assert auto_grid > n  # the front is too thin for 64 points: the solver must refine
    auto = solve_burgers(u0, nu)
    refined = solve_burgers(u0, nu, n_internal=2 * auto_grid, dt=1e-3)
    err = rel_l2(auto, refined).max()
    assert err < 1e-6, err


def test_the_time_step_stays_stable_at_small_viscosity():
    # nu = 3e-4: the accuracy rule alone gives dt = 0.0025 (dt max|u0|^2 / nu = 8.3), where the explicit
    # nonlinear term blows up once the front has formed (t ~ 1/(2 pi)); the stability bound halves it
    # down to 3.1e-4 (ratio 1.04)
    n, nu, t = 64, 3e-4, 0.2
    u0 = np.sin(2 * np.pi * np.arange(n) / n)[None, :]
    assert choose_time_step(nu, 1.0) <= CFL_CONSTANT * nu
    u = solve_burgers(u0, nu, t)
    assert np.isfinite(u).all() and abs(u.mean()) < 1e-12  # the mean (0) is conserved
    accuracy_only = DT_MAX / 2 ** math.ceil(math.log2(DT_MAX / (DT_CONSTANT * math.sqrt(nu))))
    with pytest.raises(ValueError, match=r"blew up .* dt=0\.0025 .* at most ~2 nu / max\|u0\|\^2 = 0\.0006"):
        solve_burgers(u0, nu, t, dt=accuracy_only)


def test_the_stability_bound_leaves_the_recipes_step_alone():
    # the FNO recipe (nu = 0.1) keeps the accuracy rule's step for every amplitude its GRF reaches
    for umax in np.linspace(0.1, 3.5, 200):
        accuracy_only = DT_MAX / 2 ** max(0, math.ceil(math.log2(DT_MAX / (DT_CONSTANT * math.sqrt(0.1 / umax**3)))
                                                        - 1e-12))
        assert choose_time_step(0.1, umax) == accuracy_only


def cole_hopf_sine(x, nu, t, kmax=200):
    """Exact solution for u0 = sin(2 pi x): u = -2 nu phi_x / phi with phi solving the heat equation,
    phi0 = exp(cos(2 pi x) / (4 pi nu)) = I_0(r) + 2 sum_k I_k(r) cos(2 pi k x), r = 1/(4 pi nu)
    (modified Bessel functions, exponentially scaled: the common factor cancels)."""
    r = 1 / (4 * np.pi * nu)
    k = np.arange(1, kmax)
    a = 2 * ive(k, r) * np.exp(-nu * (2 * np.pi * k) ** 2 * t)
    phi = ive(0, r) + np.cos(2 * np.pi * np.outer(x, k)) @ a
    phi_x = -(np.sin(2 * np.pi * np.outer(x, k)) * (2 * np.pi * k)) @ a
    return -2 * nu * phi_x / phi


@pytest.mark.parametrize("nu", [0.1, 0.01])
def test_matches_cole_hopf_exact_solution(nu):
    n = 64
    x = np.arange(n) / n
    u0 = np.sin(2 * np.pi * x)[None, :]
    exact = cole_hopf_sine(x, nu, 1.0)
    err = rel_l2(solve_burgers(u0, nu)[0], exact)
    assert err < 1e-6, err
    if nu == 0.01:  # the shock at x = 1/2 is too thin for 64 points: without refinement the error is large
        assert rel_l2(solve_burgers(u0, nu, n_internal=n)[0], exact) > 100 * err


def test_truncating_the_input_spectrum_is_negligible():
    # A fine input grid is solved on a coarser band-limited grid: compare with solving on the full grid.
    n, nu = 2048, 0.1
    u0 = periodic_grf_1d(n, seed=1, indices=[0, 1])
    auto_grid = choose_internal_grid(n, nu, float(np.abs(u0).max()))
    assert auto_grid < n
    err = rel_l2(solve_burgers(u0, nu, dt=0.02), solve_burgers(u0, nu, n_internal=n, dt=0.02)).max()
    assert err < 1e-9, err


def test_fno_recipe_amplitude_ratio():
    # The FNO recipe's output is small: ||u(1)|| / ||u0|| is about 0.017 for the default GRF at nu = 0.1.
    u0 = periodic_grf_1d(1024, seed=0, indices=range(16))
    ratio = np.linalg.norm(solve_burgers(u0), axis=1) / np.linalg.norm(u0, axis=1)
    assert 0.012 < ratio.mean() < 0.022, ratio


def test_sample_independent_of_batch():
    u0 = periodic_grf_1d(256, seed=5, indices=range(6))
    together = solve_burgers(u0, batch_size=4)
    alone = solve_burgers(u0[2:4], batch_size=1)
    np.testing.assert_allclose(alone, together[2:4], rtol=0, atol=1e-13)


def test_conserves_mean():
    # The k = 0 mode is untouched by the flux derivative and the viscosity.
    u0 = periodic_grf_1d(128, seed=2, indices=[0]) + 0.3
    assert abs(solve_burgers(u0).mean() - 0.3) < 1e-12


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,
        lambda a: a.astype(np.float32),
        lambda a: torch.from_numpy(a),
        lambda a: torch.from_numpy(a).float(),
    ],
)
def test_type_shape_dtype_preserved(make):
    u0 = make(periodic_grf_1d(64, seed=0, indices=[0, 1, 2]))
    u1 = solve_burgers(u0, t=0.1)
    assert type(u1) is type(u0) and u1.shape == u0.shape and u1.dtype == u0.dtype
    same = solve_burgers(u0, t=0.0)
    assert type(same) is type(u0) and (np.asarray(same) == np.asarray(u0)).all()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(u0=np.zeros((2, 16)), nu=0.0),
        dict(u0=np.zeros((2, 16)), nu=-0.1),
        dict(u0=np.zeros((2, 16)), t=-1.0),
        dict(u0=np.zeros(16)),
        dict(u0=np.zeros((2, 3, 16))),
        dict(u0=np.full((2, 16), np.nan)),
        dict(u0=np.zeros((2, 16)), n_internal=24),
    ],
)
def test_bad_input_raises(kwargs):
    with pytest.raises(ValueError):
        solve_burgers(**kwargs)


def test_propagators_have_no_subnormals():
    # exp(L dt) for the stiff modes would be subnormal (slow arithmetic on every step): flushed to exact 0.
    wave = 2 * math.pi * torch.arange(400, dtype=torch.float64)
    lin = -0.1 * wave**2
    dt = 720.0 / float(-lin[200])  # puts exp(L dt) of modes near 200 into the subnormal range
    assert ((torch.exp(dt * lin) > 0) & (torch.exp(dt * lin) < torch.finfo(torch.float64).tiny)).any()
    tiny = torch.finfo(torch.float64).tiny
    for c in etdrk4_coefficients(lin, dt):
        assert torch.isfinite(c).all()
        assert not ((c.abs() > 0) & (c.abs() < tiny)).any()
