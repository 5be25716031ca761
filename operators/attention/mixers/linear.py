"""Linear attention (Katharopoulos et al. 2020) with feature map ``φ(x) = elu(x) + 1``.

    z_i = φ(q_i)ᵀ Σ_j w_j φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_j w_j φ(k_j) + eps)

Cost O(n d²).  Features, sums and normalizer in float32 under autocast.  Since the weights sum to
1, eps is relative to an average (not a sum) and keeps its meaning at every resolution.

``causal=True``: the sums run over ``j ≤ i`` ([`petrov.operators.attention.mixers.causal`][]), in chunks of
``chunk_size`` tokens; a recurrent step is available for inference.
"""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from ..kernels import check_eps, feature_map_attention
from . import MIXERS
from .causal import DEFAULT_CHUNK_SIZE, causal_forward, check_causal, check_chunk_size


def elu_feature(x):
    """``elu(x) + 1 > 0``."""
    return F.elu(x) + 1.0


@MIXERS.register("linear")
class LinearMixer(nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``."""

    normalized: tuple[str, ...] = ()
    supports_causal = True

    def __init__(self, head_dim: int, n_heads: int, eps: float = 1e-6, causal: bool = False,
                 chunk_size: int = DEFAULT_CHUNK_SIZE):
        super().__init__()
        self.eps = check_eps(eps)
        self.causal, self.chunk_size = check_causal(causal), check_chunk_size(chunk_size)

    @property
    def causal_eps(self) -> float:
        return self.eps

    def feature_width(self, width: int, pos_dim: int) -> int:
        """Width of the feature maps for q, k of ``width`` (φ = elu + 1, point-wise)."""
        return width

    def features(self, q, k, pos=None, weights=None):
        """``φ(q), φ(k)`` with ``φ = elu + 1`` (point-wise: the weights are not needed)."""
        return elu_feature(q), elu_feature(k)

    def forward(self, q, k, v, pos=None, weights=None):
        if self.causal:
            return causal_forward(self, q, k, v, pos, weights)
        return feature_map_attention(self, q, k, v, weights)

    def extra_repr(self) -> str:
        causal = f", causal=True, chunk_size={self.chunk_size}" if self.causal else ""
        return f"eps={self.eps}{causal}"
