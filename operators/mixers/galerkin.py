"""Galerkin-type attention (Cao 2021): ``z = Q (K̃ᵀ diag(w) Ṽ)``.

With uniform weights this is ``Q (K̃ᵀ Ṽ) / n``.  Row i of the output is a Petrov-Galerkin
projection: ``(K̃ᵀ diag(w) Ṽ)_{ab}`` is the quadrature of ``∫ k_a(ξ) v_b(ξ) dξ`` and the result is
expanded in span{q_a}.  No softmax, no 1/sqrt(d).  Cost O(n d²), memory O(n d).  K and V are
normalized by the attention layer.  The d x d sum is formed in float32 under autocast.
"""
from __future__ import annotations

from torch import nn

from . import MIXERS
from ._kernels import full_precision, upcast, weighted_outer


@MIXERS.register("galerkin")
class GalerkinMixer(nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``."""

    normalized = ("k", "v")

    def __init__(self, head_dim: int, n_heads: int):
        super().__init__()

    def matrix(self, k, v, pos=None, weights=None):
        """``K̃ᵀ diag(w) Ṽ``: ``(b,h,n,d)`` x2 -> ``(b,h,d,d)`` (at least float32), so that
        ``forward(q, k, v) = q @ matrix(k, v)``; the attention layer uses it to fold its output
        projection into this d x d matrix."""
        with full_precision(k):
            return weighted_outer(upcast(k), upcast(v), weights)

    def forward(self, q, k, v, pos=None, weights=None):
        kv = self.matrix(k, v, pos, weights)  # (b, h, d, d)
        with full_precision(q):
            return (upcast(q) @ kv).to(v.dtype)
