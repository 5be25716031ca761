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

On a 2-D grid ``(…, n_1, n_2)`` a pair of matrices acts as ``A_1 u A_2ᵀ`` ([`apply_separable`][]).

Point sets (nodes ``x_j`` of a mesh anywhere in ``[0, 1]²``, quadrature weights ``w_j``, 0 on
padding) use the same two maps with the 2-D tensor hats ``φ_i(x) = φ_{i_1}(x_1) φ_{i_2}(x_2)`` of the
latent node grid: [`restrict_points`][] (``R[i, j] = φ_i(x_j) w_j / Σ_k φ_i(x_k) w_k``, together
with the hat mass ``Σ_k φ_i(x_k) w_k ≈ ∫_Ω φ_i``; a latent node whose hat covers no node of positive
weight gets mass 0 and value 0, never a division by 0) and [`prolong_points`][] (the bilinear
interpolant of the latent nodal values evaluated at the nodes).  Each node meets the hats of the
four corners of its latent cell only, so both cost O(n) per channel ([`point_hats`][] finds the
corners once for both maps: on a CPU as sparse matrices, elsewhere as rows to gather and scatter).  On
a node grid with the product trapezoid weights they are the separable maps above (up to round-off).
[`interpolate_field`][] evaluates one latent field shared by the whole batch (statistics of a normalizer).

Periodic grids ``x_j = j/n`` (e.g. Burgers on the torus) use [`fourier_resample`][] both ways
instead: truncation of the Fourier series to the latent grid's frequencies, and its evaluation on
the finer grid; [`band_limit`][] keeps a field's lowest modes on its own grid.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..common.dtypes import to_caller_dtype, upcast
from .layout import node_axis
from .shape_cache import shape_cached
from .fourier_modes import irfft_modes, rfft_modes


