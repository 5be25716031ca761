"""Transfers between point sets (mesh nodes) and a latent node grid (petrov.grids.transfer), float64.

Restriction ``(R u)_i = Σ_j φ_i(x_j) w_j u_j / Σ_j φ_i(x_j) w_j`` with the tensor hats φ_i of the latent
grid (0 where the hat meets no node of positive weight), prolongation = bilinear interpolation of the
latent nodal values.  Invariants: equal to the separable grid maps on a node grid with trapezoid
weights; constants reproduced; padding invariance; convergence on nested refinements of a mesh.
"""
from __future__ import annotations

import math

import pytest
import torch

from petrov.grids.layout import channels_first, channels_last, grid_coordinates, grid_to_points
from petrov.grids.transfer import (
    interpolate_field, latent_corners, point_hats, prolong, prolong_points, restrict, restrict_points,
    trapezoid_weights,
)

DT = torch.float64


def as_batch(mesh):
    """``pos (1, n, 2)``, ``weights (1, n)`` of a conftest mesh."""
    return torch.from_numpy(mesh.points)[None], torch.from_numpy(mesh.weights)[None]


def smooth(pos: torch.Tensor) -> torch.Tensor:
    x, y = pos[..., 0], pos[..., 1]
    return torch.stack([torch.sin(math.pi * x) * torch.cos(2 * y) + x * y, torch.exp(x - y)], dim=-1)


def hat(i: int, m: int, t: float) -> float:
    return max(0.0, 1.0 - abs(t * (m - 1) - i))


@pytest.mark.parametrize("n1, n2, m", [(9, 9, 5), (13, 11, 5), (12, 7, 6), (5, 5, 7), (33, 20, 16)])
def test_on_a_node_grid_with_trapezoid_weights_they_are_the_separable_grid_maps(n1, n2, m):
    g = torch.Generator().manual_seed(0)
    u = torch.randn(2, n1, n2, 3, generator=g, dtype=DT)
    pos = grid_to_points(grid_coordinates((n1, n2), dtype=DT)[None]).expand(2, -1, -1)
    w = (trapezoid_weights(n1)[:, None] * trapezoid_weights(n2)[None]).reshape(1, -1).expand(2, -1)
    values, mass = restrict_points(grid_to_points(u), pos, w, (m, m))
    torch.testing.assert_close(values, channels_last(restrict(channels_first(u), (m, m))), rtol=1e-13, atol=1e-14)
    assert bool((mass > 0).all())
    z = torch.randn(2, m, m + 1, 3, generator=g, dtype=DT)
    expected = grid_to_points(channels_last(prolong(channels_first(z), (n1, n2))))
    torch.testing.assert_close(prolong_points(z, pos), expected, rtol=1e-13, atol=1e-14)


def test_restriction_equals_a_plain_loop_on_scattered_points():
    g = torch.Generator().manual_seed(1)
    n, m = 12, 4
    pos = torch.rand(1, n, 2, generator=g, dtype=DT)
    w = torch.rand(1, n, generator=g, dtype=DT)
    u = torch.randn(1, n, 1, generator=g, dtype=DT)
    values, mass = restrict_points(u, pos, w, (m, m))
    for i1 in range(m):
        for i2 in range(m):
            phi = [hat(i1, m, float(pos[0, j, 0])) * hat(i2, m, float(pos[0, j, 1])) for j in range(n)]
            total = sum(phi[j] * float(w[0, j]) for j in range(n))
            assert math.isclose(float(mass[0, i1, i2]), total, rel_tol=1e-13, abs_tol=1e-15)
            expected = sum(phi[j] * float(w[0, j] * u[0, j, 0]) for j in range(n)) / total if total > 0 else 0.0
            assert math.isclose(float(values[0, i1, i2, 0]), expected, rel_tol=1e-12, abs_tol=1e-14)


def test_latent_nodes_outside_the_domain_are_masked_not_divided_by_zero(meshes):
    # L-shape [0,1]² minus (0.6, 1]², latent grid of 5: the hat of the node (1, 1) lies in the notch
    mesh = meshes.grid(10, notch=0.6)
    pos, w = as_batch(mesh)
    u = torch.full((1, pos.shape[1], 2), 3.5, dtype=DT, requires_grad=True)
    values, mass = restrict_points(u, pos, w, (5, 5))
    empty = torch.zeros(1, 5, 5, dtype=torch.bool)
    empty[0, 4, 4] = True
    assert torch.equal(mass == 0, empty)
    assert torch.equal(values[empty], torch.zeros(1, 2, dtype=DT))
    torch.testing.assert_close(values[~empty], torch.full((24, 2), 3.5, dtype=DT), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(mass.sum(), torch.tensor(0.84, dtype=DT))  # the hats sum to 1: Σ mass = |Ω|
    values.sum().backward()
    assert torch.isfinite(u.grad).all()


def test_prolongation_is_exact_for_bilinear_functions_at_any_point():
    g = torch.Generator().manual_seed(2)
    pos = torch.rand(2, 50, 2, generator=g, dtype=DT)
    pos[0, :4] = torch.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.25], [0.5, 1.0]], dtype=DT)  # nodes, edges

    def f(p):
        return (1.5 - 2 * p[..., 0] + 0.5 * p[..., 1] + 3 * p[..., 0] * p[..., 1])[..., None]

    latent = grid_coordinates((5, 7), dtype=DT)[None].expand(2, -1, -1, -1)
    torch.testing.assert_close(prolong_points(f(latent), pos), f(pos), rtol=1e-14, atol=1e-14)
    index, phi = latent_corners(pos, (5, 7))
    assert index.min() >= 0 and index.max() < 35
    torch.testing.assert_close(phi.sum(-1), torch.ones(2, 50, dtype=DT))


