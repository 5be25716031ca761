"""Galerkin-type attention (Cao 2021): ``z = Q (K̃ᵀ diag(w) Ṽ)``.

With uniform weights this is ``Q (K̃ᵀ Ṽ) / n``.  Row i of the output is a Petrov-Galerkin
projection: ``(K̃ᵀ diag(w) Ṽ)_{ab}`` is the quadrature of ``∫ k_a(ξ) v_b(ξ) dξ`` and the result is
expanded in span{q_a}.  No softmax, no 1/sqrt(d).  Cost O(n d²), memory O(n d).  K and V are
normalized by the attention layer.  Under autocast the d x d sum ``K̃ᵀ diag(w) Ṽ`` is formed in
float32 (a sum over n points); the n-sized product ``Q (K̃ᵀ diag(w) Ṽ)`` runs in autocast's dtype.
The attention layer's fused path ([`petrov.operators.attention.fused`][]) computes the same operator
without forming Q; with two column norms, where float64 is fast, not K and V either (S from the
input's centred moments).

``causal=True``: ``z_i = q_i Σ_{j≤i} w_j k̃_j ṽ_jᵀ`` (linear attention with φ = identity and no
normalizer; see [`petrov.operators.attention.mixers.causal`][]), in chunks of ``chunk_size`` tokens.  The
column norm would use all points, so the attention layer then requires norm "layer" or None.
"""
from __future__ import annotations

from torch import nn

from ..fused import galerkin_layer
from ..kernels import apply_matrix, key_value_matrix
from . import MIXERS
from .causal import DEFAULT_CHUNK_SIZE, IdentityFeatures, causal_forward


@MIXERS.register("galerkin")
class GalerkinMixer(IdentityFeatures, nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``."""

    normalized = ("k", "v")
    # the whole layer in one pass (K, V normalized inside the product, Q folded into the output
    # projection); the attention layer takes it when the mixer is not causal
    fused_path = staticmethod(galerkin_layer)

    def __init__(self, head_dim: int, n_heads: int, causal: bool = False,
                 chunk_size: int = DEFAULT_CHUNK_SIZE):
        super().__init__()
        self.set_causal(causal, chunk_size)

    def matrix(self, k, v, pos=None, weights=None):
        """``K̃ᵀ diag(w) Ṽ``: ``(b,h,n,d)`` x2 -> ``(b,h,d,d)`` (at least float32), so that
        ``forward(q, k, v) = q @ matrix(k, v)``; the attention layer uses it to fold its output
        projection into this d x d matrix.  ``None`` when causal (no single matrix)."""
        return None if self.causal else key_value_matrix(k, v, weights)

    def forward(self, q, k, v, pos=None, weights=None):
        if self.causal:
            return causal_forward(self, q, k, v, pos, weights)
        return apply_matrix(q, self.matrix(k, v, pos, weights), v.dtype)

    def extra_repr(self) -> str:
        return f"causal={self.causal}, chunk_size={self.chunk_size}" if self.causal else ""
