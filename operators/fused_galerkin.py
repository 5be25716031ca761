"""Galerkin attention with its query and output projections folded into one d_model x d_model matrix,
and K, V normalized inside one autograd Function that recomputes the normalization in backward.

For one layer (``x: (b, n, m)``, m = d_model, h heads of width d, coordinates ``pos: (b, n, p)``,
e = d + p, quadrature weights ``w`` or uniform ``1/n``):

    K̃ = N_k(x W_kᵀ + b_k),  Ṽ = N_v(x W_vᵀ + b_v)                        (b, h, n, d)
    S_h = [K̃_h, pos]ᵀ diag(w) [Ṽ_h, pos]                                  (b, h, e, e)
    M_h = S_h W_{o,h}ᵀ = [M_h^q ; M_h^p]                                  (b, h, e, m): rows d | p
    out = Σ_h [Q_h, pos] M_h + b_o   with  Q_h = x W_{q,h}ᵀ + b_{q,h}
        = x A + pos P + c,   A = Σ_h W_{q,h}ᵀ M_h^q (b, m, m),  P = Σ_h M_h^p (b, p, m),
                             c = Σ_h b_{q,h} M_h^q + b_o (b, m)

(the same operator as the unfused layer, products reassociated).  Q is never formed: the query
projection and the product with S cost one n-sized product ``x A`` instead of two, in forward and in
backward.  :class:`_NormalizedOuter` computes S from the raw projections without concatenating the
coordinates (a block matrix of four products) and keeps only the raw K, V for backward: the
normalized K̃, Ṽ (and their copies with coordinates) are recomputed there, an element-wise cost.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable


def _weighted(a: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``w_j a_j`` for ``a: (b, h, n, f)`` (a new tensor); ``a`` itself for uniform weights, whose
    ``1/n`` is applied to the small products instead."""
    return a if weights is None else a * weights[:, None, :, None]


def _uniform_scale(s: torch.Tensor, n: int, weights: torch.Tensor | None) -> torch.Tensor:
    """``s / n`` for uniform weights (``s`` small: d x d), ``s`` otherwise."""
    return s / n if weights is None else s


def _heads_pos(pos: torch.Tensor, h: int) -> torch.Tensor:
    """``(b, n, p) -> (b, h, n, p)`` (a broadcast view)."""
    return pos.unsqueeze(1).expand(pos.shape[0], h, *pos.shape[1:])


def outer_blocks(kt: torch.Tensor, vt: torch.Tensor, pos: torch.Tensor | None,
                 weights: torch.Tensor | None) -> torch.Tensor:
    """``[K̃, pos]ᵀ diag(w) [Ṽ, pos]`` as a block matrix, without concatenating the coordinates.

    ``kt, vt: (b, h, n, d)``, ``pos: (b, n, p)`` or None -> ``(b, h, d + p, d + p)``.
    """
    kw = _weighted(kt, weights)
    s = kw.transpose(-1, -2) @ vt  # (b, h, d, d)
    if pos is None:
        return _uniform_scale(s, kt.shape[-2], weights)
    pos_h = _heads_pos(pos, kt.shape[1])
    pw = _weighted(pos_h, weights).transpose(-1, -2)  # (b, h, p, n): small
    top = torch.cat([s, kw.transpose(-1, -2) @ pos_h], dim=-1)  # (b, h, d, e)
    bottom = torch.cat([pw @ vt, pw @ pos_h], dim=-1)  # (b, h, p, e)
    return _uniform_scale(torch.cat([top, bottom], dim=-2), kt.shape[-2], weights)


