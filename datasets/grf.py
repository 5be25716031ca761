"""Gaussian random fields with the FNO covariances, synthesised by FFT/DCT, seeded per sample.

Seeding: sample ``i`` of a field with seed ``s`` is drawn from its own generator
``np.random.default_rng([s, stream, i])`` (``stream`` separates the 1-D and 2-D families), so a sample is
the same whatever batch, chunk or worker produced it.

1-D periodic (Burgers initial condition), on x_j = j/n, j = 0..n-1:

    u0(x) = sum_{k>=1} s_k (xi_k cos(2 pi k x) + eta_k sin(2 pi k x)),
    s_k = sqrt(2) sigma ((2 pi k)^2 + tau^2)^(-alpha/2),   xi, eta ~ N(0, 1) i.i.d.

i.e. u0 ~ N(0, sigma^2 (-Laplacian + tau^2 I)^(-alpha)) with the orthonormal basis sqrt(2) cos, sqrt(2) sin
(the normalisation of FNO's GRF1.m: the defaults give std sqrt(2)*25*((2 pi k)^2 + 25)^-1 per coefficient).

2-D Neumann (Darcy), on the node grid x_i = i/(n-1), i = 0..n-1, modes k1, k2 = 0..n-1:

    psi(x, y) = sum_{k != 0} c_k phi_k(x, y) zeta_k,    zeta_k ~ N(0, 1) i.i.d.,
    c_k = tau^(alpha-1) (pi^2 (k1^2 + k2^2) + tau^2)^(-alpha/2),
    phi_k = N_k cos(pi k1 x) cos(pi k2 y),  N_k = 2 (k1, k2 > 0), sqrt(2) (one of them 0)

(the L2-orthonormal Neumann eigenfunctions), i.e. psi ~ N(0, tau^(2 alpha - 2) (-Laplacian + tau^2 I)^(-alpha)).
This is the scaling of FNO's data_generation/darcy/GRF.m (``coef = tau^(alpha-1) (...)^(-alpha/2)``,
``L = s*coef*xi``, orthonormal ``idct2``, whose basis on s points equals N_k cos cos). GRF.m evaluates the
series on the cell-centred DCT-II points (i + 1/2)/s; here it is evaluated on the node grid (DCT-I), where the
Darcy solver lives. Only the sign of psi is used for Darcy, so the overall scale does not matter there.

2-D periodic (Navier-Stokes initial vorticity), on x = (i/n, j/n), modes 0 < |k| with |k1|, |k2| < n/2:

    w0(x) = sum_k s_k (xi_k cos(2 pi k.x) + eta_k sin(2 pi k.x))   (k over a half-plane),
    s_k = sqrt(2) sigma (4 pi^2 |k|^2 + tau^2)^(-alpha/2),   xi, eta ~ N(0, 1) i.i.d.

i.e. w0 ~ N(0, sigma^2 (-Laplacian + tau^2 I)^(-alpha)) with zero mean: FNO's GaussianRF (navier_stokes/
random_fields.py), which takes the real part of an inverse FFT of ``size^2 sqrt(2) sigma (4 pi^2 |k|^2 +
tau^2)^(-alpha/2)`` times complex normals, with its default ``sigma = tau^(alpha - d/2)`` = 7^1.5 for
alpha = 2.5, tau = 7 (the paper writes the covariance as ``7^(3/2) (-Laplacian + 49 I)^(-2.5)``; the code's
7^1.5 multiplies the field, not its covariance). The modes at +-n/2, which the grid cannot tell apart, are
left out, so the field is exactly band-limited below the grid's Nyquist frequency.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import scipy.fft

# Stream tags keep the two families' generators distinct for the same (seed, index).
_STREAM_1D = 1
_STREAM_2D = 2
_STREAM_PERIODIC_2D = 3


def _check_indices(seed: int, indices: Iterable[int]) -> np.ndarray:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    idx = np.asarray(list(indices) if not isinstance(indices, np.ndarray) else indices)
    if idx.ndim != 1:
        raise ValueError(f"indices must be a 1-D sequence of sample indices, got shape {idx.shape}")
    if idx.size and (not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0):
        raise ValueError("indices must be non-negative integers (the sample numbers to draw)")
    return idx.astype(np.int64)


def _check_n(n: int, minimum: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"grid size n must be an integer >= {minimum}, got {n!r}")
    return int(n)


def _normals(seed: int, stream: int, index: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng([int(seed), stream, int(index)]).standard_normal(shape)


def periodic_grf_std(n: int, *, alpha: float = 2.0, tau: float = 5.0, sigma: float = 25.0) -> np.ndarray:
    """Std of the cos and sin coefficients of modes k = 1..n//2: sqrt(2) sigma ((2 pi k)^2 + tau^2)^(-alpha/2)."""
    k = np.arange(1, n // 2 + 1, dtype=np.float64)
    return math.sqrt(2.0) * sigma * ((2.0 * np.pi * k) ** 2 + tau**2) ** (-alpha / 2.0)


# the pointwise std of a stored field must keep its samples (up to ~10 std) normal float32 numbers
FIELD_STD_RANGE = (1e-30, 1e30)


def _field_std(std_of, **params: float) -> np.ndarray | None:
    """``std_of(**params)``, or None where it overflows (Python floats raise OverflowError, not inf)."""
    try:
        with np.errstate(all="ignore"):
            return std_of(**params)
    except OverflowError:
        return None


def _named(**params: float) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in params.items())


