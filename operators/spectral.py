"""Spectral convolution (Li et al. 2021, FNO) on channels-first grids ``(b, c, *grid)``.

The layer multiplies the lowest Fourier modes of each input channel by learned complex matrices
and transforms back:

    y = irfftn( P_K^T [ W(k) · P_K rfftn(x)(k) ], s=grid )

where ``rfftn`` runs over the d grid axes (unnormalized forward, ``1/N`` inverse: the torch
default, so a frequency means the same thing at every resolution), ``P_K`` keeps the modes in
``K`` and ``W(k)`` is a ``(c_in, c_out)`` complex matrix per kept mode.

What ``modes = (m_1, ..., m_d)`` counts (the FNO convention, also the reference's):

- on the last grid axis (the half spectrum of ``rfftn``) the ``m_d`` frequencies
  ``0, 1, ..., m_d - 1`` are kept; this needs ``m_d <= n_d // 2 + 1``;
- on every other axis ``i`` the ``2 m_i`` frequencies ``0, ..., m_i - 1`` and ``-m_i, ..., -1``
  are kept (``rfftn`` index ``p`` for ``p < m_i``, ``n_i - 2 m_i + p`` for ``p >= m_i``); this
  needs ``2 m_i <= n_i`` so the two blocks do not overlap.

In 1-D this is just ``0..m-1``.  The weight is stored as a real tensor
``(c_in, c_out, 2 m_1, ..., 2 m_{d-1}, m_d, 2)`` (real and imaginary parts last, viewed as
complex in ``forward``), so parameter counts, optimizers and checkpoints see real numbers.
Indexing is by explicit index lists, never by ``fftshift``, so odd sizes (85, 141, 211, 421)
are handled like even ones.  The pointwise linear skip of an FNO layer lives in
[`petrov.operators.blocks.SpectralBlock`][], not here.

Under ``torch.compile`` the same map runs in real arithmetic ([`spectral_real`][]): the kept
frequencies' cosines and sines as ``(n, m)`` matrices (a truncated DFT), complex values as (real,
imaginary) pairs and each complex product as one real product with 2 x 2 blocks ([`mode_product`][];
the transforms built from [`petrov.grids.fourier_modes`][], which says why: on one NVIDIA H200, torch
2.11, the compiled ``latent2d`` with the FFT path was not the eager one).  Eager runs on the CPU take it
too where it is the cheaper ([`truncated_dft_pays`][]: every axis keeping at most a quarter of its
frequencies, 2.7x faster than the FFTs at 85 x 85 with 12 modes); elsewhere eager runs take torch's
FFTs ([`spectral_fft`][]).

The transforms and the mode product run in float32 at least (torch's CPU FFT takes no bfloat16,
and a 16-bit FFT of an arbitrary size keeps few digits): a 16-bit input is upcast, also under
autocast; the result is float32 under autocast (autocast's next matrix product rounds it as it
needs), else in the input's dtype.
"""
from __future__ import annotations

import torch
from torch import nn

from ..common.dtypes import to_caller_dtype, upcast
from ..grids.fourier_modes import dft_matrices, irdft_matrix, rdft_matrix
from ..grids.shape_cache import shape_cached


def _as_modes(modes: int | tuple[int, ...] | list[int], ndim: int | None) -> tuple[int, ...]:
    if ndim is not None and (isinstance(ndim, bool) or not isinstance(ndim, int) or ndim < 1):
        raise ValueError(f"ndim (the number of grid axes) must be an integer >= 1 or None, got {ndim!r}")
    if isinstance(modes, int) and not isinstance(modes, bool):
        modes = (modes,) * (ndim or 1)
    else:
        modes = tuple(modes)
        if ndim is not None and len(modes) != ndim:
            raise ValueError(f"modes {modes} has {len(modes)} entries but ndim={ndim}")
    if not modes or any(not isinstance(m, int) or isinstance(m, bool) or m < 1 for m in modes):
        raise ValueError(f"modes must be positive integers, got {modes!r}")
    return modes


