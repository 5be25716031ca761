"""Per-head normalizations of the projected Q, K, V ("the tilde" of Cao 2021), registered by name.

Both act on one projected matrix ``x: (b, h, n, d)`` with quadrature ``weights: (b, n)`` summing
to 1 per batch (``None`` means uniform ``1/n``) and carry a learnable affine map per head and
channel, ``gamma, beta: (h, d)`` (initialized to 1 and 0):

- ``"column"`` ([`ColumnNorm`][]): every channel ``c`` of every head is treated as a function
  sampled at the n points and normalized with the quadrature weights,

      mu_c    = sum_j w_j x_jc
      s_c     = sqrt(sum_j w_j (x_jc - mu_c)^2 + eps)
      out_ic  = gamma_c (x_ic - mu_c) / s_c + beta_c,

  i.e. zero mean and unit discrete L2(Omega) norm (|Omega| = 1).  Means and norms are quadratures,
  so the result does not depend on how finely the functions are sampled.
- ``"layer"`` ([`HeadLayerNorm`][]): LayerNorm over the d channels at each point, separately per
  head (what the reference code ran); the weights are not used.

Both compute in float32 when the input is float16/bfloat16 (a 16-bit sum over thousands of points,
then a subtraction of the mean, keeps few digits).  Under autocast the float32 result is returned
as is (what follows is a float32 sum over the points or an autocast matrix product, which rounds
it where it needs to); without autocast it is cast back to the input's dtype.
``build_norm(None, ...)`` gives an identity.  Adding a norm: one class with ``@NORMS.register``.

Class attribute ``pointwise``: True when a point's output depends on that point alone (so the norm
can be used by causal attention, which must not look at later points): "layer" and None are,
"column" is not (its statistics are sums over all points).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ...common.dtypes import to_caller_dtype, upcast
from ...common.registry import Registry
from .kernels import check_eps

NORMS: Registry = Registry("norm")


class _HeadAffine(nn.Module):
    """Learnable per-head, per-channel scale and shift ``(h, d)``."""

    def __init__(self, n_heads: int, head_dim: int, eps: float):
        super().__init__()
        self.eps = check_eps(eps)  # a finite number >= 0 (NaN would make every output NaN)
        self.weight = nn.Parameter(torch.ones(n_heads, head_dim))
        self.bias = nn.Parameter(torch.zeros(n_heads, head_dim))

    def affine(self, x: torch.Tensor) -> torch.Tensor:
        # (h, d) -> (h, 1, d) broadcasts over (b, h, n, d)
        return x * self.weight.unsqueeze(-2) + self.bias.unsqueeze(-2)

    def extra_repr(self) -> str:
        h, d = self.weight.shape
        return f"n_heads={h}, head_dim={d}, eps={self.eps}"


@NORMS.register("column")
class ColumnNorm(_HeadAffine):
    """Normalize each channel over the points with quadrature weights; ``(b,h,n,d) -> (b,h,n,d)``."""

    pointwise = False
    # the fused Galerkin path forms K̃ᵀ W Ṽ of two column norms from the centred moments of the
    # layer input, K and V never formed (petrov.operators.attention.fused)
    closed_form = True

    def __init__(self, n_heads: int, head_dim: int, eps: float = 1e-5):
        super().__init__(n_heads, head_dim, eps)

    def forward(self, x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        dtype = x.dtype
        x = upcast(x)  # sums over many points and the centring lose all digits in 16 bits
        if weights is None:
            mean = x.mean(dim=-2, keepdim=True)
            centered = x - mean
            var = centered.square().mean(dim=-2, keepdim=True)
        else:
            w = weights[:, None, :, None].to(x.dtype)  # (b, 1, n, 1)
            mean = (w * x).sum(dim=-2, keepdim=True)
            centered = x - mean
            var = (w * centered.square()).sum(dim=-2, keepdim=True)
        return to_caller_dtype(self.affine(centered * torch.rsqrt(var + self.eps)), dtype)


@NORMS.register("layer")
class HeadLayerNorm(_HeadAffine):
    """LayerNorm over the ``d`` channels at each point, per head; ``(b,h,n,d) -> (b,h,n,d)``."""

    pointwise = True

    def __init__(self, n_heads: int, head_dim: int, eps: float = 1e-5):
        super().__init__(n_heads, head_dim, eps)

    def forward(self, x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        # Eager: one fused layer_norm (affine included) per head: autograd then keeps only the input
        # and the per-point mean and 1/std, not the normalized matrix as well (a separate affine
        # step would save it for the gradient of gamma).
        # (squeeze/unbind rather than indexing: their backward is a view / one stack, not a
        # zero-filled tensor per head)
        # Compiled: one layer_norm over every head and the affine broadcast over the points, which
        # inductor fuses and whose saved tensors it chooses itself. The per-head calls, compiled, are
        # kernels per head: the trainer's compiled step of burgers-gpu took 728 generated kernels instead
        # of 300, darcy-inverse-gpu's 714 instead of 368 (inductor on a CPU, benchmarks/gpu.py --part step).
        d, dtype = x.shape[-1], x.dtype
        # statistics and the normalized values in float32 (module doc)
        x, weight, bias = upcast(x), upcast(self.weight), upcast(self.bias)
        if torch.compiler.is_compiling():
            out = F.layer_norm(x, (d,), None, None, self.eps) * weight.unsqueeze(-2) + bias.unsqueeze(-2)
        elif x.shape[-3] == 1:
            out = F.layer_norm(x.squeeze(-3), (d,), weight[0], bias[0], self.eps).unsqueeze(-3)
        else:
            out = torch.stack([F.layer_norm(t, (d,), weight[i], bias[i], self.eps)
                               for i, t in enumerate(x.unbind(-3))], dim=-3)
        return to_caller_dtype(out, dtype)


class NoNorm(nn.Module):
    """Identity with the norm call signature (``norm=None``)."""

    pointwise = True

    def forward(self, x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        return x


def build_norm(name: str | None, n_heads: int, head_dim: int, eps: float = 1e-5) -> nn.Module:
    """The norm registered as ``name`` (``None`` or ``"none"`` -> identity; TOML has no null);
    unknown names raise ``KeyError``."""
    if name is None or name == "none":
        return NoNorm()
    if not isinstance(name, str) or name not in NORMS:
        raise KeyError(NORMS.unknown_message(name) + ", or None/'none' for no normalization")
    return NORMS.get(name)(n_heads, head_dim, eps=eps)
