"""cosFormer (Qin et al. 2022) on physical coordinates.

    z_i = Σ_j w_j c(x_i, x_j) relu(q_i)·relu(k_j) v_j / (Σ_j w_j c(x_i, x_j) relu(q_i)·relu(k_j) + eps)
    c(x, y) = Π_a cos(π/2 · (x_a − y_a))         (a runs over the p coordinate axes)

The original re-weights by the token distance ``(i − j)/M``; on a grid that index is a coordinate,
so the point coordinates (mapped from ``domain`` to [0, 1], hence ``c >= 0``) are used and the
kernel does not change with the resolution.  Each factor splits as
``cos a cos b + sin a sin b``, so ``c(x, y) = Σ_t f_t(x) f_t(y)`` over the ``2^p`` products
``f_t`` of one cos or sin per axis; with features ``f_t(x_i) relu(q_i)`` the attention is a
linear-cost kernel attention of width ``2^p d``: O(n 2^p d²).  Needs ``pos``.

``causal=True``: the sums run over the tokens ``j ≤ i`` in point index order
([`petrov.operators.attention.mixers.causal`][]), while the cos re-weighting keeps using the tokens'
physical coordinates (not their index): both factors of ``c`` are point-wise, so the causal and
recurrent forms apply unchanged.

Points of weight 0 (padding of point sets of different sizes) may hold any finite coordinates:
they are not checked against ``domain`` and are clamped into it (their keys are multiplied by 0;
their own outputs are ignored), so the output on the other points does not depend on them.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ...checks import checks_values, raise_first
from ..kernels import check_eps, full_precision, normalized_kernel_attention, upcast
from . import MIXERS
from .causal import DEFAULT_CHUNK_SIZE, causal_forward, check_causal, check_chunk_size


def cos_sin_terms(x: torch.Tensor) -> torch.Tensor:
    """``(b, n, p)`` coordinates in [0, 1] -> ``(b, n, 2^p)`` products of one cos/sin per axis.

    ``Σ_t out[..., i, t] out[..., j, t] = Π_a cos(π/2 (x_ia − x_ja))``.
    """
    angle = (math.pi / 2) * x
    cos, sin = torch.cos(angle), torch.sin(angle)
    terms = torch.ones_like(x[..., :1])
    for axis in range(x.shape[-1]):
        terms = torch.cat([terms * cos[..., axis:axis + 1], terms * sin[..., axis:axis + 1]], dim=-1)
    return terms


def expand_features(features: torch.Tensor, terms: torch.Tensor) -> torch.Tensor:
    """``(b, h, n, d), (b, n, T) -> (b, h, n, T d)``: every term times every feature."""
    out = terms[:, None, :, :, None] * features[:, :, :, None, :]
    return out.flatten(-2)


@MIXERS.register("cosformer")
class CosformerMixer(nn.Module):
    """``forward(q, k, v, pos, weights=None)``: ``(b,h,n,d)`` x3, ``pos: (b,n,p)`` -> ``(b,h,n,d)``.

    - ``domain``: ``(low, high)``, the box the coordinates live in (every axis); points outside raise
      (where [`checks_values`][petrov.operators.checks.checks_values] says: not inside a compiled or
      captured step).
    """

    normalized: tuple[str, ...] = ()
    requires_pos = True
    supports_causal = True

    def __init__(self, head_dim: int, n_heads: int, eps: float = 1e-6,
                 domain: tuple[float, float] = (0.0, 1.0), causal: bool = False,
                 chunk_size: int = DEFAULT_CHUNK_SIZE):
        super().__init__()
        self.eps = check_eps(eps)
        self.causal, self.chunk_size = check_causal(causal), check_chunk_size(chunk_size)
        try:
            low, high = (float(v) for v in domain)
        except (TypeError, ValueError):
            raise ValueError(f"domain must be a pair (low, high), got {domain!r}") from None
        if not (math.isfinite(low) and math.isfinite(high) and high > low):
            raise ValueError(f"domain must satisfy low < high (finite), got {domain!r}")
        self.domain = (low, high)

    def unit_coordinates(self, pos: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """Map ``pos`` from ``domain`` to [0, 1] (clamped onto it); raise if a point of positive weight
        (any point when ``weights`` is None) lies outside, where ``petrov.operators.checks.checks_values``
        says to look at values."""
        low, high = self.domain
        x = (pos - low) / (high - low)
        if checks_values(pos):
            tol = 1e-6
            outside = (x < -tol) | (x > 1 + tol)
            if weights is not None:
                outside = outside & (weights > 0)[..., None]
            raise_first([(outside.any(), lambda: f"cosformer: coordinates outside the domain {self.domain} (range "
                                                 f"[{float(pos.min()):.4g}, {float(pos.max()):.4g}]); pass "
                                                 "domain=(low, high)")])
        return x.clamp(0.0, 1.0)

    @property
    def causal_eps(self) -> float:
        return self.eps

    def feature_width(self, width: int, pos_dim: int) -> int:
        """Width of the feature maps for q, k of ``width`` (one copy per cos/sin product term)."""
        return 2**pos_dim * width

    def features(self, q, k, pos, weights=None):
        """``(b,h,n,d)`` x2, ``pos: (b,n,p)`` -> ``f_t(x_i) relu(q_i)``, ``f_t(x_j) relu(k_j)``: ``(b,h,n,2^p d)``
        (``weights``: only the points of positive weight must lie in ``domain``)."""
        if pos is None:
            raise ValueError("cosformer needs the point coordinates pos: (b, n, p); "
                             "build the attention layer with pos_dim > 0")
        terms = cos_sin_terms(upcast(self.unit_coordinates(pos, weights)))
        return (expand_features(torch.relu(q), terms.to(q.dtype)),
                expand_features(torch.relu(k), terms.to(k.dtype)))

    def forward(self, q, k, v, pos=None, weights=None):
        if self.causal:
            return causal_forward(self, q, k, v, pos, weights)
        dtype = v.dtype
        with full_precision(q):
            phi_q, phi_k = self.features(upcast(q), upcast(k), pos, weights)
            return normalized_kernel_attention(phi_q, phi_k, upcast(v), weights, self.eps).to(dtype)

    def extra_repr(self) -> str:
        causal = f", causal=True, chunk_size={self.chunk_size}" if self.causal else ""
        return f"eps={self.eps}, domain={self.domain}{causal}"
