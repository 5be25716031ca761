"""P1 Darcy solver on meshes: theoretical convergence rates on a domain with a hole, agreement with the
finite-difference grid solver on the unit square, lumped weights."""
import numpy as np
import pytest
from skfem import Basis, ElementTriP1, Functional, MeshTri

from petrov.datasets import darcy_coefficient, solve_darcy
from petrov.datasets.mesh import Domain, evaluate_series, lumped_weights, mesh_domain, series_coefficients
from petrov.datasets.mesh.fem import centroids, solve_darcy_fem, to_skfem

LO, HI = 0.375, 0.625  # the square hole [LO, HI]^2


def square(lo, hi, clockwise=False):
    loop = np.array([[lo, lo], [hi, lo], [hi, hi], [lo, hi]])
    return loop[::-1] if clockwise else loop


# u = g(x) g(y), g(t) = sin(pi t)(t - LO)(t - HI): zero on the outer square and on the hole's edges
def g(t):
    return np.sin(np.pi * t) * (t - LO) * (t - HI)


def dg(t):
    return np.pi * np.cos(np.pi * t) * (t - LO) * (t - HI) + np.sin(np.pi * t) * (2 * t - LO - HI)


def d2g(t):
    q, dq = (t - LO) * (t - HI), 2 * t - LO - HI
    return -np.pi**2 * np.sin(np.pi * t) * q + 2 * np.pi * np.cos(np.pi * t) * dq + 2 * np.sin(np.pi * t)


def coefficient(x, y):  # smooth, positive
    return 1.0 + x + y**2


def forcing(x, y):
    """f = -div(a grad u) = -(a lap u + grad a . grad u) for the u and a above."""
    lap = d2g(x) * g(y) + g(x) * d2g(y)
    return -(coefficient(x, y) * lap + 1.0 * dg(x) * g(y) + 2 * y * g(x) * dg(y))


@Functional
def l2_error(w):
    x, y = w.x
    return (w["uh"] - g(x) * g(y)) ** 2


@Functional
def h1_error(w):
    x, y = w.x
    gx, gy = w["uh"].grad
    return (gx - dg(x) * g(y)) ** 2 + (gy - g(x) * dg(y)) ** 2


def test_convergence_rates_on_a_domain_with_a_hole():
    domain = Domain("test", square(0.0, 1.0), (square(LO, HI, clockwise=True),))
    mesh = to_skfem(*mesh_domain(domain, 0.125, np.random.default_rng(0)))
    l2, h1 = [], []
    for _ in range(4):  # h, h/2, h/4, h/8: three observed rates
        c = centroids(mesh)
        u = solve_darcy_fem(mesh, coefficient(c[:, 0], c[:, 1]), forcing, intorder=4)
        basis = Basis(mesh, ElementTriP1(), intorder=4)
        uh = basis.interpolate(u)
        l2.append(np.sqrt(l2_error.assemble(basis, uh=uh)))
        h1.append(np.sqrt(h1_error.assemble(basis, uh=uh)))
        mesh = mesh.refined()
    rate_l2, rate_h1 = np.log2(np.array(l2[:-1]) / l2[1:]), np.log2(np.array(h1[:-1]) / h1[1:])
    assert np.all(np.abs(rate_l2 - 2.0) < 0.15), rate_l2
    assert np.all(np.abs(rate_h1 - 1.0) < 0.1), rate_h1


def test_agrees_with_the_grid_solver_better_as_both_refine():
    coefficients = series_coefficients(3, 0, 16)  # one thresholded GRF for every grid
    differences = []
    for n in (17, 33, 65, 129):
        x = np.linspace(0.0, 1.0, n)
        mesh = MeshTri.init_tensor(x, x)
        a_grid = darcy_coefficient(evaluate_series(coefficients, np.stack(np.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)))
        u_grid = solve_darcy(a_grid.reshape(1, n, n))[0]
        u_mesh = solve_darcy_fem(mesh, darcy_coefficient(evaluate_series(coefficients, centroids(mesh))))
        # the mesh's nodes are the grid's: index (i, j) of the grid is x = x_i, y = x_j
        ij = np.rint(mesh.p.T * (n - 1)).astype(int)
        differences.append(np.abs(u_mesh - u_grid[ij[:, 0], ij[:, 1]]).max() / np.abs(u_grid).max())
    assert all(b < a for a, b in zip(differences, differences[1:])), differences
    assert differences[-1] < differences[0] / 3


def test_dirichlet_nodes_are_skfems_boundary_dofs():
    domain = Domain("test", square(0.0, 1.0), (square(LO, HI, clockwise=True),))
    mesh = to_skfem(*mesh_domain(domain, 0.1, np.random.default_rng(2))).refined()
    c = centroids(mesh)
    u = solve_darcy_fem(mesh, coefficient(c[:, 0], c[:, 1]))
    dofs = Basis(mesh, ElementTriP1()).get_dofs().flatten()
    assert (u[dofs] == 0).all() and (np.delete(u, dofs) > 0).all()  # f = 1 > 0: u > 0 inside


def test_lumped_weights_sum_to_the_area_and_integrate_linear_functions():
    domain = Domain("test", square(0.0, 1.0), (square(LO, HI, clockwise=True),))
    points, triangles = mesh_domain(domain, 0.1, np.random.default_rng(1))
    w = lumped_weights(points, triangles)
    assert w.sum() == pytest.approx(1.0 - (HI - LO) ** 2, rel=1e-12)
    # exact for linear functions: int x over the domain = 1/2 - (HI - LO)^2 (LO + HI)/2
    assert w @ points[:, 0] == pytest.approx(0.5 - (HI - LO) ** 2 * (LO + HI) / 2, rel=1e-12)
