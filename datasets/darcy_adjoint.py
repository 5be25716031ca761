"""Residual and adjoint gradient of the finite-difference Darcy solve (``petrov.datasets.darcy``).

The 5-point matrix is a sum over the grid's faces e = (p, q) of rank-one terms,

    A(a) = (1/h^2) sum_e a_e (e_p - e_q)(e_p - e_q)^T,      a_e = mean(a_p, a_q)

(boundary nodes carry u = 0 and are dropped from the vectors), so for node fields u, lam that vanish on
the boundary

    lam^T A(a) u = (1/h^2) sum_e a_e (lam_p - lam_q)(u_p - u_q)

and its derivative with respect to the node coefficient a_k collects, over the faces touching k,
``(1/h^2) (lam_p - lam_q)(u_p - u_q) * d a_e / d a_k`` with

    arithmetic  a_e = (a_p + a_q)/2:          d a_e/d a_p = 1/2
    harmonic    a_e = 2 a_p a_q/(a_p + a_q):  d a_e/d a_p = 2 a_q^2/(a_p + a_q)^2

Data misfit ``J(a) = 1/2 ||S u(a) - u_obs||_h^2`` (``||v||_h^2 = h_obs^2 sum v^2`` over the observation
nodes, S the strided sampling from the solver grid to the observation grid). With A(a) u = f,
dJ/da = lam^T (dA/da) u where A lam = -dJ/du (A is symmetric, so the adjoint reuses the forward
factorization): one factorization and two triangular solves per gradient.

The same face sums give the derivative of the matrix in a direction v, ``(dA/da [v]) u`` (node ``p``
collects ``(1/h^2) (d a_e/d a . v)(u_p - u_q)`` over its faces): the right-hand side of the linearized
solve ``A du = -(dA/da [v]) u`` (the Jacobian of u(a) applied to v, used by the Laplace approximation).
"""
from __future__ import annotations

import numpy as np

from ..common.registry import Registry
from .darcy import AVERAGING, darcy_matrix, factorize

FACE_DERIVATIVES: Registry = Registry("face averaging derivative")
# the faces along each axis as index pairs (lo, hi): node lo and its neighbour hi
FACES = (((slice(None, -1), slice(None)), (slice(1, None), slice(None))),
         ((slice(None), slice(None, -1)), (slice(None), slice(1, None))))