def kept_indices(n: int, m: int, device: torch.device | None = None) -> torch.Tensor:
    """FFT indices kept on a non-last axis of size ``n``: frequencies ``0..m-1`` then ``-m..-1``."""
    return torch.cat(
        [torch.arange(m, device=device), torch.arange(n - m, n, device=device)]
    )


_cached_kept_indices = shape_cached(kept_indices)  # built once per (n, m, device), shared


def _rotations(cos: torch.Tensor, sin: torch.Tensor, sign: float) -> torch.Tensor:
    """``(p, q)`` cosines and sines -> ``(p, 2, q, 2)``: multiplying complex numbers, stored as (real,
    imaginary) pairs, by ``e^{-i sign θ}`` as one real product: ``(a + ib) e^{-i sign θ} = (a cos θ + sign
    b sin θ) + i (b cos θ - sign a sin θ)``, so block ``[j, r, k, s]`` maps part ``r`` in to part ``s`` out."""
    return torch.stack([torch.stack([cos, -sign * sin], -1), torch.stack([sign * sin, cos], -1)], dim=1)


def _along(t: torch.Tensor, axis: int, blocks: torch.Tensor) -> torch.Tensor:
    """``t (..., p at axis, ..., 2)`` (complex numbers as pairs) with axis ``axis`` mapped by ``blocks (p, 2,
    q, 2)`` (see ``_rotations``): one product over the axis and the pair -> ``(..., q at axis, ..., 2)``."""
    return torch.tensordot(t, blocks, dims=([axis, -1], [0, 1])).movedim(-2, axis)


def axis_rotations(size: int, m: int, inverse: bool, dtype: torch.dtype, device=None) -> torch.Tensor:
    """The truncated transform along an axis other than the last, as ``_rotations`` blocks: forward
    ``(size, 2, 2m, 2)`` (``e^{-iθ}`` onto frequencies ``0..m-1, -m..-1``), or ``inverse`` ``(2m, 2, size,
    2)`` (``e^{+iθ} / size`` back)."""
    cos, sin = dft_matrices(size, kept_indices(size, m, device), dtype)
    return _rotations(cos.T / size, sin.T / size, -1.0) if inverse else _rotations(cos, sin, 1.0)