def _check_pointwise_std(variance, field: str, defaults: str, **params: float) -> None:
    """ValueError naming ``params`` unless ``sqrt(variance(**params))``, a periodic field's pointwise std, is
    finite and within ``FIELD_STD_RANGE`` (a field that overflows, underflows to zero or is lost in float32)."""
    var = _field_std(variance, **params)
    with np.errstate(all="ignore"):
        total = math.sqrt(float(var)) if var is not None and np.isfinite(var) else math.inf
    lo, hi = FIELD_STD_RANGE
    if lo <= total <= hi:
        return
    what = ("overflows" if total > hi else "is zero or too small to store") + f" (pointwise std {total:.3g})"
    fix = "a smaller --sigma or --tau" if total > hi else "a smaller --alpha or --tau, or a larger --sigma"
    raise ValueError(f"the {field}'s random field with {_named(**params)} {what}; use {fix} (defaults {defaults})")


def check_periodic_grf(n: int, *, alpha: float = 2.0, tau: float = 5.0, sigma: float = 25.0) -> None:
    """ValueError naming the parameters unless the 1-D field's pointwise std is finite and within
    ``FIELD_STD_RANGE`` (a field that overflows, underflows to zero or is lost in float32 storage)."""
    _check_pointwise_std(lambda **p: np.sum(periodic_grf_std(n, **p) ** 2), "initial condition",
                         "alpha=2, tau=5, sigma=25", alpha=alpha, tau=tau, sigma=sigma)


def check_neumann_grf(n: int, *, alpha: float = 2.0, tau: float = 3.0) -> None:
    """ValueError naming the parameters unless the 2-D field's coefficients are finite and not all zero
    (only the field's sign is used, so its scale is free).  The std falls with the wavenumber (alpha > 1),
    so the lowest 64 x 64 modes decide: the check costs the same on any grid."""
    std = _field_std(lambda **p: neumann_grf_std(min(n, 64), **p), alpha=alpha, tau=tau)
    if std is not None and np.isfinite(std).all() and std.max() > 0:
        return
    what = "overflow" if std is None or not np.isfinite(std).all() else "are all zero (they underflow)"
    raise ValueError(f"the random field's coefficients with {_named(alpha=alpha, tau=tau)} {what}; use a "
                     f"smaller --alpha or a --tau nearer 1 (defaults alpha=2, tau=3)")


