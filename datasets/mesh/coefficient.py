"""The Darcy coefficient at arbitrary points: the Neumann GRF of ``grf.neumann_grf_2d`` as a truncated series.

    psi(x, y) = sum_{0 <= k1, k2 < K, k != 0} s_k zeta_k cos(pi k1 x) cos(pi k2 y),
    s_k = N_k tau^(alpha-1) (pi^2 (k1^2 + k2^2) + tau^2)^(-alpha/2)   (``grf.neumann_grf_std(K)``),

``s_k zeta_k`` from ``grf.neumann_grf_coefficients(K, seed, [index])``, the draws of the grid data: on the
node grid ``x_i = i/(n-1)`` the series with ``K = n`` is exactly what ``neumann_grf_2d(n, seed, [index])``
synthesises by a DCT-I, so a uniform grid is one mesh among others for the data too (up to round-off).
The coefficient is ``a = high`` where ``psi >= 0``, ``low`` elsewhere (``grf.darcy_coefficient``).

Truncation: the modes left out carry the fraction [`neglected_variance`][] of psi's variance
(averaged over the square). With the defaults (alpha = 2, tau = 3) that is 7.1e-4 at K = 32, 1.7e-4 at
K = 64, 4.3e-5 at K = 128 (an rms error of 1.3% of psi's standard deviation at K = 64). A mesh of spacing
h cannot represent cos(pi k x) beyond k = 1/h either, so K = 64 suits meshes down to h ~ 1/64.
"""
from __future__ import annotations

import numpy as np

from ..grf import neumann_grf_coefficients, neumann_grf_std


def series_coefficients(seed: int, index: int, modes: int, *, alpha: float = 2.0, tau: float = 3.0) -> np.ndarray:
    """(K, K) coefficients ``s_k zeta_k`` of sample ``index`` (axis 0: the x mode k1, axis 1: k2)."""
    return neumann_grf_coefficients(modes, seed, [index], alpha=alpha, tau=tau)[0]


def cosine_table(x: np.ndarray, modes: int) -> np.ndarray:
    """(n, K) values cos(pi k x), k = 0..K-1, by the Chebyshev recurrence cos((k+1)t) = 2 cos(t) cos(kt) - cos((k-1)t)
    (one np.cos per point instead of K; the recurrence's round-off stays near K^2 eps)."""
    table = np.empty((modes, len(x)))
    table[0] = 1.0
    if modes > 1:
        table[1] = np.cos(np.pi * x)
    for k in range(2, modes):
        np.multiply(2.0 * table[1], table[k - 1], out=table[k])
        table[k] -= table[k - 2]
    return table.T


def evaluate_series(coefficients: np.ndarray, points: np.ndarray, block: int = 8192) -> np.ndarray:
    """(n,) values of ``sum_k C[k1, k2] cos(pi k1 x) cos(pi k2 y)`` at ``points`` (n, 2), in blocks of points."""
    points = np.asarray(points, dtype=np.float64)
    modes = coefficients.shape[0]
    out = np.empty(len(points))
    for lo in range(0, len(points), block):
        p = points[lo : lo + block]
        out[lo : lo + block] = ((cosine_table(p[:, 0], modes) @ coefficients) * cosine_table(p[:, 1], modes)).sum(axis=1)
    return out


def neglected_variance(modes: int, *, alpha: float = 2.0, tau: float = 3.0, reference: int = 2048) -> float:
    """Fraction of psi's mean variance in the modes with k1 or k2 >= ``modes`` (the full sum taken to
    ``reference`` modes per axis, whose own tail is below 1e-7 for the defaults)."""
    k = np.arange(reference)
    norm = np.where(k > 0, 2.0, 1.0)  # N_k^2 per axis: the mean of N_k^2 cos^2 cos^2 over the square is 1
    var = neumann_grf_std(reference, alpha=alpha, tau=tau) ** 2 / (norm[:, None] * norm[None, :])
    return float(1.0 - var[:modes, :modes].sum() / var.sum())


__all__ = ["cosine_table", "evaluate_series", "neglected_variance", "series_coefficients"]
