"""Relative L² and H¹ losses against hand-computed values (float64)."""
import math

import pytest
import torch

from petrov.train.losses import (
    h1_seminorm,
    relative_h1_per_sample,
    relative_l2,
    relative_l2_per_sample,
    training_loss_per_sample,
)


def periodic_grid(n):
    return torch.arange(n, dtype=torch.float64) / n


def as_batch(*fields):
    """1-D fields (n,) -> (b, n, 1)."""
    return torch.stack(fields)[..., None]


def test_relative_l2_of_orthogonal_perturbations():
    # sin and cos of the same frequency are discretely orthogonal with equal norms on n >= 3 points
    s = periodic_grid(16)
    sin, cos = torch.sin(2 * math.pi * s), torch.cos(2 * math.pi * s)
    target = as_batch(sin, sin)
    pred = as_batch(sin + 0.5 * cos, 2 * sin)
    per_sample = relative_l2_per_sample(pred, target)
    torch.testing.assert_close(per_sample, torch.tensor([0.5, 1.0], dtype=per_sample.dtype))
    assert relative_l2(pred, target).item() == pytest.approx(0.75, rel=1e-6)


def test_relative_l2_sums_over_channels():
    y = torch.zeros(1, 4, 2, dtype=torch.float64)
    y[0, :, 0] = 1.0  # ‖y‖ = 2
    pred = y.clone()
    pred[0, :, 1] = 1.0  # error in the other channel, ‖e‖ = 2
    assert relative_l2_per_sample(pred, y).item() == pytest.approx(1.0)


def plain_periodic_derivative(u, h):
    """Central difference written out point by point, as a reference."""
    n = len(u)
    return torch.tensor([(u[(j + 1) % n] - u[(j - 1) % n]) / (2 * h) for j in range(n)], dtype=u.dtype)


def test_h1_seminorm_matches_a_plain_loop_and_the_exact_value():
    k = 3
    exact = 2 * math.pi * k / math.sqrt(2)  # ‖d/dx sin(2πkx)‖_L2(0,1)
    values = []
    for n in (64, 256):
        s = periodic_grid(n)
        u = torch.sin(2 * math.pi * k * s)
        du = plain_periodic_derivative(u, 1.0 / n)
        reference = math.sqrt((du**2).sum().item() / n)
        value = h1_seminorm(as_batch(u), periodic=True).item()
        assert value == pytest.approx(reference, rel=1e-12)
        values.append(value)
    # second order: (2πkh)²/6 relative error
    assert values[0] == pytest.approx(exact, rel=2e-2)
    assert values[1] == pytest.approx(exact, rel=1e-3)


def node_field(n, f):
    s = torch.linspace(0, 1, n, dtype=torch.float64)
    X, Y = torch.meshgrid(s, s, indexing="ij")
    return f(X, Y)[None, ..., None]


def test_h1_seminorm_dirichlet_node_grid():
    # u = sin(πx) sin(πy) vanishes on the boundary; ‖∇u‖² = π²/2
    exact = math.pi / math.sqrt(2)
    f = lambda X, Y: torch.sin(math.pi * X) * torch.sin(math.pi * Y)  # noqa: E731
    coarse = h1_seminorm(node_field(65, f), periodic=False).item()
    fine = h1_seminorm(node_field(129, f), periodic=False).item()
    assert coarse == pytest.approx(exact, rel=1e-2)
    assert fine == pytest.approx(exact, rel=5e-3)
    assert abs(fine - exact) < abs(coarse - exact)  # converges as h -> 0


def test_relative_h1_is_resolution_independent():
    f = lambda X, Y: torch.sin(math.pi * X) * torch.sin(math.pi * Y)  # noqa: E731
    g = lambda X, Y: torch.sin(2 * math.pi * X) * torch.sin(math.pi * Y) * 0.3  # noqa: E731
    rel = []
    for n in (65, 129):
        y = node_field(n, f)
        rel.append(relative_h1_per_sample(y + node_field(n, g), y, periodic=False).item())
    # exact: ‖∇g‖/‖∇f‖ = 0.3·sqrt((4+1)/2)
    exact = 0.3 * math.sqrt(5 / 2)
    assert rel[0] == pytest.approx(exact, rel=1e-2)
    assert rel[1] == pytest.approx(rel[0], rel=1e-2)


def test_periodic_relative_h1_and_combined_loss():
    s = periodic_grid(128)
    y = torch.sin(2 * math.pi * s)
    pred = y + 0.1 * torch.sin(4 * math.pi * s)  # relL2 = 0.1, relH1 ≈ 0.2 (derivative doubles)
    pred, y = as_batch(pred), as_batch(y)
    l2 = relative_l2_per_sample(pred, y).item()
    h1 = relative_h1_per_sample(pred, y, periodic=True).item()
    assert l2 == pytest.approx(0.1, rel=1e-9)
    assert h1 == pytest.approx(0.2, rel=2e-3)
    loss = training_loss_per_sample(pred, y, h1_weight=0.5, periodic=True).item()
    assert loss == pytest.approx(l2 + 0.5 * h1, rel=1e-12)
    assert training_loss_per_sample(pred, y, h1_weight=0.0).item() == pytest.approx(l2)


def test_bad_shapes_are_errors():
    with pytest.raises(ValueError, match="does not match"):
        relative_l2(torch.zeros(2, 8, 1), torch.zeros(2, 9, 1))
    with pytest.raises(ValueError, match="at least 2 grid points"):
        h1_seminorm(torch.zeros(1, 1, 1), periodic=True)
