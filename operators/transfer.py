"""Grid transfer between a node grid of any size and a latent node grid fixed in physical space.

Both grids are node grids on ``[0, 1]`` per axis: fine points ``x_j = j/(n-1)``, latent points
``ξ_i = i/(m-1)``.  ``φ_i`` is the latent hat function (piecewise linear, 1 at ``ξ_i``, 0 at
the other latent nodes).  Two separable matrices per axis, both O(n·m):

- restriction ``R (m, n)``, a quadrature-weighted average against the hat functions

      R[i, j] = φ_i(x_j) w_j / Σ_k φ_i(x_k) w_k,      w = trapezoid weights of the fine grid,

  i.e. ``(R u)_i ≈ ∫ φ_i u / ∫ φ_i``.  Rows sum to 1 (constants are reproduced exactly); the
  average is over a window of fixed physical width 2/(m-1), so it is anti-aliased and converges
  as the fine spacing goes to 0 for any integrable u (first order at a jump, second order for
  smooth u).  On nested grids ``n = 2(m-1) + 1`` it is multigrid full weighting (1/4, 1/2, 1/4);
  at ``n = m`` it is the identity.
- prolongation ``P (n, m)``, ``P[j, i] = φ_i(x_j)``: the piecewise-linear interpolant of latent
  nodal values evaluated at the fine points (what bilinear interpolation with aligned corners
  computes), exact for linear functions.

On a 2-D grid ``(…, n_1, n_2)`` a pair of matrices acts as ``A_1 u A_2ᵀ`` (:func:`apply_separable`).

Periodic grids ``x_j = j/n`` (e.g. Burgers on the torus) use :func:`fourier_resample` both ways
instead: truncation of the Fourier series to the latent grid's frequencies, and its evaluation on
the finer grid; :func:`band_limit` keeps a field's lowest modes on its own grid.
"""
from __future__ import annotations

import torch

from petrov.common.dtypes import to_caller_dtype, upcast


