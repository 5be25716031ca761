"""Fourier-type attention (Cao 2021): ``z = (Q̃ diag(w) K̃ᵀ) V``.

With uniform weights this is ``(Q̃ K̃ᵀ) V / n``: the kernel ``κ(x, ξ) = q(x)·k(ξ)`` evaluated on
the points, integrated against v with the quadrature weights.  No softmax, no 1/sqrt(d).  Q and K
are normalized by the attention layer.

By default the n x n kernel matrix is formed (cost O(n² d), memory O(n²) per head), which is what
"Fourier-type" denotes.  Without softmax the product is associative, so ``associative=True``
computes the identical result as ``Q̃ (K̃ᵀ diag(w) V)`` in O(n d²).

Under autocast the dense kernel's two n-sized products run in autocast's dtype (bfloat16 matrix
products accumulate in float32 on the CPU and round the result); the associative form sums
``K̃ᵀ diag(w) V`` in float32.

``causal=True``: ``z_i = Σ_{j≤i} w_j (q̃_i·k̃_j) v_j``, the masked kernel; this is causal linear
attention with φ = identity and no normalizer, computed in O(n d²) by the chunked form of
[`petrov.operators.attention.mixers.causal`][] whatever ``associative`` says (same numbers as the masked
n x n product).  The layer then requires norm "layer" or None (the column norm uses all points).
"""
from __future__ import annotations

from torch import nn

from ..kernels import apply_matrix, key_value_matrix
from . import MIXERS
from .causal import DEFAULT_CHUNK_SIZE, IdentityFeatures, causal_forward


@MIXERS.register("fourier")
class FourierMixer(IdentityFeatures, nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``.

    - ``associative``: compute ``Q̃ (K̃ᵀ diag(w) V)`` (cost ``O(n d²)``, the same numbers up to
      rounding) instead of the dense kernel ``(Q̃ diag(w) K̃ᵀ) V`` (``O(n² d)``).
    """

    normalized = ("q", "k")

    def __init__(self, head_dim: int, n_heads: int, associative: bool = False, causal: bool = False,
                 chunk_size: int = DEFAULT_CHUNK_SIZE):
        super().__init__()
        if not isinstance(associative, bool):
            raise ValueError(f"associative must be True or False, got {associative!r}")
        self.associative = associative
        self.set_causal(causal, chunk_size)

    def matrix(self, k, v, pos=None, weights=None):
        """With ``associative=True``: ``K̃ᵀ diag(w) V`` ``(b,h,d,d)`` (at least float32), so that
        ``forward(q, k, v) = q @ matrix(k, v)``; ``None`` for the dense kernel."""
        return key_value_matrix(k, v, weights) if self.associative and not self.causal else None

    def forward(self, q, k, v, pos=None, weights=None):
        if self.causal:
            return causal_forward(self, q, k, v, pos, weights)
        if self.associative:
            return apply_matrix(q, self.matrix(k, v, pos, weights), v.dtype)
        # the weights (or 1/n) scale K before the product: an n x d scaling instead of a second
        # n x n matrix
        if weights is None:
            k = k / k.shape[-2]
        else:
            k = k * weights[:, None, :, None].to(k.dtype)
        kernel = q @ k.transpose(-2, -1)  # (b, h, n, n)
        return kernel @ v

    def extra_repr(self) -> str:
        causal = f", causal=True, chunk_size={self.chunk_size}" if self.causal else ""
        return f"associative={self.associative}{causal}"
