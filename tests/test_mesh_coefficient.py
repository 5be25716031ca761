"""The Darcy coefficient as a truncated GRF series: the grid data's draws, the same function on every mesh."""
import numpy as np
import pytest

from petrov.datasets import neumann_grf_2d
from petrov.datasets.grf import neumann_grf_std
from petrov.datasets.mesh import DarcyMeshParams, darcy_mesh_sample, evaluate_series, neglected_variance
from petrov.datasets.mesh import series_coefficients
from petrov.datasets.mesh.coefficient import cosine_table


def test_series_with_n_modes_on_the_node_grid_is_the_grid_field():
    # "a uniform grid is one mesh among others": K = n modes evaluated at x_i = i/(n-1) give neumann_grf_2d
    for n in (9, 33):
        x = np.linspace(0.0, 1.0, n)
        points = np.stack(np.meshgrid(x, x, indexing="ij"), axis=-1).reshape(-1, 2)
        for index in (0, 5):
            grid = neumann_grf_2d(n, 4, [index])[0]
            series = evaluate_series(series_coefficients(4, index, n), points).reshape(n, n)
            np.testing.assert_allclose(series, grid, rtol=0, atol=1e-12 * np.abs(grid).max())


def test_series_equals_a_plain_double_sum():
    c = series_coefficients(1, 2, 6)
    p = np.random.default_rng(0).random((20, 2))
    plain = [sum(c[k1, k2] * np.cos(np.pi * k1 * x) * np.cos(np.pi * k2 * y) for k1 in range(6) for k2 in range(6))
             for x, y in p]
    np.testing.assert_allclose(evaluate_series(c, p), plain, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cosine_table(p[:, 0], 40), np.cos(np.pi * np.outer(p[:, 0], np.arange(40))), atol=1e-12)


def test_neglected_variance_of_the_truncation():
    fractions = [neglected_variance(k) for k in (16, 32, 64, 128)]
    assert all(b < a for a, b in zip(fractions, fractions[1:]))
    assert neglected_variance(64) == pytest.approx(1.74e-4, rel=0.02)
    # plainly: the mean variance of psi is sum_k s_k^2 / N_k^2 (the mean of N_k^2 cos^2 cos^2 is 1)
    k = np.arange(256)
    norm = np.where(k > 0, 2.0, 1.0)
    var = neumann_grf_std(256) ** 2 / np.outer(norm, norm)
    assert neglected_variance(16, reference=256) == pytest.approx(1 - var[:16, :16].sum() / var.sum(), rel=1e-12)


def test_coefficient_is_one_function_on_every_mesh():
    p = DarcyMeshParams(h=0.08, refinements=1, modes=32)
    _, samples = darcy_mesh_sample(p, seed=2, index=3)
    coarse, fine, remesh = samples["level0"], samples["level1"], samples["remesh"]
    # the nested level's first nodes are the coarse nodes: same a there
    np.testing.assert_array_equal(fine.x[: coarse.n_nodes], coarse.x)
    # and every mesh's a is the thresholded series at its nodes
    c = series_coefficients(2, 3, 32)
    for s in (coarse, fine, remesh):
        expected = np.where(evaluate_series(c, s.points) >= 0, 12.0, 3.0)
        np.testing.assert_array_equal(s.x[:, 0], expected)
    assert set(np.unique(remesh.x)) == {3.0, 12.0}