def node_points(n: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(n,)`` node coordinates ``j/(n-1)`` of ``[0, 1]`` (``[0.]`` for ``n = 1``)."""
    return node_axis(n, dtype, device)


def trapezoid_weights(n: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(n,)`` trapezoid-rule weights of the node grid of ``[0, 1]``: ``h/2, h, …, h, h/2``, sum 1."""
    if n < 2:
        raise ValueError(f"a node grid needs at least 2 points, got {n}")
    w = torch.full((n,), 1.0 / (n - 1), dtype=dtype, device=device)
    w[0] = w[-1] = 0.5 / (n - 1)
    return w


def grid_weights(grid: tuple[int, ...], periodic: bool | tuple[bool, ...], dtype: torch.dtype = torch.float64,
                 device=None) -> torch.Tensor:
    """``(prod(grid),)`` quadrature weights of a uniform grid on ``[0, 1]^d``, flattened row-major like
    [`grid_to_points`][petrov.grids.layout.grid_to_points], summing to 1: the tensor product of the trapezoid
    weights of each axis on node grids, uniform ``1/prod(grid)`` on periodic grids (where the
    trapezoid rule is the plain mean); ``periodic`` one bool or one per axis."""
    w = torch.ones(1, dtype=dtype, device=device)
    flags = periodic if isinstance(periodic, tuple) else (periodic,) * len(grid)
    for n, axis_periodic in zip(grid, flags):
        if axis_periodic:
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


def check_restriction_sizes(m: int, n: int, grid: str = "latent grid", option: str = "latent_size") -> None:
    """``ValueError`` unless every hat of an ``m``-point node grid covers a node of an ``n``-point one with
    weight > 0: ``n - 1 > (m - 1) / 2`` (for ``m >= 3``), naming the ``grid`` and the config ``option`` to lower."""
    if m >= 3 and not 2 * (n - 1) > m - 1:
        raise ValueError(
            f"input grid of {n} points per axis is too coarse for a {grid} of {m} points: "
            f"some of its cells hold no input point; use an input grid with n - 1 > (m - 1)/2 "
            f"(n >= {(m - 1) // 2 + 2}) or a smaller {option}"
        )


def restriction_matrix(m: int, n: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(m, n)``: ``R[i, j] = φ_i(x_j) w_j / Σ_k φ_i(x_k) w_k`` (see the module docstring).

    Needs every latent hat to cover a fine node with weight > 0, i.e. a fine spacing below the
    latent support width: ``n - 1 > (m - 1) / 2``; otherwise ``ValueError``.  (For ``m >= 3`` the hat
    of latent node 1 lies at distance 1/(m-1) from the fine node 0 and meets no fine node if the next
    one is as far: the condition is exact, and a fact of sizes, checked without reading a value.)
    """
    check_restriction_sizes(m, n)
    a = hat_functions(m, node_points(n, dtype, device)) * trapezoid_weights(n, dtype, device)
    return a / a.sum(dim=1, keepdim=True)


def prolongation_matrix(n: int, m: int, dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
    """``(n, m)``: ``P[j, i] = φ_i(x_j)``, linear interpolation from the latent nodes to ``x_j``."""
    return hat_functions(m, node_points(n, dtype, device)).T.contiguous()


# what the models use: built once per (sizes, dtype, device), shared (see petrov.grids.shape_cache)
cached_restriction_matrix = shape_cached(restriction_matrix)
cached_prolongation_matrix = shape_cached(prolongation_matrix)
cached_trapezoid_weights = shape_cached(trapezoid_weights)
cached_grid_weights = shape_cached(grid_weights)


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
    return _apply_axes(u, [cached_restriction_matrix(m, n, u.dtype, u.device) for n, m in zip(grid, size)])


def prolong(z: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
    """``(b, c, *m) -> (b, c, *n)`` on 1 or 2 axes: ``P z`` / ``P_1 z P_2ᵀ``, the (bi)linear interpolant
    of node values evaluated at the nodes of another node grid, finer or coarser (what bilinear
    interpolation with aligned corners computes).  petrov's one node-grid interpolation: latent
    grids, the reference hybrid's samplers, the inverse problem's coefficient, normaliser
    statistics."""
    grid = tuple(z.shape[-len(size):])
    if grid == tuple(size):
        return z
    return _apply_axes(z, [cached_prolongation_matrix(n, m, z.dtype, z.device) for m, n in zip(grid, size)])


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
            u = irfft_modes(rfft_modes(u.movedim(axis, -1), keep), m).movedim(-1, axis)
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
        u = irfft_modes(rfft_modes(u, modes), n)
    return to_caller_dtype(u, dtype)


@shape_cached
def _latent_sizes(size: tuple[int, ...], dtype: torch.dtype, device) -> torch.Tensor:
    """``(len(size),)``: the sizes as a tensor (cached: a host-to-device copy per call would wait for the host)."""
    return torch.tensor(size, dtype=dtype, device=device)


def latent_corners(pos: torch.Tensor, size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The four latent nodes around each point and their hat values.

    ``pos: (b, n, 2)`` in ``[0, 1]²`` (points outside are clamped onto it), latent node grid of
    ``size = (m_1, m_2)`` nodes ``(i_1/(m_1-1), i_2/(m_2-1))`` -> ``index (b, n, 4)`` long, row-major
    flat indices ``i_1 m_2 + i_2`` of the corners of the latent cell holding the point (increasing), and
    ``phi (b, n, 4)``, the corners' hats at the point (bilinear weights, nonnegative, summing to 1);
    the hats of all other latent nodes vanish there.
    """
    if len(size) != 2 or min(size) < 2:
        raise ValueError(f"the latent grid needs 2 axes of at least 2 points, got {tuple(size)}")
    m = _latent_sizes(tuple(size), pos.dtype, pos.device)
    scaled = pos.clamp(0.0, 1.0) * (m - 1)
    low = torch.minimum(scaled.floor(), m - 2)  # a point on the last node line belongs to the last cell
    t = scaled - low  # (b, n, 2) in [0, 1]
    i, j = low.long().unbind(-1)
    tx, ty = t.unbind(-1)
    m2 = size[1]
    index = torch.stack([i * m2 + j, i * m2 + j + 1, (i + 1) * m2 + j, (i + 1) * m2 + j + 1], dim=-1)
    phi = torch.stack([(1 - tx) * (1 - ty), (1 - tx) * ty, tx * (1 - ty), tx * ty], dim=-1)
    return index, phi


class PointHats(NamedTuple):
    """The latent hats at the nodes of a batch of point sets ([`point_hats`][]): ``index (b, n, 4)`` and
    ``phi (b, n, 4)`` as [`latent_corners`][] gives them, ``cells = m_1 m_2``, and on the CPU the same
    numbers as two sparse CSR matrices over the batch's stacked rows: ``interpolate (b n, b cells)``
    (``P``, four entries per node) and ``gather (b cells, b n)`` (``Pᵀ``, built apart: a sparse
    product with a transpose takes a slow path)."""

    index: torch.Tensor
    phi: torch.Tensor
    cells: int
    interpolate: torch.Tensor | None = None
    gather: torch.Tensor | None = None


def point_hats(pos: torch.Tensor, size: tuple[int, int], sparse: bool = True) -> PointHats:
    """The latent hats at ``pos (b, n, 2)`` for [`restrict_points`][] and [`prolong_points`][] (build once,
    use for both).

    On the CPU in eager mode, with no gradient wanted for ``pos``, the two maps run as sparse matrix
    products (``P`` and ``Pᵀ`` in CSR): ~3x faster than gathering and scattering rows of ``(b n 4, c)``,
    which stay the way on accelerators and under ``torch.compile`` (fixed shapes, no sparse tensors).
    Both give the same numbers up to the order of the four-term sums.  ``sparse=False``: the gathered
    form everywhere (what one map of a few channels wants: building ``Pᵀ`` sorts all ``4 b n`` entries).
    """
    index, phi = latent_corners(pos, size)
    cells = size[0] * size[1]
    if not sparse or pos.device.type != "cpu" or pos.requires_grad or torch.compiler.is_compiling():
        return PointHats(index, phi, cells)
    return _with_sparse(PointHats(index, phi, cells))


def _with_sparse(hats: PointHats) -> PointHats:
    """``hats`` with ``P`` and ``Pᵀ`` as CSR matrices (the CPU's form)."""
    index, phi, cells = hats.index, hats.phi, hats.cells
    b, n, _ = index.shape
    rows = batch_rows(index, cells)  # each node's four in increasing order: P's columns row by row
    values = phi.reshape(-1)
    nodes = b * n
    interpolate = _csr(torch.arange(0, 4 * nodes + 1, 4, device=index.device), rows, values, (nodes, b * cells))
    order = torch.sort(rows.int(), stable=True).indices  # the entries by latent row, nodes increasing in each
    starts = torch.zeros(b * cells + 1, dtype=torch.long, device=index.device)
    torch.cumsum(torch.bincount(rows, minlength=b * cells), 0, out=starts[1:])
    gather = _csr(starts, order >> 2, values[order], (b * cells, nodes))  # entry k is node k // 4's
    return PointHats(index, phi, cells, interpolate, gather)


def _csr(starts: torch.Tensor, columns: torch.Tensor, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A sparse CSR matrix from arrays valid by construction (sorted columns per row: no check)."""
    with warnings.catch_warnings():  # torch calls its sparse CSR support "beta" (since 1.10) on first use
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(starts, columns, values, shape, check_invariants=False)


class _SparseProduct(torch.autograd.Function):
    """``a @ x`` (a sparse, constant) whose backward is ``a_t @ grad`` with the transpose built beforehand."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, a: torch.Tensor, a_t: torch.Tensor) -> torch.Tensor:
        ctx.a_t = a_t
        return a @ x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.a_t @ grad, None, None


def restrict_points(u: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor, size: tuple[int, int],
                    hats: PointHats | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Quadrature-weighted hat averages of nodal values on a latent node grid.

    ``u: (b, n, c)`` at the points ``pos: (b, n, 2)`` with weights ``w = weights: (b, n)`` (0 on
    padding) -> ``values (b, m_1, m_2, c)`` and ``mass (b, m_1, m_2)``:

        mass_i   = Σ_j φ_i(x_j) w_j                           (≈ ∫_Ω φ_i)
        values_i = Σ_j φ_i(x_j) w_j u_j / mass_i   if mass_i > 0,   0 otherwise

    i.e. ``values = R u`` with ``R[i, j] = φ_i(x_j) w_j / mass_i``: rows sum to 1 where
    ``mass > 0`` (constants are reproduced there); ``mass > 0`` is the mask of the latent nodes whose
    hat meets a node of positive weight.  Sums in float32 at least (returned so under autocast).
    ``hats``: [`point_hats`][] of ``pos`` in ``u``'s (upcast) dtype, when the caller also prolongs.
    """
    dtype = u.dtype
    u = upcast(u)
    with torch.autocast(device_type=u.device.type, enabled=False):
        if hats is None:  # one map: gathered (the sparse form pays when built once for R and P)
            hats = point_hats(pos.to(u.dtype), size, sparse=False)
        b, n, c = u.shape
        if hats.gather is not None:  # the CPU's sparse products (in the hats' dtype)
            gather = hats.gather
            w = weights.to(gather.dtype)
            mass = (gather @ w.reshape(-1, 1)).view(b, -1)
            total = _SparseProduct.apply((w[..., None] * u.to(gather.dtype)).reshape(b * n, c), gather,
                                         hats.interpolate)
        else:
            w = weights.to(u.dtype)
            a = hats.phi * w[..., None]  # (b, n, 4)
            rows = batch_rows(hats.index, hats.cells)
            # row sums (index_add_ over the rows of (b m_1 m_2, c)): ~1.5x faster on a CPU than scatter_add
            # with an index expanded over the channels
            mass = u.new_zeros(b * hats.cells).index_add_(0, rows, a.reshape(-1)).view(b, -1)
            total = u.new_zeros(b * hats.cells, c).index_add_(0, rows, (a[..., None] * u[:, :, None, :]).reshape(-1, c))
        total = total.view(b, -1, c)
        filled = mass > 0
        values = torch.where(filled[..., None], total / torch.where(filled, mass, 1.0)[..., None], 0.0)
    return to_caller_dtype(values.reshape(b, *size, c), dtype), mass.reshape(b, *size)


def interpolate_field(z: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """One field on the latent node grid, the same for every sample, ``z: (m_1, m_2, c)`` -> ``(b, n, c)``:
    its bilinear interpolant at ``pos: (b, n, 2)`` (clamped onto ``[0, 1]²``; [`prolong_points`][] of ``z``
    repeated over the batch).

    torch's ``grid_sample`` (bilinear, corners aligned with the nodes, border clamping) computes the four
    corners and their hats in one kernel: ~8x faster on a CPU than [`latent_corners`][] and a gather, for
    the few channels of a normaliser's statistics evaluated at every node in every step."""
    m1, m2, c = z.shape
    b, n, _ = pos.shape
    # grid_sample's (x, y) in [-1, 1] index (width = m_2, height = m_1): pos (p_1, p_2) -> (2 p_2 - 1, 2 p_1 - 1)
    where = (2 * pos.to(z.dtype).flip(-1) - 1).reshape(1, b * n, 1, 2)
    out = F.grid_sample(z.permute(2, 0, 1)[None], where, mode="bilinear", padding_mode="border",
                        align_corners=True)  # (1, c, b n, 1)
    return out.reshape(c, b, n).permute(1, 2, 0)


def prolong_points(z: torch.Tensor, pos: torch.Tensor, hats: PointHats | None = None) -> torch.Tensor:
    """``z: (b, m_1, m_2, c)`` values at the latent nodes (channels last) -> ``(b, n, c)``: their
    bilinear interpolant ``Σ_i z_i φ_i(x_j)`` at the points ``pos: (b, n, 2)`` (clamped onto
    ``[0, 1]²``); exact for bilinear functions.  ``hats``: [`point_hats`][] of ``pos`` in ``z``'s dtype."""
    b, m1, m2, c = z.shape
    if hats is None:  # one map: gathered (see restrict_points)
        hats = point_hats(pos.to(z.dtype), (m1, m2), sparse=False)
    n = pos.shape[1]
    if hats.interpolate is not None:
        with torch.autocast(device_type="cpu", enabled=False):
            flat = z.reshape(b * m1 * m2, c).to(hats.interpolate.dtype)
            out = _SparseProduct.apply(flat, hats.interpolate, hats.gather)
        return out.view(b, n, c).to(z.dtype)
    # whole rows of (b m_1 m_2, c) (index_select; backward index_add_): ~1.5x faster on a CPU than gather
    corners = z.reshape(b * m1 * m2, c).index_select(0, batch_rows(hats.index, m1 * m2))
    return (corners.view(b, n, 4, c) * hats.phi[..., None].to(z.dtype)).sum(dim=2)


def batch_rows(index: torch.Tensor, cells: int) -> torch.Tensor:
    """``index (b, n, 4)`` latent node numbers per sample -> ``(b n 4,)`` row numbers of the batch's latent
    nodes stacked as ``(b cells, ·)`` (sample k's nodes at rows ``k cells ..``)."""
    offsets = cells * torch.arange(index.shape[0], device=index.device)
    return (index + offsets[:, None, None]).reshape(-1)