def test_one_field_for_the_batch_is_its_prolongation_per_sample():
    # interpolate_field (normalizer statistics) is prolong_points of the field repeated over the batch,
    # points outside [0, 1]² clamped as there
    g = torch.Generator().manual_seed(3)
    z = torch.randn(6, 4, 3, generator=g, dtype=DT)
    pos = torch.rand(3, 40, 2, generator=g, dtype=DT) * 1.2 - 0.1
    out = interpolate_field(z, pos)
    assert out.shape == (3, 40, 3)
    torch.testing.assert_close(out, prolong_points(z[None].expand(3, -1, -1, -1), pos), rtol=1e-14, atol=1e-14)


def test_padding_changes_nothing_and_samples_of_different_sizes_batch(meshes):
    a, b = meshes.grid(10, notch=0.6), meshes.jittered(8, seed=1)
    n = max(len(a.points), len(b.points)) + 5
    pos = 7 * torch.randn(2, n, 2, generator=torch.Generator().manual_seed(3), dtype=DT)  # padding: anything finite
    w = torch.zeros(2, n, dtype=DT)
    u = 1e3 * torch.randn(2, n, 2, generator=torch.Generator().manual_seed(4), dtype=DT)
    alone = []
    for s, mesh in enumerate((a, b)):
        p, ws = as_batch(mesh)
        k = p.shape[1]
        pos[s, :k], w[s, :k], u[s, :k] = p[0], ws[0], smooth(p)[0]
        alone.append(restrict_points(smooth(p), p, ws, (6, 6)))
    values, mass = restrict_points(u, pos, w, (6, 6))
    for s, (v, ms) in enumerate(alone):
        torch.testing.assert_close(values[s], v[0], rtol=1e-13, atol=1e-14)
        torch.testing.assert_close(mass[s], ms[0], rtol=1e-13, atol=1e-15)
    z = torch.randn(2, 6, 6, 2, generator=torch.Generator().manual_seed(5), dtype=DT)
    assert torch.isfinite(prolong_points(z, pos)).all()


def test_the_cpu_sparse_products_equal_the_gathers_and_scatters_with_their_gradients(meshes):
    # the CPU's form (P and Pᵀ as CSR matrices) against the accelerators' (rows gathered and scattered)
    a, b = meshes.grid(10, notch=0.6), meshes.jittered(7, seed=2)
    n = max(len(a.points), len(b.points)) + 3
    g = torch.Generator().manual_seed(6)
    pos, w = torch.rand(2, n, 2, generator=g, dtype=DT), torch.zeros(2, n, dtype=DT)
    for s, mesh in enumerate((a, b)):
        p, ws = as_batch(mesh)
        pos[s, :p.shape[1]], w[s, :p.shape[1]] = p[0], ws[0]
    sparse = point_hats(pos, (5, 6))
    assert sparse.interpolate is not None and sparse.gather is not None
    plain = sparse._replace(interpolate=None, gather=None)
    u = torch.randn(2, n, 3, generator=g, dtype=DT)
    z = torch.randn(2, 5, 6, 3, generator=g, dtype=DT)

    def both(hats):
        uu, zz = u.clone().requires_grad_(), z.clone().requires_grad_()
        values, mass = restrict_points(uu, pos, w, (5, 6), hats)
        h = prolong_points(zz, pos, hats)
        (values.square().sum() + (h * u).sum()).backward()
        return values, mass, h, uu.grad, zz.grad

    for got, expected in zip(both(sparse), both(plain)):
        torch.testing.assert_close(got, expected, rtol=1e-13, atol=1e-14)
    assert point_hats(pos.clone().requires_grad_(), (5, 6)).gather is None  # a gradient for pos: no CSR


def test_restriction_of_a_smooth_field_converges_on_nested_refinements(meshes):
    # the L-shape at h = 1/10 ... 1/80, latent spacing 1/5: the hats' kinks lie on mesh lines, so the
    # vertex (lumped-mass) quadrature is second order from the start; latent nodes cut by the notch
    # (their hats partly outside Ω) converge like the others
    m = 6
    results = []
    for k in (10, 20, 40, 80):
        pos, w = as_batch(meshes.grid(k, notch=0.6))
        results.append(restrict_points(smooth(pos), pos, w, (m, m)))
    masks = [mass > 0 for _, mass in results]
    assert all(torch.equal(mk, masks[-1]) for mk in masks)
    assert int((~masks[-1]).sum()) == 4  # the four latent nodes whose hats lie in the notch
    diffs = [float((b[0] - a[0]).abs().max()) for a, b in zip(results, results[1:])]
    ratios = [d0 / d1 for d0, d1 in zip(diffs, diffs[1:])]
    assert diffs[-1] < 5e-3 and min(ratios) > 3.0, (diffs, ratios)  # second order: 4 per halving
    # an independent (jittered Delaunay) mesh of similar size agrees with the finest nested one
    # within the last nested difference
    pos, w = as_batch(meshes.jittered(70, notch=0.6))
    values, mass = restrict_points(smooth(pos), pos, w, (m, m))
    assert torch.equal(mass > 0, masks[-1])
    assert float((values - results[-1][0]).abs().max()) < diffs[-1]
