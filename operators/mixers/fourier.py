"""Fourier-type attention (Cao 2021): ``z = (Q̃ diag(w) K̃ᵀ) V``.

With uniform weights this is ``(Q̃ K̃ᵀ) V / n``: the kernel ``κ(x, ξ) = q(x)·k(ξ)`` evaluated on
the points, integrated against v with the quadrature weights.  No softmax, no 1/sqrt(d).  Q and K
are normalized by the attention layer.

By default the n x n kernel matrix is formed (cost O(n² d), memory O(n²) per head), which is what
"Fourier-type" denotes.  Without softmax the product is associative, so ``associative=True``
computes the identical result as ``Q̃ (K̃ᵀ diag(w) V)`` in O(n d²).
"""
from __future__ import annotations

from torch import nn

from . import MIXERS
from ._kernels import full_precision, upcast, weighted_outer


@MIXERS.register("fourier")
class FourierMixer(nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``."""

    normalized = ("q", "k")

    def __init__(self, head_dim: int, n_heads: int, associative: bool = False):
        super().__init__()
        if not isinstance(associative, bool):
            raise ValueError(f"associative must be True or False, got {associative!r}")
        self.associative = associative

    def forward(self, q, k, v, pos=None, weights=None):
        if self.associative:
            dtype = v.dtype
            with full_precision(q):
                return (upcast(q) @ weighted_outer(upcast(k), upcast(v), weights)).to(dtype)
        n = k.shape[-2]
        if weights is None:
            kernel = (q @ k.transpose(-2, -1)) / n  # (b, h, n, n)
        else:
            kernel = q @ (k * weights[:, None, :, None].to(k.dtype)).transpose(-2, -1)
        return kernel @ v

    def extra_repr(self) -> str:
        return f"associative={self.associative}"
