"""The coefficient's parametrization on a coarse grid, its prolongation to a fine grid, total variation.

Shapes: parameters ``theta (b, n_c, n_c)``, coarse coefficient ``a_c (b, n_c, n_c)`` on the node grid
``x_i = i/(n_c - 1)``, fine coefficient ``(b, n, n)``. float64 for the PDE method, the operator's dtype
for the surrogate; everything is differentiable with torch autograd.

- ``box``: ``a_c = theta`` (the optimizer keeps ``low <= theta <= high``);
- ``level-set``: ``a_c = low + (high - low) sigmoid(theta / tau)``: values in (low, high) and a sharp
  two-valued field as |theta| grows.
- prolongation: bilinear interpolation between node grids (corners on corners), a convex combination,
  so the bounds hold on the fine grid too.
- ``snap_to_phases``: fine values within ``tol`` of ``low`` or ``high`` set to that value (the
  coefficient is two-valued; the values between, at interfaces, stay).
- ``TV_delta(a) = h^2 sum_cells sqrt(|grad a|^2 + delta^2)``, forward differences on the cells
  ``[0, n_c - 2]^2``, ``h = 1/(n_c - 1)``: a quadrature of the smoothed total variation; its Hessian
  as a sparse matrix for Newton-type solvers ([`total_variation_hessian`][]).
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.sparse
import torch

from ..grids import transfer
from .config import InversionConfig

_EDGE = 1e-4  # level-set start values are clipped this far inside (low, high) so the logit is finite


def to_coefficient(theta: torch.Tensor, cfg: InversionConfig) -> torch.Tensor:
    """Coarse coefficient ``a_c`` from the parameters ``theta`` (same shape)."""
    if cfg.parametrization == "box":
        return theta
    return cfg.low + (cfg.high - cfg.low) * torch.sigmoid(theta / cfg.tau)


def from_coefficient(a: torch.Tensor, cfg: InversionConfig) -> torch.Tensor:
    """Parameters giving the coefficient ``a`` (clipped to the bounds): the inverse of [`to_coefficient`][]."""
    a = a.clamp(cfg.low, cfg.high)
    if cfg.parametrization == "box":
        return a.clone()
    s = ((a - cfg.low) / (cfg.high - cfg.low)).clamp(_EDGE, 1 - _EDGE)
    return cfg.tau * torch.logit(s)


def prolong(a: torch.Tensor, n: int) -> torch.Tensor:
    """A coefficient ``(b, m, m)`` on the node grid of ``[0, 1]²`` interpolated to ``(b, n, n)``
    ([`petrov.grids.transfer.prolong`][], per sample without a channel axis)."""
    return transfer.prolong(a.unsqueeze(1), (n, n)).squeeze(1)


def total_variation(a: torch.Tensor, delta: float) -> torch.Tensor:
    """Smoothed total variation ``(b,)`` of node fields ``a (b, n, n)`` on [0, 1]^2."""
    n = a.shape[-1]
    h = 1.0 / (n - 1)
    dx = (a[:, 1:, :-1] - a[:, :-1, :-1]) / h
    dy = (a[:, :-1, 1:] - a[:, :-1, :-1]) / h
    return h * h * torch.sqrt(dx * dx + dy * dy + delta * delta).sum(dim=(1, 2))


@functools.lru_cache(maxsize=4)
def _cell_differences(n: int) -> tuple[scipy.sparse.csr_matrix, scipy.sparse.csr_matrix]:
    """``(D_x, D_y)``, each ``((n-1)^2, n^2)``: the forward differences of [`total_variation`][] on its
    cells (row ``i (n-1) + j`` for the cell at node ``(i, j)``), divided by ``h``. Read-only (cached)."""
    h = 1.0 / (n - 1)
    node = np.arange(n * n).reshape(n, n)
    rows = np.arange((n - 1) ** 2)
    base = node[:-1, :-1].ravel()

    def difference(ahead):
        cols = np.concatenate([ahead.ravel(), base])
        vals = np.concatenate([np.full(rows.size, 1 / h), np.full(rows.size, -1 / h)])
        return scipy.sparse.csr_matrix((vals, (np.concatenate([rows, rows]), cols)), shape=(rows.size, n * n))

    return difference(node[1:, :-1]), difference(node[:-1, 1:])


def total_variation_hessian(a: np.ndarray, delta: float) -> scipy.sparse.csr_matrix:
    """The Hessian ``(n^2, n^2)`` of [`total_variation`][] at one field ``a (n, n)`` (row-major unknowns):

        H = h^2 sum_cells D_c^T (I / s - q q^T / s^3) D_c,   q = (dx, dy),   s = sqrt(|q|^2 + delta^2)

    with ``D_c`` the cell's two forward differences. Assembled once (~9 ms at 141 x 141), it gives a
    Hessian product in ~0.2 ms, where torch's double backward costs about a millisecond per product
    (a Newton-CG step needs dozens)."""
    n = a.shape[0]
    h = 1.0 / (n - 1)
    d_x, d_y = _cell_differences(n)
    flat = np.asarray(a, dtype=np.float64).ravel()
    dx, dy = d_x @ flat, d_y @ flat
    s = np.sqrt(dx * dx + dy * dy + delta * delta)
    s3 = s**3
    diag = scipy.sparse.diags
    blocks = scipy.sparse.bmat([[diag(1 / s - dx * dx / s3), diag(-dx * dy / s3)],
                                [diag(-dx * dy / s3), diag(1 / s - dy * dy / s3)]])
    d = scipy.sparse.vstack([d_x, d_y])
    return (h * h * (d.T @ blocks @ d)).tocsr()


def snap_to_phases(a: torch.Tensor, low: float, high: float, tol: float) -> torch.Tensor:
    """``a`` with every value within ``tol`` of ``low`` (``high``) set to ``low`` (``high``); a new tensor.

    For a two-valued coefficient recovered on a fine grid before it is average-pooled: inside a phase
    the noise-driven deviations vanish, while values farther from both (an interface between the
    nodes) keep their fraction. ``tol = (high - low) / 2`` rounds every value to the nearer phase.
    """
    out = a.clone()
    out[a <= low + tol] = low
    out[a >= high - tol] = high
    return out