def periodic_grf_1d(
    n: int, seed: int, indices, *, alpha: float = 2.0, tau: float = 5.0, sigma: float = 25.0
) -> np.ndarray:
    """Samples of the 1-D periodic GRF on x_j = j/n: float64 array (len(indices), n).

    Modes k = 1..n//2 are kept; at the Nyquist mode k = n/2 (even n) only the cosine is visible on the grid.
    """
    n = _check_n(n, 2)
    idx = _check_indices(seed, indices)
    check_periodic_grf(n, alpha=alpha, tau=tau, sigma=sigma)
    m = n // 2
    std = periodic_grf_std(n, alpha=alpha, tau=tau, sigma=sigma)
    xi = np.stack([_normals(seed, _STREAM_1D, i, (2, m)) for i in idx]) if idx.size else np.zeros((0, 2, m))
    a = xi[:, 0] * std  # cosine coefficients
    b = xi[:, 1] * std  # sine coefficients
    # a cos + b sin = Re((a - i b) e^{2 pi i k x}); irfft(X)_j = (1/n)(X_0 + 2 sum Re(X_k e^{..}) [+ X_{n/2}(-1)^j])
    spec = np.zeros((idx.size, m + 1), dtype=np.complex128)
    spec[:, 1:] = 0.5 * n * (a - 1j * b)
    if n % 2 == 0:
        spec[:, m] = n * a[:, -1]  # the Nyquist term appears once, real
    return scipy.fft.irfft(spec, n=n, axis=-1)


def neumann_grf_std(n: int, *, alpha: float = 2.0, tau: float = 3.0) -> np.ndarray:
    """(n, n) std of the coefficient of cos(pi k1 x) cos(pi k2 y): N_k tau^(alpha-1) (pi^2|k|^2 + tau^2)^(-alpha/2).

    Entry (0, 0) is 0 (the mean mode is dropped).
    """
    k = np.arange(n, dtype=np.float64)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    c = tau ** (alpha - 1.0) * (np.pi**2 * k2 + tau**2) ** (-alpha / 2.0)
    norm = np.where(k > 0, math.sqrt(2.0), 1.0)
    c = c * norm[:, None] * norm[None, :]
    c[0, 0] = 0.0
    return c


def neumann_grf_coefficients(n: int, seed: int, indices, *, alpha: float = 2.0, tau: float = 3.0) -> np.ndarray:
    """The series coefficients ``s_k zeta_k`` of cos(pi k1 x) cos(pi k2 y), k1, k2 = 0..n-1, of each sample:
    float64 (len(indices), n, n), axis 1 the x mode k1. Evaluated anywhere, these are the samples of
    [`neumann_grf_2d`][] (on its grid) and of the mesh data (``petrov.datasets.mesh.coefficient``)."""
    n = _check_n(n, 2)
    idx = _check_indices(seed, indices)
    check_neumann_grf(n, alpha=alpha, tau=tau)
    std = neumann_grf_std(n, alpha=alpha, tau=tau)
    out = np.empty((idx.size, n, n))
    for j, i in enumerate(idx):
        out[j] = _normals(seed, _STREAM_2D, i, (n, n)) * std
    return out


def neumann_grf_2d(n: int, seed: int, indices, *, alpha: float = 2.0, tau: float = 3.0) -> np.ndarray:
    """Samples of the 2-D Neumann GRF on the node grid x_i = i/(n-1) of [0,1]^2: float64 (len(indices), n, n).

    Axis 1 is x, axis 2 is y. Synthesised with a DCT-I, which evaluates sum_k C_k cos(pi k i/(n-1)).
    """
    n = _check_n(n, 2)
    idx = _check_indices(seed, indices)
    # Unnormalised DCT-I: y_i = x_0 + (-1)^i x_{n-1} + 2 sum_{k=1}^{n-2} x_k cos(pi k i/(n-1)),
    # so interior coefficients are halved once per axis to get the plain cosine sum (exact: powers of 2).
    half = np.full(n, 0.5)
    half[[0, -1]] = 1.0
    out = neumann_grf_coefficients(n, seed, idx, alpha=alpha, tau=tau)
    out *= half[:, None] * half[None, :]
    if idx.size:
        out = scipy.fft.dctn(out, type=1, axes=(1, 2), overwrite_x=True, workers=-1)
    return out