def node_points(n: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(n,)`` node coordinates ``j/(n-1)`` of ``[0, 1]`` (``[0.]`` for ``n = 1``)."""
    return torch.linspace(0.0, 1.0, n, dtype=dtype, device=device)


def trapezoid_weights(n: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(n,)`` trapezoid-rule weights of the node grid of ``[0, 1]``: ``h/2, h, …, h, h/2``, sum 1."""
    if n < 2:
        raise ValueError(f"a node grid needs at least 2 points, got {n}")
    w = torch.full((n,), 1.0 / (n - 1), dtype=dtype, device=device)
    w[0] = w[-1] = 0.5 / (n - 1)
    return w


def grid_weights(grid: tuple[int, ...], periodic: bool, dtype: torch.dtype = torch.float64,
                 device=None) -> torch.Tensor:
    """``(prod(grid),)`` quadrature weights of a uniform grid on ``[0, 1]^d``, flattened row-major like
    :func:`~petrov.operators.layout.grid_to_points`, summing to 1: the tensor product of the trapezoid
    weights of each axis on node grids, uniform ``1/prod(grid)`` on periodic grids (where the
    trapezoid rule is the plain mean)."""
    w = torch.ones(1, dtype=dtype, device=device)
    for n in grid:
        if periodic:
            axis = torch.full((n,), 1.0 / n, dtype=dtype, device=device)
        else:
            axis = trapezoid_weights(n, dtype, device)
        w = (w.unsqueeze(-1) * axis).reshape(-1)
    return w


def hat_functions(m: int, x: torch.Tensor) -> torch.Tensor:
    """``(m, len(x))``: ``φ_i(x_j) = max(0, 1 - |(m-1) x_j - i|)``, the hats of the latent node grid."""
    if m < 2:
        raise ValueError(f"the latent grid needs at least 2 points per axis, got {m}")
    i = torch.arange(m, dtype=x.dtype, device=x.device)
    return (1.0 - ((m - 1) * x.unsqueeze(0) - i.unsqueeze(1)).abs()).clamp_min(0.0)


def restriction_matrix(m: int, n: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(m, n)``: ``R[i, j] = φ_i(x_j) w_j / Σ_k φ_i(x_k) w_k`` (see the module docstring).

    Needs every latent hat to cover a fine node with weight > 0, i.e. a fine spacing below the
    latent support width: ``n - 1 > (m - 1) / 2``; otherwise ``ValueError``.
    """
    a = hat_functions(m, node_points(n, dtype, device)) * trapezoid_weights(n, dtype, device)
    mass = a.sum(dim=1, keepdim=True)
    if bool((mass <= 0).any()):
        raise ValueError(
            f"input grid of {n} points per axis is too coarse for a latent grid of {m} points: "
            f"some latent cells hold no input point; use an input grid with n - 1 > (m - 1)/2 "
            f"(n >= {(m - 1) // 2 + 2}) or a smaller latent_size"
        )
    return a / mass


def prolongation_matrix(n: int, m: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(n, m)``: ``P[j, i] = φ_i(x_j)``, linear interpolation from the latent nodes to ``x_j``."""
    return hat_functions(m, node_points(n, dtype, device)).T.contiguous()


def apply_separable(u: torch.Tensor, a1: torch.Tensor, a2: torch.Tensor) -> torch.Tensor:
    """``(…, n_1, n_2) -> (…, k_1, k_2)``: ``a1 u a2ᵀ`` with ``a1 (k_1, n_1)``, ``a2 (k_2, n_2)``."""
    return a1.to(u.dtype) @ u @ a2.to(u.dtype).T


def _apply_axes(u: torch.Tensor, mats: list[torch.Tensor]) -> torch.Tensor:
    """``(…, n_1[, n_2]) -> (…, k_1[, k_2])``: one ``(k, n)`` matrix per trailing axis."""
    if len(mats) == 1:
        return u @ mats[0].to(u.dtype).T
    if len(mats) == 2:
        return apply_separable(u, *mats)
    raise ValueError(f"grid transfers take 1 or 2 grid axes, got {len(mats)}")


def restrict(u: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
    """``(b, c, *n) -> (b, c, *m)`` on 1 or 2 axes: ``R u`` / ``R_1 u R_2ᵀ`` (quadrature-weighted hat
    averages)."""
    grid = u.shape[-len(size):]
    return _apply_axes(u, [restriction_matrix(m, n, u.dtype, u.device) for n, m in zip(grid, size)])


def prolong(z: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
    """``(b, c, *m) -> (b, c, *n)`` on 1 or 2 axes: ``P z`` / ``P_1 z P_2ᵀ`` (linear interpolation of
    the nodes; also the interpolation of any node-grid field at the nodes of another size)."""
    grid = z.shape[-len(size):]
    return _apply_axes(z, [prolongation_matrix(n, m, z.dtype, z.device) for m, n in zip(grid, size)])


def fourier_resample(u: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
    """``(b, c, *n) -> (b, c, *m)`` on periodic grids ``x_j = j/n``: the trigonometric interpolant of
    the frequencies ``|k| < min(n, m)/2`` of each axis, evaluated on the ``m`` grid.

    Restriction (``m < n``: spectral truncation, the ideal anti-aliasing filter; for a field with no
    frequency at or above ``m/2`` the result is the exact point values at any ``n``) and prolongation
    (``m > n``: zero-padding of the spectrum) in one map.  A Nyquist mode of either grid is dropped: on
    the grid that holds it, it is a cosine only, with no consistent value elsewhere (``n == m`` is the
    identity, Nyquist mode included).  Runs in float32 at least (FFTs of arbitrary sizes).
    """
    dtype = u.dtype
    u = upcast(u)
    with torch.autocast(device_type=u.device.type, enabled=False):
        for axis, m in zip(range(u.dim() - len(size), u.dim()), size):
            n = u.shape[axis]
            if n == m:
                continue
            keep = (min(n, m) + 1) // 2
            spec = torch.fft.rfft(u.movedim(axis, -1), norm="forward")[..., :keep]
            u = torch.fft.irfft(spec, n=m, norm="forward").movedim(-1, axis)
    return to_caller_dtype(u, dtype)


def band_limit(u: torch.Tensor, modes: int) -> torch.Tensor:
    """``(b, c, n) -> (b, c, n)`` on the periodic grid ``x_j = j/n``: the lowest ``modes`` real
    Fourier modes of each row, ``k = 0 .. modes - 1`` (the count ``SpectralConv`` keeps), the rest
    set to zero — the L² projection onto trigonometric polynomials of degree ``modes - 1``.

    Identity when the grid has no mode above that (``n // 2 + 1 <= modes``).  A band-limited field
    has the same Fourier coefficients at every ``n`` that resolves it, so a model whose output
    passes through this map produces the same function at every grid size.  Runs in float32 at
    least (FFTs of arbitrary sizes).
    """
    if isinstance(modes, bool) or not isinstance(modes, int) or modes < 1:
        raise ValueError(f"band_limit: modes must be an integer >= 1, got {modes!r}")
    n = u.shape[-1]
    if n // 2 + 1 <= modes:
        return u
    dtype = u.dtype
    u = upcast(u)
    with torch.autocast(device_type=u.device.type, enabled=False):
        spec = torch.fft.rfft(u, norm="forward")[..., :modes]
        u = torch.fft.irfft(spec, n=n, norm="forward")
    return to_caller_dtype(u, dtype)
