"""Causal (autoregressive) linear attention: the parallel chunked form and the recurrent step.

Along the token axis (the point index order), with point-wise feature maps ``φ_q, φ_k`` and
quadrature weights ``w_j`` (``None``: uniform ``1/n``),

    S_i = Σ_{j≤i} w_j φ_k(k_j) v_jᵀ        (f x e)        s_i = Σ_{j≤i} w_j φ_k(k_j)      (f)
    z_i = φ_q(q_i)ᵀ S_i / (φ_q(q_i)ᵀ s_i + eps)          (eps=None: no normalizer, z_i = φ_q(q_i)ᵀ S_i)

(Katharopoulos et al. 2020).  The weights are those of the whole sequence (summing to 1 over all n
points), so ``S_n`` is the non-causal quadrature; for short prefixes ``s_i`` is small and eps
weighs relatively more there.

- Parallel form (training), [`causal_kernel_attention`][]: the tokens are split into chunks of
  ``c``; inside a chunk the masked ``c x c`` product ``tril(φ_Q φ_Kᵀ) V``, across chunks the state
  at each chunk start (an exclusive prefix sum of the per-chunk ``φ_Kᵀ V``).  Memory
  O(n c + (n/c) f e) per head, never the O(n f e) of one state per token.
- Recurrent form (inference), [`causal_step`][]: ``S_t = S_{t-1} + w_t φ_k(k_t) v_tᵀ``, a
  constant-size [`CausalState`][] (``f x e`` plus the ``f`` normalizer sum per head).

A mixer supports ``causal=True`` by the class attribute ``supports_causal = True``; the linear-cost
ones also define ``features(q, k, pos) -> (φ_q, φ_k)`` applied point by point (so one token can be
featurized alone), ``feature_width(width, pos_dim)`` (the width f of φ for q, k of ``width``) and
``causal_eps`` (``None`` for no normalizer).  Under autocast everything here runs in float32.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch.nn import functional as F

from ....common.dtypes import LOW_PRECISION
from ..kernels import full_precision, upcast

DEFAULT_CHUNK_SIZE = 64


class CausalState(NamedTuple):
    """Recurrent state after t tokens: ``kv = S_t: (b, h, f, e)`` and ``k_sum = s_t: (b, h, f)``."""

    kv: torch.Tensor
    k_sum: torch.Tensor


def check_chunk_size(chunk_size: int) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    return chunk_size


def check_causal(causal: bool) -> bool:
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    return causal


def _weighted_keys(phi_k: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``w_j φ_k(k_j)``: the weights (or 1/n) folded into the key features."""
    if weights is None:
        return phi_k / phi_k.shape[-2]
    return phi_k * weights[:, None, :, None].to(phi_k.dtype)