@FACE_DERIVATIVES.register("arithmetic")
def _d_arithmetic(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = np.full(np.broadcast_shapes(left.shape, right.shape), 0.5)
    return half, half


@FACE_DERIVATIVES.register("harmonic")
def _d_harmonic(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s2 = (left + right) ** 2
    return 2.0 * right**2 / s2, 2.0 * left**2 / s2


def _check_field(name: str, z: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] != z.shape[1] or z.shape[0] < 3:
        raise ValueError(f"{name} must be one (n, n) node-grid field with n >= 3, got shape {z.shape}")
    if shape is not None and z.shape != shape:
        raise ValueError(f"{name} has shape {z.shape}, expected {shape}")
    if not np.isfinite(z).all():
        raise ValueError(f"{name} contains NaN or inf values")
    return z


def _check_fields(name: str, z, shape: tuple[int, int]) -> np.ndarray:
    """Node fields ``(..., n, n)`` on the grid ``shape`` (any leading batch axes), finite."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim < 2 or z.shape[-2:] != shape:
        raise ValueError(f"{name} must end with the grid {shape}, got shape {z.shape}")
    if not np.isfinite(z).all():
        raise ValueError(f"{name} contains NaN or inf values")
    return z


def _interior_rhs(f, n: int) -> np.ndarray:
    f = np.asarray(f, dtype=np.float64)
    f = np.broadcast_to(f, (n, n)) if f.ndim == 0 else _check_field("f", f, (n, n))
    return np.ascontiguousarray(f[1:-1, 1:-1]).ravel()


def _full(interior: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, n))
    out[1:-1, 1:-1] = interior.reshape(n - 2, n - 2)
    return out


def darcy_residual(a, u, f=1.0, averaging: str = "arithmetic") -> np.ndarray:
    """``f - A(a) u`` on the interior nodes, 0 on the boundary: (n, n) for one (n, n) coefficient and solution."""
    a = _check_field("a", a)
    u = _check_field("u", u, a.shape)
    n = a.shape[0]
    interior = _interior_rhs(f, n) - darcy_matrix(a, averaging) @ u[1:-1, 1:-1].ravel()
    return _full(interior, n)


def coefficient_gradient(a, u, lam, averaging: str = "arithmetic") -> np.ndarray:
    """``d (lam^T A(a) u) / d a`` at every node, (n, n), for node fields u, lam that are 0 on the boundary;
    ``lam`` may carry leading batch axes ``(..., n, n)`` (one gradient per field)."""
    a = _check_field("a", a)
    u, lam = _check_field("u", u, a.shape), _check_fields("lam", lam, a.shape)
    inv_h2 = float(a.shape[0] - 1) ** 2
    grad = np.zeros(lam.shape)
    for lo, hi in FACES:
        face = inv_h2 * (u[hi] - u[lo]) * (lam[(..., *hi)] - lam[(..., *lo)])  # d(lam^T A u)/d a_e per face
        d_lo, d_hi = FACE_DERIVATIVES.get(averaging)(a[lo], a[hi])
        grad[(..., *lo)] += face * d_lo
        grad[(..., *hi)] += face * d_hi
    return grad


def coefficient_derivative(a, v, u, averaging: str = "arithmetic") -> np.ndarray:
    """``(dA/da [v]) u`` as node fields ``(..., n, n)`` (0 on the boundary) for directions ``v (..., n, n)``
    (any leading batch axes), the coefficient ``a (n, n)`` and a solution ``u (n, n)`` that is 0 on the
    boundary."""
    a = _check_field("a", a)
    u, v = _check_field("u", u, a.shape), _check_fields("directions v", v, a.shape)
    out = np.zeros(v.shape)
    for lo, hi in FACES:
        d_lo, d_hi = FACE_DERIVATIVES.get(averaging)(a[lo], a[hi])
        flux = float(a.shape[0] - 1) ** 2 * (d_lo * v[(..., *lo)] + d_hi * v[(..., *hi)]) * (u[lo] - u[hi])
        out[(..., *lo)] += flux  # node lo: a_e (u_lo - u_hi); node hi: its negative
        out[(..., *hi)] -= flux
    out[..., [0, -1], :] = 0.0
    out[..., :, [0, -1]] = 0.0
    return out


def observation_stride(n_solver: int, n_obs: int) -> int:
    """Stride of the sampling S from an ``n_solver`` node grid to an ``n_obs`` one (same domain)."""
    if n_obs < 2 or n_obs > n_solver or (n_solver - 1) % (n_obs - 1):
        raise ValueError(
            f"the observation grid ({n_obs} nodes per side) must be a strided sub-grid of the solver grid "
            f"({n_solver}): n_obs - 1 must divide {n_solver - 1}"
        )
    return (n_solver - 1) // (n_obs - 1)


def misfit_and_gradient(a, u_obs, f=1.0, averaging: str = "arithmetic") -> tuple[float, np.ndarray, np.ndarray]:
    """``J = 1/2 ||S u(a) - u_obs||_h^2``, ``dJ/da`` (n, n) by one adjoint solve, and the solution u(a) (n, n).

    ``a``: (n, n) positive coefficient on the solver grid; ``u_obs``: (m, m) observation on a strided
    sub-grid (``m - 1`` divides ``n - 1``); ``h = 1/(m - 1)``. One SuperLU factorization serves both solves.
    """
    a = _check_field("a", a)
    if (a <= 0).any():
        raise ValueError(f"a must be positive everywhere (elliptic problem); minimum is {a.min()}")
    AVERAGING.get(averaging)
    u_obs = _check_field("u_obs", u_obs)
    n, m = a.shape[0], u_obs.shape[0]
    s = observation_stride(n, m)
    lu = factorize(darcy_matrix(a, averaging))
    u = _full(lu.solve(_interior_rhs(f, n)), n)
    r = u[::s, ::s] - u_obs
    h2 = 1.0 / (m - 1) ** 2
    dj_du = np.zeros_like(a)
    dj_du[::s, ::s] = h2 * r  # S^T applied to the weighted residual
    lam = _full(lu.solve(-dj_du[1:-1, 1:-1].ravel()), n)  # A lam = -dJ/du (A symmetric)
    return 0.5 * h2 * float((r * r).sum()), coefficient_gradient(a, u, lam, averaging), u
