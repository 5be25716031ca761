"""Truncated Fourier transforms on periodic grids ``x_j = j/n``: the FFT in eager mode, a truncated DFT in
real arithmetic under ``torch.compile``.

Inductor generates no code for complex tensors: a compiled graph that holds one runs those operations as
fallback kernels around generated code, and on one NVIDIA H200 (torch 2.11) a compiled model with complex
intermediates computed another function than the eager one (through these functions it agreed with eager
there to 1e-6).  Every Fourier map of petrov's models (the spectral convolution, the periodic grid
transfers, the marching models' Fourier summary) therefore goes through these functions, or through
[`spectral_real`][petrov.operators.spectral.spectral_real] which builds on them: eager runs keep torch's
FFTs; compiled ones multiply by the kept frequencies' cosines and sines (``(n, m)`` matrices, ``m`` the
kept modes), so the graph holds no complex tensor.
"""
from __future__ import annotations

import math

import torch


def dft_matrices(n: int, freqs: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos θ, sin θ)``, each ``(n, len(freqs))``, with ``θ_jk = 2π (j k mod n) / n`` for the grid
    index ``j = 0..n-1`` and the frequencies ``k = freqs`` (the product reduced mod ``n`` first, in
    integers: exact angles at any size)."""
    j = torch.arange(n, device=freqs.device)
    turns = torch.outer(j, freqs)
    # a symbolic n (an export with the grid size as a dynamic axis) divides as a tensor: torch.onnx has no
    # translation of a remainder by a symbolic number
    modulus = torch.full((), n, dtype=turns.dtype, device=turns.device) if isinstance(n, torch.SymInt) else n
    theta = (turns % modulus).to(torch.float64) * (2 * math.pi / n)
    return torch.cos(theta).to(dtype), torch.sin(theta).to(dtype)


def rdft_matrix(n: int, keep: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``(n, 2 keep)``: columns ``cos θ_jk, -sin θ_jk`` interleaved, ``k = 0..keep-1``, so that ``u @ M``
    gives ``Σ_j u_j e^{-iθ_jk}`` as (real, imaginary) pairs in one product (one kernel, not two)."""
    c, s = dft_matrices(n, torch.arange(keep, device=device), dtype)
    return torch.stack([c, -s], dim=-1).flatten(-2)


def irdft_matrix(n: int, keep: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """``(2 keep, n)``: rows ``a_k cos θ_jk, -a_k sin θ_jk`` interleaved (``a_k``: [`irfft_weights`][]),
    so that (real, imaginary) pairs ``Y (..., keep, 2)`` flattened give ``irfft``'s
    ``Σ_k a_k (Y_re cos θ - Y_im sin θ)`` in one product."""
    k = torch.arange(keep, device=device)
    c, s = dft_matrices(n, k, dtype)
    a = irfft_weights(n, k, dtype)
    return torch.stack([(c * a).T, -(s * a).T], dim=1).flatten(0, 1)


def irfft_weights(n: int, k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``irfft``'s weight of frequency ``k`` on ``n`` points: 1 for ``k = 0`` and ``k = n/2``, else 2
    (the conjugate half of the spectrum)."""
    return torch.where((k == 0) | (2 * k == n), 1.0, 2.0).to(dtype)


def rfft_modes(u: torch.Tensor, keep: int) -> torch.Tensor:
    """The lowest ``keep`` Fourier coefficients of each row, real and imaginary parts last:
    ``(..., n) -> (..., keep, 2)``, ``torch.view_as_real(torch.fft.rfft(u, norm="forward")[..., :keep])``,
    i.e. ``U_k = (1/n) Σ_j u_j e^{-2πi jk/n}``, ``k = 0..keep-1``.

    Real arithmetic under ``torch.compile`` (module docstring). ``u`` in float32 or float64 (FFTs of
    arbitrary sizes)."""
    n = u.shape[-1]
    if torch.compiler.is_compiling():
        return (u @ rdft_matrix(n, keep, u.dtype, u.device)).unflatten(-1, (keep, 2)) / n
    return torch.view_as_real(torch.fft.rfft(u, norm="forward")[..., :keep])


def irfft_modes(spec: torch.Tensor, n: int) -> torch.Tensor:
    """The inverse of [`rfft_modes`][] on ``n`` points, the frequencies not given taken as zero:
    ``(..., keep, 2) -> (..., n)``, ``torch.fft.irfft(torch.view_as_complex(spec), n=n, norm="forward")``,
    i.e. ``u_j = Σ_k a_k (Re U_k cos θ_jk - Im U_k sin θ_jk)`` with ``θ_jk = 2π jk/n``, ``a_k`` 1 for
    ``k = 0, n/2``, else 2 (needs ``keep <= n // 2 + 1``). Real arithmetic under ``torch.compile``."""
    keep = spec.shape[-2]
    if torch.compiler.is_compiling():
        return spec.flatten(-2) @ irdft_matrix(n, keep, spec.dtype, spec.device)
    return torch.fft.irfft(torch.view_as_complex(spec), n=n, norm="forward")


__all__ = ["dft_matrices", "irdft_matrix", "irfft_modes", "irfft_weights", "rdft_matrix", "rfft_modes"]
