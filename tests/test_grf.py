"""Gaussian random fields: spectra match the prescribed covariances, zero mean, per-index reproducibility."""
import numpy as np
import pytest

from petrov.datasets.grf import darcy_coefficient, neumann_grf_2d, periodic_grf_1d

SAMPLES = 2000
Z = 5.0  # tolerance in standard errors


def check_unit_normal(z, axis=0):
    """z: normalised coefficients (samples, modes...): each mode has mean 0 and variance 1 within Z std errors."""
    s = z.shape[axis]
    assert np.all(np.abs(z.mean(axis=axis)) < Z / np.sqrt(s))
    assert np.all(np.abs(z.var(axis=axis) - 1) < Z * np.sqrt(2 / s))
    assert abs(z.var(axis=axis).mean() - 1) < Z * np.sqrt(2 / z.size)  # all modes together: a tight check


def test_periodic_spectrum_matches_fno_covariance():
    n = 32
    u = periodic_grf_1d(n, seed=0, indices=range(SAMPLES))
    x = np.arange(n) / n
    k = np.arange(1, n // 2)
    cos = np.cos(2 * np.pi * np.outer(k, x))
    sin = np.sin(2 * np.pi * np.outer(k, x))
    a = 2 / n * u @ cos.T  # plain discrete projections on cos(2 pi k x), sin(2 pi k x)
    b = 2 / n * u @ sin.T
    nyquist = u @ np.cos(np.pi * np.arange(n)) / n
    # sigma^2 (-Laplacian + tau^2)^-alpha with alpha=2, tau=5, sigma=25 in the basis sqrt(2) cos, sqrt(2) sin
    std = np.sqrt(2) * 25 / ((2 * np.pi * np.arange(1, n // 2 + 1)) ** 2 + 25)
    check_unit_normal(np.concatenate([a / std[:-1], b / std[:-1], nyquist[:, None] / std[-1]], axis=1))
    assert np.all(np.abs(u.mean(axis=0)) < Z * u.std() / np.sqrt(SAMPLES))  # mean 0 point-wise


def test_periodic_parameters_are_used():
    u = periodic_grf_1d(16, seed=0, indices=range(SAMPLES), alpha=1.0, tau=2.0, sigma=3.0)
    a1 = 2 / 16 * u @ np.cos(2 * np.pi * np.arange(16) / 16)
    check_unit_normal(a1 / (np.sqrt(2) * 3.0 * ((2 * np.pi) ** 2 + 4.0) ** -0.5))


def cosine_projection(n):
    """Rows project node values onto cos(pi k x), k = 0..n-1, on x_i = i/(n-1) (trapezoid-weighted DCT-I)."""
    big_n = n - 1
    w = np.ones(n)
    w[[0, -1]] = 0.5
    k = np.arange(n)
    c = np.cos(np.pi * np.outer(k, np.arange(n)) / big_n) * w
    norm = np.full(n, big_n / 2.0)
    norm[[0, -1]] = big_n
    return c / norm[:, None]


@pytest.mark.parametrize("alpha, tau", [(2.0, 3.0), (2.5, 7.0)])
def test_neumann_spectrum_matches_covariance(alpha, tau):
    n = 9
    psi = neumann_grf_2d(n, seed=1, indices=range(SAMPLES), alpha=alpha, tau=tau)
    p = cosine_projection(n)
    coef = np.einsum("ki,sij,lj->skl", p, psi, p)
    k = np.arange(n)
    k1, k2 = np.meshgrid(k, k, indexing="ij")
    # L2-orthonormal Neumann eigenfunctions: 2 cos cos, sqrt(2) cos (one index 0); sqrt-eigenvalue scaled by
    # tau^(alpha-1) as in FNO's GRF.m
    norm = np.where(k1 > 0, np.sqrt(2), 1) * np.where(k2 > 0, np.sqrt(2), 1)
    std = norm * tau ** (alpha - 1) * (np.pi**2 * (k1**2 + k2**2) + tau**2) ** (-alpha / 2)
    assert np.all(coef[:, 0, 0] == pytest.approx(0, abs=1e-12))  # the mean mode is dropped
    z = (coef / np.where(std > 0, std, 1)).reshape(SAMPLES, -1)[:, 1:]
    check_unit_normal(z)
    assert np.all(np.abs(psi.mean(axis=0)) < Z * psi.std() / np.sqrt(SAMPLES))


@pytest.mark.parametrize("sampler, n", [(periodic_grf_1d, 32), (neumann_grf_2d, 8)])
def test_sample_depends_only_on_seed_and_index(sampler, n):
    whole = sampler(n, 11, range(10))
    chunks = np.concatenate([sampler(n, 11, range(0, 3)), sampler(n, 11, range(3, 10))])
    np.testing.assert_array_equal(whole, chunks)
    np.testing.assert_array_equal(sampler(n, 11, [7, 2]), whole[[7, 2]])
    np.testing.assert_array_equal(sampler(n, 11, np.array([4])), whole[[4]])
    assert not np.allclose(sampler(n, 12, range(10)), whole)  # the seed matters
    assert not np.allclose(whole[0], whole[1])
    assert sampler(n, 11, []).shape[0] == 0


def test_one_and_two_dimensional_streams_differ():
    u = periodic_grf_1d(64, 0, [0])
    psi = neumann_grf_2d(8, 0, [0])
    assert not np.allclose(np.sort(np.abs(u.ravel()))[:5], np.sort(np.abs(psi.ravel()))[:5])


def test_darcy_coefficient_thresholds_sign():
    psi = np.array([[-1.0, 0.0], [2.0, -1e-9]])
    np.testing.assert_array_equal(darcy_coefficient(psi), [[3.0, 12.0], [12.0, 3.0]])
    np.testing.assert_array_equal(darcy_coefficient(psi, high=5, low=1), [[1.0, 5.0], [5.0, 1.0]])
    a = darcy_coefficient(neumann_grf_2d(33, 0, range(20)))
    assert 0.3 < (a == 12.0).mean() < 0.7  # a symmetric field: both phases present


@pytest.mark.parametrize(
    "call",
    [
        lambda: periodic_grf_1d(1, 0, [0]),
        lambda: periodic_grf_1d(16, -1, [0]),
        lambda: periodic_grf_1d(16, 0, [-1]),
        lambda: periodic_grf_1d(16, 0, [[0, 1]]),
        lambda: neumann_grf_2d(16, 0, [0.5]),
        lambda: neumann_grf_2d(16, 1.5, [0]),
        lambda: darcy_coefficient(np.array([np.nan])),
        lambda: darcy_coefficient(np.zeros(2), low=0.0),
    ],
)
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
