"""Shared pieces of the kernels that are linear in the number of points n.

Quadrature weights ``w: (b, n)`` sum to 1 per batch; ``None`` means uniform ``1/n``.  All sums
over points are quadratures, so the eps of a normalizer means the same thing at every resolution.

Under ``torch.autocast`` these sums, the feature maps and the normalizers are computed in float32
([`full_precision`][]): a bfloat16 sum over thousands of points and a bfloat16 division by a
small normalizer lose most of their digits.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from ...common.dtypes import upcast  # noqa: F401  (the mixers import it from here)


@contextlib.contextmanager
def full_precision(x: torch.Tensor) -> Iterator[None]:
    """Disable autocast on ``x``'s device inside the block (inputs must be upcast explicitly)."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        yield


def weighted_mean(a: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``sum_j w_j a_j``: ``(b, h, n, f) -> (b, h, f)``."""
    if weights is None:
        return a.mean(dim=-2)
    return torch.einsum("bhnf,bn->bhf", a, weights.to(a.dtype))


def autocast_dtype(x: torch.Tensor) -> torch.dtype | None:
    """Autocast's 16-bit dtype on ``x``'s device if autocast is on there, else None."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


class _OuterSum(torch.autograd.Function):
    """``aᵀ c`` over the points of ``(m, n, f), (m, n, e) -> (m, f, e)``, with gradients
    ``c gᵀ`` and ``a g`` computed in the points-major layout of ``a`` and ``c``.

    (``torch.bmm(a.transpose(1, 2), c)`` gives the same numbers, but autograd returns the
    gradient of ``a`` as the transpose of an ``(f, n)`` product, so everything upstream of it
    then runs on transposed memory.)

    ``grad_dtype`` (autocast's dtype when the sum was taken under autocast, else None): the two
    gradient products are point-wise (n rows of a small f x e product, no sum over the points), so
    they run in that dtype as autocast runs the backward of its own products; the sum stays in
    the dtype of ``a`` and ``c``.
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor, c: torch.Tensor, grad_dtype: torch.dtype | None = None) -> torch.Tensor:
        ctx.save_for_backward(a, c)
        ctx.grad_dtype = grad_dtype
        return torch.bmm(a.transpose(1, 2), c)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, c = ctx.saved_tensors
        low = ctx.grad_dtype or grad.dtype
        g = grad.to(low)
        grad_a = torch.bmm(c.to(low), g.transpose(1, 2)).to(a.dtype) if ctx.needs_input_grad[0] else None
        grad_c = torch.bmm(a.to(low), g).to(c.dtype) if ctx.needs_input_grad[1] else None
        return grad_a, grad_c, None


def weighted_outer(a: torch.Tensor, c: torch.Tensor, weights: torch.Tensor | None,
                   grad_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``sum_j w_j a_j c_jᵀ``: ``(b, h, n, f), (b, h, n, e) -> (b, h, f, e)`` (the gradient's
    point-wise products in ``grad_dtype`` if given, see ``_OuterSum``)."""
    n, f, e = a.shape[-2], a.shape[-1], c.shape[-1]
    if weights is not None:
        a = a * weights[:, None, :, None].to(a.dtype)
    out = _OuterSum.apply(a.reshape(-1, n, f), c.reshape(-1, n, e), grad_dtype)
    out = out.view(*a.shape[:-2], f, e)
    return out / n if weights is None else out


def key_value_matrix(k: torch.Tensor, v: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``Σ_j w_j k_j v_jᵀ``: ``(b, h, n, d)`` x2 -> ``(b, h, d, e)``, summed in float32 at least, the
    gradient's point-wise products in autocast's dtype (the matrix of the kernels linear in q)."""
    grad_dtype = autocast_dtype(k)
    with full_precision(k):
        return weighted_outer(upcast(k), upcast(v), weights, grad_dtype)


def apply_matrix(q: torch.Tensor, kv: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``q @ kv`` returned in ``dtype``: the n-sized product, in autocast's dtype under autocast (as
    the projections), else ``kv``'s."""
    return (upcast(q) @ kv).to(dtype)


def normalized_kernel_attention(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    weights: torch.Tensor | None,
    eps: float,
) -> torch.Tensor:
    """Linear-cost kernel attention with a normalizer.

    ``z_i = phi_qᵢᵀ (Σ_j w_j phi_kⱼ vⱼᵀ) / (phi_qᵢᵀ Σ_j w_j phi_kⱼ + eps)``

    ``phi_q, phi_k: (b, h, n, f)`` nonnegative features, ``v: (b, h, n, e)`` -> ``(b, h, n, e)``.
    Cost O(n f e).  Call inside [`full_precision`][] with upcast inputs.
    """
    kv = weighted_outer(phi_k, v, weights)  # (b, h, f, e)
    k_sum = weighted_mean(phi_k, weights)  # (b, h, f)
    numerator = phi_q @ kv  # (b, h, n, e)
    denominator = (phi_q @ k_sum.unsqueeze(-1)) + eps  # (b, h, n, 1)
    return numerator / denominator


def check_eps(eps: float) -> float:
    """eps must be a finite number >= 0."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0 or eps == float("inf"):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def feature_map_attention(mixer, q, k, v, weights) -> torch.Tensor:
    """The non-causal forward of a mixer with positive feature maps ``mixer.features(q, k,
    weights=weights)`` (the weights let a mixer leave out the keys of weight 0, e.g. from a
    stabilizer) and a normalizer ``mixer.eps`` (linear, Performer): [`normalized_kernel_attention`][]
    in float32 at least, returned in ``v``'s dtype."""
    dtype = v.dtype
    with full_precision(q):
        phi_q, phi_k = mixer.features(upcast(q), upcast(k), weights=weights)
        return normalized_kernel_attention(phi_q, phi_k, upcast(v), weights, mixer.eps).to(dtype)
