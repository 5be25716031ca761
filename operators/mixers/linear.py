"""Linear attention (Katharopoulos et al. 2020) with feature map ``φ(x) = elu(x) + 1``.

    z_i = φ(q_i)ᵀ Σ_j w_j φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_j w_j φ(k_j) + eps)

Cost O(n d²).  Features, sums and normalizer in float32 under autocast.  Since the weights sum to
1, eps is relative to an average (not a sum) and keeps its meaning at every resolution.
"""
from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from . import MIXERS
from ._kernels import check_eps, full_precision, normalized_kernel_attention, upcast


def elu_feature(x):
    """``elu(x) + 1 > 0``."""
    return F.elu(x) + 1.0


@MIXERS.register("linear")
class LinearMixer(nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``."""

    normalized: tuple[str, ...] = ()

    def __init__(self, head_dim: int, n_heads: int, eps: float = 1e-6):
        super().__init__()
        self.eps = check_eps(eps)

    def forward(self, q, k, v, pos=None, weights=None):
        dtype = v.dtype
        with full_precision(q):
            phi_q, phi_k = elu_feature(upcast(q)), elu_feature(upcast(k))
            return normalized_kernel_attention(phi_q, phi_k, upcast(v), weights, self.eps).to(dtype)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"