class _NormalizedOuter(torch.autograd.Function):
    """``S = [N_k(k), pos]ᵀ diag(w) [N_v(v), pos]`` saving only ``k, v`` for backward.

    ``forward(norm_k, norm_v, weights, pos, k, v, *params)``: ``k, v: (b, h, n, d)`` raw projections,
    ``norm_*(t, weights)`` the layer's normalizations, ``params`` their parameters (passed so that
    autograd returns their gradients); ``pos`` and ``weights`` take no gradient.

    Backward, with ``G = dL/dS`` split in blocks ``G_kk (d, d), G_kp (d, p), G_pk (p, d)``:
    ``dL/dK̃ = diag(w) (Ṽ G_kkᵀ + pos G_kpᵀ)``, ``dL/dṼ = diag(w) (K̃ G_kk + pos G_pk)``, then through
    the normalizations, recomputed from ``k, v`` with autograd.
    """

    @staticmethod
    def forward(ctx, norm_k, norm_v, weights, pos, k, v, *params):
        ctx.norms = (norm_k, norm_v)
        ctx.save_for_backward(k, v, pos, weights)
        with torch.no_grad():
            return outer_blocks(norm_k(k, weights), norm_v(v, weights), pos, weights)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        k, v, pos, weights = ctx.saved_tensors
        norm_k, norm_v = ctx.norms
        d = k.shape[-1]
        params = [p for norm in ctx.norms for p in norm.parameters()]
        with torch.enable_grad():
            k_, v_ = k.detach().requires_grad_(), v.detach().requires_grad_()
            kt, vt = norm_k(k_, weights), norm_v(v_, weights)
        grad = _uniform_scale(grad, k.shape[-2], weights)
        g_kk = grad[..., :d, :d]
        grad_kt = vt.detach() @ g_kk.transpose(-1, -2)
        grad_vt = kt.detach() @ g_kk
        if pos is not None:
            pos_h = _heads_pos(pos, k.shape[1])
            grad_kt += pos_h @ grad[..., :d, d:].transpose(-1, -2)
            grad_vt += pos_h @ grad[..., d:, :d]
        if weights is not None:
            grad_kt.mul_(weights[:, None, :, None])
            grad_vt.mul_(weights[:, None, :, None])
        inputs = [k_, v_] + [p for p in params if p.requires_grad]
        grads = iter(torch.autograd.grad((kt, vt), inputs, (grad_kt, grad_vt), allow_unused=True))
        grad_k, grad_v = next(grads), next(grads)
        grad_params = [next(grads) if p.requires_grad else None for p in params]
        return (None, None, None, None, grad_k, grad_v, *grad_params)


def normalized_outer(k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor | None, weights: torch.Tensor | None,
                     norm_k: nn.Module, norm_v: nn.Module) -> torch.Tensor:
    """``[N_k(k), pos]ᵀ diag(w) [N_v(v), pos]``: ``(b, h, n, d)`` x2 -> ``(b, h, d + p, d + p)``,
    keeping only ``k, v`` for backward (see :class:`_NormalizedOuter`)."""
    params = [p for norm in (norm_k, norm_v) for p in norm.parameters()]
    return _NormalizedOuter.apply(norm_k, norm_v, weights, pos, k, v, *params)


def folded_output(x: torch.Tensor, pos: torch.Tensor | None, s: torch.Tensor, q_proj: nn.Linear,
                  out_proj: nn.Linear) -> torch.Tensor:
    """``out_proj(concat_h [Q_h, pos] S_h)`` with ``Q = q_proj(x)`` never formed: ``x A + pos P + c``.

    ``x: (b, n, m)``, ``pos: (b, n, p)`` or None, ``s: (b, h, e, e)`` -> ``(b, n, m)``.
    """
    b, h, e, _ = s.shape
    m = x.shape[-1]
    d = e - (0 if pos is None else pos.shape[-1])
    w_out = out_proj.weight.view(-1, h, e).permute(1, 2, 0)  # (h, e, m_out)
    mat = s @ w_out  # (b, h, e, m_out)
    mat_q = mat[:, :, :d]  # (b, h, d, m_out)
    a = torch.einsum("hdi,bhdo->bio", q_proj.weight.view(h, d, m), mat_q)  # (b, m, m_out)
    c = torch.einsum("hd,bhdo->bo", q_proj.bias.view(h, d), mat_q) + out_proj.bias
    out = torch.baddbmm(c.unsqueeze(1), x, a)
    if pos is not None:
        # pos P as p rank-1 updates in place (baddbmm keeps its operands for backward, not its
        # output; a baddbmm_ with inner size p would go through a temporary copy)
        p_mat = mat[:, :, d:].sum(dim=1)  # (b, p, m_out)
        for j in range(pos.shape[-1]):
            out = out.addcmul_(pos[..., j:j + 1], p_mat[:, j:j + 1])
    return out