def last_axis_inverse(n: int, m: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``irfft``'s map from ``m`` kept frequencies (as pairs) to ``n`` points, with its ``1/n``:
    ``(2m, n)``."""
    return irdft_matrix(n, m, dtype, device) / n


_cached_rdft_matrix = shape_cached(rdft_matrix)
_cached_axis_rotations = shape_cached(axis_rotations)
_cached_last_axis_inverse = shape_cached(last_axis_inverse)


def mode_product(z: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``Y(k) = Σ_i Z_i(k) W_io(k)`` for every kept mode ``k``, complex numbers as (real, imaginary) pairs:
    ``z (b, c_in, *modes, 2)``, ``weight (c_in, c_out, *modes, 2)`` -> ``(b, c_out, *modes, 2)``.

    One batched real product over the modes, ``[Z_re, -Z_im; Z_im, Z_re] [W_re; W_im]`` (the top rows
    give ``Y_re``, the bottom ``Y_im``): the 2 x 2 block is built on the small operand ``z`` (``2b`` rows),
    and the weight is only reordered mode-first, one copy of it.  Building the block on the weight instead
    (four times its size, then reordered) made a layer's forward and backward at 85 x 85 (32 channels, 12
    modes, batch 8) a quarter slower on a 2-core CPU."""
    b, c_in = z.shape[:2]
    modes, c_out = z.shape[2:-1], weight.shape[1]
    zm = z.flatten(2, -2).permute(2, 0, 1, 3)  # (M, b, c_in, 2), M the kept modes
    re, im = zm[..., 0], zm[..., 1]
    rows = torch.stack([torch.stack([re, -im], 2), torch.stack([im, re], 2)], 1)  # (M, 2, b, 2, c_in)
    w = weight.flatten(2, -2).permute(2, 3, 0, 1)  # (M, 2, c_in, c_out): W_re then W_im
    out = torch.bmm(rows.flatten(3).flatten(1, 2), w.flatten(1, 2))  # (M, 2b, c_out)
    return out.unflatten(1, (2, b)).permute(2, 3, 0, 1).unflatten(2, modes)


def spectral_real(x: torch.Tensor, weight: torch.Tensor, modes: tuple[int, ...]) -> torch.Tensor:
    """[`SpectralConv`][]'s map in real arithmetic: ``x (b, c_in, *grid)``, ``weight`` as stored
    ``(c_in, c_out, 2 m_1, ..., m_d, 2)`` -> ``(b, c_out, *grid)``, equal to the FFT path to rounding.

    Forward transform ``X_k = Σ_j x_j e^{-iθ_jk}`` as ``(X_re, X_im) = (Σ x cos θ, -Σ x sin θ)`` on the
    last axis and ``(Σ X_re cos θ + X_im sin θ, Σ X_im cos θ - X_re sin θ)`` on the others (kept
    frequencies only), the product ``(X_re + i X_im)(W_re + i W_im)``, the inverse
    ``z_j = (1/n) Σ_k Y_k e^{+iθ_jk}`` on the other axes, and on the last one ``irfft``'s
    ``y_j = (1/n) Σ_k a_k (Y_re cos θ - Y_im sin θ)`` with ``a_0 = 1``, ``a_{n/2} = 1`` (even ``n``), else 2."""
    grid, dtype, device = tuple(x.shape[2:]), x.dtype, x.device
    n = grid[-1]
    # complex values as (real, imaginary) pairs in a last axis; one product per transform and for the modes
    # (spelled out in real and imaginary parts they took four products each: more, smaller GPU kernels)
    # (the matrices depend on sizes only: built once per size, dtype and device, compiled graphs take them as inputs)
    z = (x @ _cached_rdft_matrix(n, modes[-1], dtype, device)).unflatten(-1, (modes[-1], 2))
    others = [(2 + a, grid[a], modes[a]) for a in range(len(grid) - 1)]
    for axis, size, m in others:
        z = _along(z, axis, _cached_axis_rotations(size, m, False, dtype, device))
    z = mode_product(z, weight)
    for axis, size, m in reversed(others):
        z = _along(z, axis, _cached_axis_rotations(size, m, True, dtype, device))
    return z.flatten(-2) @ _cached_last_axis_inverse(n, modes[-1], dtype, device)


def spectral_fft(x: torch.Tensor, weight: torch.Tensor, modes: tuple[int, ...]) -> torch.Tensor:
    """[`SpectralConv`][]'s map through torch's FFTs (the same arguments as [`spectral_real`][]): axis by
    axis as ``rfftn`` / ``irfftn``, each complex transform only on the kept columns of the axes already
    reduced."""
    grid, ndim = tuple(x.shape[2:]), len(modes)
    dims = tuple(range(2, 2 + ndim))
    last, others = dims[-1], list(zip(dims[:-1], grid[:-1], modes[:-1]))
    # contiguous: the product below keeps its operand for backward, and a narrowed view would keep the
    # whole half spectrum alive
    x_ft = torch.fft.rfft(x, dim=last).narrow(last, 0, modes[-1]).contiguous()
    for axis, n, m in others:  # gather frequencies 0..m-1, -m..-1
        x_ft = torch.fft.fft(x_ft, dim=axis).index_select(axis, _cached_kept_indices(n, m, x.device))
    out = torch.einsum("bi...,io...->bo...", x_ft, torch.view_as_complex(weight))
    for axis, n, m in reversed(others):  # scatter back into the full axis, inverse c2c
        full = list(out.shape)
        full[axis] = n
        out = out.new_zeros(full).index_copy(axis, _cached_kept_indices(n, m, x.device), out)
        out = torch.fft.ifft(out, dim=axis)
    return torch.fft.irfft(out, n=grid[-1], dim=last)  # zero-pads the half spectrum


def truncated_dft_pays(device: torch.device, grid: tuple[int, ...], modes: tuple[int, ...]) -> bool:
    """Whether an eager [`SpectralConv`][] takes the truncated DFT ([`spectral_real`][]) rather than the
    FFT: on the CPU, where every axis keeps at most a quarter of its points' frequencies.  There the
    products with the kept frequencies' cosines and sines cost less than pocketfft's transforms of every
    row, slow on odd sizes (85, 141, 211, 421 = 5·17, 3·47, prime, prime).  One AMD EPYC, 2 threads,
    forward and backward of a layer on a batch of 8 (FFT against DFT): 32 channels, 12 modes on 85², 36.9
    against 13.5 ms; 141², 179 against 23; 421², 1282 against 415; 64 channels, 16 modes on 8192 points,
    38.7 against 25.0; at half the frequencies kept (1024 modes on 2048 points) 50 against 118 ms, hence
    the quarter.  On a GPU eager runs keep cuFFT (not measured against the DFT there)."""
    return device.type == "cpu" and all(4 * m <= n for n, m in zip(grid, modes))


class SpectralConv(nn.Module):
    """``(b, c_in, *grid) -> (b, c_out, *grid)``: learned multiplier on the lowest Fourier modes.

    - ``in_channels``, ``out_channels``: channel counts;
    - ``modes``: ``m`` (same on every axis) or ``(m_1, ..., m_d)``; the module docstring says exactly
      which frequencies are kept;
    - ``ndim``: number of grid axes when ``modes`` is an int (default 1).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        modes: int | tuple[int, ...],
        ndim: int | None = None,
    ):
        super().__init__()
        if in_channels < 1 or out_channels < 1:
            raise ValueError(f"channels must be >= 1, got {in_channels}, {out_channels}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.modes = _as_modes(modes, ndim)
        self.ndim = len(self.modes)
        shape = [2 * m for m in self.modes[:-1]] + [self.modes[-1]]
        self.weight = nn.Parameter(torch.empty(in_channels, out_channels, *shape, 2))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # FNO initialization: real and imaginary parts uniform on [0, 1/(c_in c_out)).
        with torch.no_grad():
            self.weight.uniform_(0.0, 1.0 / (self.in_channels * self.out_channels))

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}"

    def check_grid(self, grid: tuple[int, ...]) -> None:
        """Raise ``ValueError`` if the kept modes do not fit the grid ``grid``."""
        for axis, (n, m) in enumerate(zip(grid[:-1], self.modes[:-1])):
            if 2 * m > n:
                raise ValueError(
                    f"SpectralConv: {m} modes on grid axis {axis} keep frequencies -{m}..{m - 1} "
                    f"and need a grid of at least {2 * m} points, got {n}; use modes <= {n // 2} "
                    "or a finer grid"
                )
        n, m = grid[-1], self.modes[-1]
        if m > n // 2 + 1:
            raise ValueError(
                f"SpectralConv: {m} modes on the last grid axis keep frequencies 0..{m - 1} and "
                f"need at least {2 * (m - 1)} points, got {n}; use modes <= {n // 2 + 1} "
                "or a finer grid"
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (no check of values here: the models check their input once, at their entry)
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"SpectralConv: x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != self.ndim + 2:
            raise ValueError(
                f"SpectralConv expects (batch, channels, *grid) with {self.ndim} grid axes, "
                f"got shape {tuple(x.shape)}"
            )
        if x.shape[1] != self.in_channels:
            raise ValueError(
                f"SpectralConv expects {self.in_channels} channels in dim 1, got {x.shape[1]}"
            )
        if not torch.is_floating_point(x):
            raise ValueError(f"SpectralConv: x must be a floating-point tensor, got {x.dtype}; convert it "
                             f"(x.to({self.weight.dtype}))")
        grid = tuple(x.shape[2:])
        self.check_grid(grid)
        dtype = x.dtype
        x = upcast(x)  # FFTs of arbitrary sizes need >= float32
        with torch.autocast(device_type=x.device.type, enabled=False):
            weight = self.weight if self.weight.dtype == x.dtype else self.weight.to(x.dtype)
            # no complex tensor in a compiled graph (module docstring); on the CPU the cheaper of the two
            real = torch.compiler.is_compiling() or truncated_dft_pays(x.device, grid, self.modes)
            y = (spectral_real if real else spectral_fft)(x, weight, self.modes)
        return to_caller_dtype(y, dtype)  # float32 under autocast, else the input's dtype