def _exclusive_cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``out_t = Σ_{s<t} x_s`` along ``dim`` (a shifted inclusive sum, no subtraction)."""
    total = torch.cumsum(x, dim=dim)
    return torch.cat([torch.zeros_like(total.narrow(dim, 0, 1)), total.narrow(dim, 0, x.shape[dim] - 1)], dim=dim)


def causal_kernel_attention(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    weights: torch.Tensor | None,
    eps: float | None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> torch.Tensor:
    """Parallel causal form: ``phi_q, phi_k: (b, h, n, f)``, ``v: (b, h, n, e)`` -> ``(b, h, n, e)``.

    ``z_i = φq_iᵀ S_i / (φq_iᵀ s_i + eps)`` (module doc), computed chunk by chunk; ``n`` need not be
    a multiple of ``chunk_size`` (the tail is zero-padded: zero keys add nothing, padded queries
    are dropped).  Call inside [`full_precision`][] with upcast inputs.
    """
    b, h, n, f = phi_q.shape
    e = v.shape[-1]
    c = min(chunk_size, n)
    n_chunks = -(-n // c)
    pad = n_chunks * c - n
    wk = _weighted_keys(phi_k, weights)
    if pad:
        phi_q, wk, v = (F.pad(t, (0, 0, 0, pad)) for t in (phi_q, wk, v))
    qc, kc, vc = (t.reshape(b, h, n_chunks, c, t.shape[-1]) for t in (phi_q, wk, v))
    mask = torch.ones(c, c, dtype=torch.bool, device=qc.device).tril()
    scores = (qc @ kc.transpose(-2, -1)).masked_fill(~mask, 0.0)  # (b, h, N, c, c), j <= i only
    kv_before = _exclusive_cumsum(kc.transpose(-2, -1) @ vc, dim=2)  # (b, h, N, f, e): S at chunk starts
    numerator = scores @ vc + qc @ kv_before
    if eps is not None:
        k_before = _exclusive_cumsum(kc.sum(dim=-2), dim=2)  # (b, h, N, f)
        denominator = scores.sum(dim=-1, keepdim=True) + qc @ k_before.unsqueeze(-1) + eps
        numerator = numerator / denominator
    return numerator.reshape(b, h, n_chunks * c, e)[:, :, :n]


def init_causal_state(batch: int, n_heads: int, n_features: int, width: int,
                      dtype: torch.dtype = torch.float32, device=None) -> CausalState:
    """The empty state (no token seen): zeros ``(batch, n_heads, n_features, width)`` and ``(.., n_features)``."""
    dtype = torch.float32 if dtype in LOW_PRECISION else dtype  # sums in float32 at least
    return CausalState(torch.zeros(batch, n_heads, n_features, width, dtype=dtype, device=device),
                       torch.zeros(batch, n_heads, n_features, dtype=dtype, device=device))


def causal_step(
    state: CausalState,
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    weight: torch.Tensor | float,
    eps: float | None,
) -> tuple[torch.Tensor, CausalState]:
    """One token: ``phi_q, phi_k: (b, h, f)``, ``v: (b, h, e)``, its weight ``w_t`` (a number or
    ``(b,)``) -> ``(z_t: (b, h, e), new state)`` with ``S_t = S_{t-1} + w_t φk vᵀ`` (module doc).

    Call inside [`full_precision`][] with upcast inputs.  The state is not modified in place.
    """
    if state.kv.shape[:3] != phi_k.shape or state.kv.shape[-1] != v.shape[-1]:
        raise ValueError(f"state of shape {tuple(state.kv.shape)} does not fit features "
                         f"{tuple(phi_k.shape)} and values {tuple(v.shape)}; build it with init_state")
    if isinstance(weight, torch.Tensor):
        w = weight.to(phi_k.dtype)
        wk = phi_k * (w[:, None, None] if w.ndim else w)
    else:  # a number multiplies as it is (a tensor made of it would be a host-to-device copy)
        wk = phi_k * weight
    kv = state.kv + wk.unsqueeze(-1) * v.unsqueeze(-2)
    k_sum = state.k_sum + wk
    z = (phi_q.unsqueeze(-2) @ kv).squeeze(-2)
    if eps is not None:
        z = z / ((phi_q * k_sum).sum(dim=-1, keepdim=True) + eps)
    return z, CausalState(kv, k_sum)


# --- what a mixer calls ----------------------------------------------------------------------------


def causal_forward(mixer, q, k, v, pos, weights) -> torch.Tensor:
    """``mixer``'s causal parallel form: its ``features``, ``causal_eps`` and ``chunk_size``."""
    dtype = v.dtype
    with full_precision(q):
        phi_q, phi_k = mixer.features(upcast(q), upcast(k), pos)
        out = causal_kernel_attention(phi_q, phi_k, upcast(v), weights, mixer.causal_eps, mixer.chunk_size)
    return out.to(dtype)


def mixer_state(mixer, batch: int, n_heads: int, width: int, pos_dim: int,
                dtype: torch.dtype = torch.float32, device=None) -> CausalState:
    """Empty state for ``mixer`` on q, k, v of ``width`` (coordinates included) and ``pos_dim`` coordinates."""
    return init_causal_state(batch, n_heads, mixer.feature_width(width, pos_dim), width, dtype, device)


def mixer_step(mixer, state: CausalState, q, k, v, pos, weight) -> tuple[torch.Tensor, CausalState]:
    """``mixer``'s recurrent step for one token: ``q, k, v: (b, h, e)``, ``pos: (b, p)`` or None."""
    dtype = v.dtype
    with full_precision(q):
        pos = None if pos is None else pos[:, None, :]
        phi_q, phi_k = mixer.features(upcast(q)[:, :, None], upcast(k)[:, :, None], pos)
        z, state = causal_step(state, phi_q[:, :, 0], phi_k[:, :, 0], upcast(v), weight, mixer.causal_eps)
    return z.to(dtype), state


def identity_feature_width(mixer, width: int, pos_dim: int) -> int:
    """``feature_width`` of the mixers whose feature map is the identity (Galerkin, Fourier)."""
    return width


def identity_features(mixer, q, k, pos=None):
    """``features`` of the mixers whose feature map is the identity: φ(q), φ(k) = q, k."""
    return q, k


class IdentityFeatures:
    """The causal protocol of the kernels with the identity as feature map and no normalizer (Galerkin,
    Fourier): ``supports_causal``, ``causal_eps = None``, ``features``, ``feature_width``, and
    ``set_causal`` for their ``causal`` / ``chunk_size`` options."""

    supports_causal = True
    causal_eps = None  # no normalizer
    feature_width = identity_feature_width
    features = identity_features

    def set_causal(self, causal: bool, chunk_size: int) -> None:
        self.causal, self.chunk_size = check_causal(causal), check_chunk_size(chunk_size)
