"""How sure the pde answer is: a low-rank Laplace approximation of the posterior at the answer.

Around the recovered solver-grid coefficient ``a*`` (``n x n`` nodes) the posterior of ``a`` given the
observation is approximated by the Gaussian ``N(a*, G_post)``,

    G_post = (J^T Sigma^-1 J + G_pr^-1)^-1,

- ``J = d(S u)/da`` at ``a*``: ``J v = -S A^-1 (dA/da [v]) u*`` and ``J^T w = -d(lam^T A u*)/da`` with
  ``A lam = S^T w``, one triangular solve pair each with the factorization of ``A(a*)`` (symmetric);
- ``Sigma = diag(sigma_j^2)``, the observation noise at the interior observation nodes, each at least
  ``discrepancy_floor`` times the root mean square of ``u_obs`` (clean data get that much noise);
- ``G_pr = s^2 C^2`` with ``C = (I - l^2 Lap)^-1``, ``Lap`` the 5-point Laplacian with reflecting
  (Neumann) ends, symmetric and diagonal in the orthonormal DCT-II (constants pass unchanged): a Gaussian
  smoothness prior of point-wise scale ~``s``
  (``prior_std``) and correlation length ``l`` (``prior_length``) standing in for the regularizer.

Low rank: the prior-preconditioned misfit Hessian ``H = s^2 C J^T Sigma^-1 J C ~ V diag(lam) V^T``
(randomized eigendecomposition, two passes of ``rank + 10`` products), so ``G_post = s^2 C (I - V D V^T) C``
with ``D = lam / (1 + lam)``, and a posterior sample is ``a* + s C (I - V P V^T) z``, ``z ~ N(0, I)``,
``P = 1 - (1 + lam)^-1/2``. Each sample is clipped to ``[low, high]``, snapped and pooled to the output
grid as the answer is ([`petrov.inverse.pde.output_coefficients`][]), giving

- ``phase_probability (k, k)``: the fraction of samples whose cell exceeds ``(low + high)/2``;
- ``error_interval (2,)``: the central ``interval`` quantiles of the sampled relative errors
  ``||a_hat - a_s|| / ||a_s||`` of the answer ``a_hat`` (what the true error is, if the truth were a
  posterior sample, also kept as ``posterior_interval``), and their median ``error_median``; with
  ``error_scale`` the interval is those factors times the median (calibrated on validation samples).

Random numbers come from ``numpy.random.default_rng([seed, 4, sample number])``: a sample's summary
does not depend on the batch or the process it is computed in.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.fft
import torch

from .config import InversionConfig
from .linearization import Linearization, forward_state
from .pde import output_coefficients

_STREAM = 4  # separates the posterior's random numbers from the data (1, 2) and the noise (3)
OVERSAMPLING = 10


def linearize(a: np.ndarray, obs: np.ndarray, noise_std, cfg: InversionConfig) -> Linearization:
    """The Jacobian's ingredients at ``a (n, n)`` for the observation ``obs (m, m)`` with point-wise noise
    ``noise_std`` (scalar, ``(m, m)`` or None), floored at ``discrepancy_floor * rms(obs)``."""
    m = obs.shape[0]
    floor = cfg.discrepancy_floor * float(np.sqrt(np.mean(obs**2)))
    sigma = np.broadcast_to(np.asarray(0.0 if noise_std is None else noise_std, dtype=np.float64), (m, m))
    sigma = np.maximum(sigma, floor)
    if not (sigma > 0).all():
        raise ValueError("the posterior needs a positive noise level: give noise_std or discrepancy_floor > 0")
    weights = 1.0 / sigma**2
    weights[[0, -1], :] = weights[:, [0, -1]] = 0.0  # u = 0 there whatever a: no information
    return replace(forward_state(a, m, cfg), weights=weights)


class SmoothingPrior:
    """``C = (I - l^2 Lap)^-1`` on the ``n x n`` node grid (spacing ``1/(n - 1)``) through the orthonormal
    DCT-II, which diagonalizes the 3-point second difference with reflecting ends on each axis
    (eigenvalues ``2 - 2 cos(pi k / n)``): symmetric positive definite, constants unchanged."""

    def __init__(self, n: int, length: float):
        k = np.arange(n)
        lap = (2.0 - 2.0 * np.cos(np.pi * k / n)) * (n - 1) ** 2  # eigenvalues of -Lap per axis
        self.scale = 1.0 / (1.0 + length**2 * (lap[:, None] + lap[None, :]))

    def __call__(self, v: np.ndarray) -> np.ndarray:
        """``C v`` for fields ``v (..., n, n)``."""
        spectrum = scipy.fft.dctn(v, type=2, norm="ortho", axes=(-2, -1)) * self.scale
        return scipy.fft.idctn(spectrum, type=2, norm="ortho", axes=(-2, -1))


def low_rank_hessian(lin: Linearization, prior: SmoothingPrior, prior_std: float, rank: int,
                     rng: np.random.Generator, block: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues ``(r,)`` (descending) and eigenvectors ``(r, n*n)`` of the prior-preconditioned misfit
    Hessian ``s^2 C J^T Sigma^-1 J C`` by the two-pass randomized eigendecomposition (Halko et al. 2011)."""
    n = lin.n

    def hessian(x: np.ndarray) -> np.ndarray:  # (k, n*n) -> (k, n*n)
        out = []
        for lo in range(0, len(x), block):
            v = prior(x[lo:lo + block].reshape(-1, n, n))
            out.append(prior(lin.vjp(lin.weights * lin.jvp(v))).reshape(len(v), -1))
        return prior_std**2 * np.concatenate(out)

    k = min(rank + OVERSAMPLING, n * n)
    q, _ = np.linalg.qr(hessian(rng.standard_normal((k, n * n))).T)  # (n*n, k) basis of the range
    b = q.T @ hessian(q.T).T
    lam, u = np.linalg.eigh(0.5 * (b + b.T))
    order = np.argsort(lam)[::-1][:rank]
    return np.maximum(lam[order], 0.0), (q @ u[:, order]).T