def darcy_coefficient(psi, high: float = 12.0, low: float = 3.0) -> np.ndarray:
    """Piecewise-constant Darcy coefficient: ``high`` where psi >= 0, ``low`` where psi < 0 (same shape)."""
    psi = np.asarray(psi)
    if np.isnan(psi).any():
        raise ValueError("psi contains NaN; cannot threshold it into a coefficient")
    if not (high > 0 and low > 0):
        raise ValueError(f"coefficient values must be positive, got high={high}, low={low}")
    return np.where(psi >= 0, float(high), float(low))


def periodic_grf_2d_std(n: int, *, alpha: float = 2.5, tau: float = 7.0, sigma: float = 7.0**1.5,
                        modes: int | None = None) -> np.ndarray:
    """(n, n) std of the coefficient of e^(2 pi i k.x), k in FFT order: sqrt(2) sigma (4 pi^2 |k|^2 +
    tau^2)^(-alpha/2) (the std of the cos and of the sin coefficient of the pair +-k), 0 at k = 0 and
    beyond ``|k1|, |k2| <= modes`` (default and at most (n - 1) // 2: below the grid's Nyquist frequency)."""
    k = np.fft.fftfreq(n, 1.0 / n)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    std = math.sqrt(2.0) * sigma * (4.0 * np.pi**2 * k2 + tau**2) ** (-alpha / 2.0)
    inside = np.abs(k) <= min((n - 1) // 2, (n - 1) // 2 if modes is None else modes)
    std = std * (inside[:, None] & inside[None, :])
    std[0, 0] = 0.0
    return std


def check_periodic_grf_2d(n: int, *, alpha: float = 2.5, tau: float = 7.0, sigma: float = 7.0**1.5) -> None:
    """ValueError naming the parameters unless the 2-D periodic field's pointwise std is finite and within
    ``FIELD_STD_RANGE``. The std falls with the wavenumber (alpha > 1), so the lowest 64 x 64 modes
    decide: the check costs the same on any grid."""
    _check_pointwise_std(lambda **p: np.sum(periodic_grf_2d_std(min(n, 64), **p) ** 2) / 2, "initial vorticity",
                         "alpha=2.5, tau=7, sigma=7^1.5", alpha=alpha, tau=tau, sigma=sigma)


def periodic_grf_2d(
    n: int, seed: int, indices, *, alpha: float = 2.5, tau: float = 7.0, sigma: float = 7.0**1.5,
    modes: int | None = None,
) -> np.ndarray:
    """Samples of the 2-D periodic GRF on x = (i/n, j/n): float64 array (len(indices), n, n), axis 1 is x.

    Each sample is the real part of ``sum_k std_k z_k e^(2 pi i k.x)`` with ``std`` from
    [`periodic_grf_2d_std`][] (``modes``: the largest |k1|, |k2| kept) and ``z_k`` standard complex normals
    (real and imaginary parts N(0, 1/2)), drawn on the whole n x n grid of modes whatever ``modes`` (so a
    sample's kept modes are the same for any ``modes``), independent for every k (FNO's construction; the
    real part pairs k with -k).
    """
    n = _check_n(n, 4)
    idx = _check_indices(seed, indices)
    check_periodic_grf_2d(n, alpha=alpha, tau=tau, sigma=sigma)
    std = periodic_grf_2d_std(n, alpha=alpha, tau=tau, sigma=sigma, modes=modes) * (n * n / math.sqrt(2.0))
    out = np.empty((idx.size, n, n))
    for j, i in enumerate(idx):
        xi = _normals(seed, _STREAM_PERIODIC_2D, i, (2, n, n))
        out[j] = scipy.fft.ifft2(std * (xi[0] + 1j * xi[1])).real
    return out