def posterior_map(z: np.ndarray, lam: np.ndarray, vecs: np.ndarray, prior: SmoothingPrior,
                  prior_std: float) -> np.ndarray:
    """``s C (I - V P V^T) z`` for ``z (k, n*n)``: ``(k, n, n)`` deviations from the answer; with ``z ~ N(0, I)``
    their covariance is ``s^2 C (I - V D V^T) C``, the posterior's (``P = 1 - (1 + lam)^-1/2``)."""
    n = int(round(z.shape[1] ** 0.5))
    shrink = 1.0 - 1.0 / np.sqrt(1.0 + lam)
    w = z - ((z @ vecs.T) * shrink) @ vecs
    return prior_std * prior(w.reshape(len(z), n, n))


def posterior_samples(a: np.ndarray, lam: np.ndarray, vecs: np.ndarray, prior: SmoothingPrior, prior_std: float,
                      count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` samples ``(count, n, n)`` of ``N(a, s^2 C (I - V D V^T) C)``."""
    return a + posterior_map(rng.standard_normal((count, a.size)), lam, vecs, prior, prior_std)


def summarize(answer: np.ndarray, samples: np.ndarray, cfg: InversionConfig) -> dict[str, np.ndarray]:
    """Phase probability ``(k, k)``, error interval ``(2,)`` and median error of the answer ``(k, k)`` from
    output-grid samples ``(S, k, k)`` (see the module docstring)."""
    p = np.mean(samples > cfg.threshold, axis=0)
    errors = np.linalg.norm((samples - answer).reshape(len(samples), -1), axis=1) / \
        np.linalg.norm(samples.reshape(len(samples), -1), axis=1)
    tail = 0.5 * (1.0 - cfg.interval)
    posterior = np.quantile(errors, [tail, 1.0 - tail])
    med = float(np.median(errors))
    interval = posterior if cfg.error_scale is None else np.asarray(cfg.error_scale, dtype=np.float64) * med
    return {"phase_probability": p, "error_interval": interval, "error_median": med, "posterior_interval": posterior}


def laplace_uncertainty(a: np.ndarray, obs: np.ndarray, noise_std, cfg: InversionConfig, sample_id: int,
                        seed: int = 0) -> dict[str, np.ndarray]:
    """The summary of [`summarize`][] for the pde answer whose solver-grid coefficient is ``a (n, n)``
    (observation ``obs (m, m)`` on the misfit grid, noise ``noise_std``), file sample ``sample_id``."""
    rng = np.random.default_rng([int(seed), _STREAM, int(sample_id)])
    lin = linearize(a, obs, noise_std, cfg)
    prior = SmoothingPrior(lin.n, cfg.prior_length)
    lam, vecs = low_rank_hessian(lin, prior, cfg.prior_std, cfg.posterior_rank, rng)
    fields = posterior_samples(a, lam, vecs, prior, cfg.prior_std, cfg.posterior_samples, rng)
    fields = np.clip(fields, cfg.low, cfg.high)
    answer = output_coefficients(torch.from_numpy(a[None]), lin.n, cfg)[0]
    pooled = output_coefficients(torch.from_numpy(fields), lin.n, cfg)
    return {**summarize(answer, pooled, cfg), "eigenvalues": lam}
