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
    """``S = [K̃, pos]ᵀ diag(w) [Ṽ, pos]`` with ``(K̃, Ṽ) = make(*sources, weights)``, saving only the
    sources for backward.

    ``forward(make, params, n_sources, weights, pos, *sources_then_params)``: ``make`` maps the sources
    to the normalized ``K̃, Ṽ: (b, h, n, d)`` (the raw projections through the normalizations, or the
    layer input through projections and normalizations); ``params()`` lists every parameter ``make``
    uses, in a fixed order, also passed as inputs (so that autograd returns their gradients, computed
    with the parameters as they are at backward time, as ``torch.utils.checkpoint`` does); ``pos``
    and ``weights`` take no gradient.

    Backward, with ``G = dL/dS`` split in blocks ``G_kk (d, d), G_kp (d, p), G_pk (p, d)``:
    ``dL/dK̃ = diag(w) (Ṽ G_kkᵀ + pos G_kpᵀ)``, ``dL/dṼ = diag(w) (K̃ G_kk + pos G_pk)``, then through
    ``make``, recomputed from the sources with autograd.
    """

    @staticmethod
    def forward(ctx, make, params, n_sources, weights, pos, *tensors):
        sources = tensors[:n_sources]
        ctx.make, ctx.params = make, params
        ctx.save_for_backward(pos, weights, *sources)
        with torch.no_grad():
            return outer_blocks(*make(*sources, weights), pos, weights)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        pos, weights, *sources = ctx.saved_tensors
        params = ctx.params()
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(t.requires_grad) for t in sources]
            kt, vt = ctx.make(*leaves, weights)
        d = kt.shape[-1]
        grad = _uniform_scale(grad, kt.shape[-2], weights)
        g_kk = grad[..., :d, :d]
        grad_kt = vt.detach() @ g_kk.transpose(-1, -2)
        grad_vt = kt.detach() @ g_kk
        if pos is not None:
            pos_h = _heads_pos(pos, kt.shape[1])
            grad_kt += pos_h @ grad[..., :d, d:].transpose(-1, -2)
            grad_vt += pos_h @ grad[..., d:, :d]
        if weights is not None:
            grad_kt.mul_(weights[:, None, :, None])
            grad_vt.mul_(weights[:, None, :, None])
        wanted = [t for t in leaves + list(params) if t.requires_grad]
        found = dict(zip(map(id, wanted), torch.autograd.grad((kt, vt), wanted, (grad_kt, grad_vt),
                                                              allow_unused=True)))
        return (None, None, None, None, None, *[found.get(id(t)) for t in leaves + list(params)])


def normalized_outer(make, sources: tuple[torch.Tensor, ...], params, pos: torch.Tensor | None,
                     weights: torch.Tensor | None) -> torch.Tensor:
    """``[K̃, pos]ᵀ diag(w) [Ṽ, pos]`` with ``(K̃, Ṽ) = make(*sources, weights)`` (each ``(b, h, n, d)``)
    -> ``(b, h, d + p, d + p)``, keeping only ``sources`` for backward and recomputing ``make`` there
    (see :class:`_NormalizedOuter`); ``params()``: the parameters ``make`` uses, in a fixed order."""
    return _NormalizedOuter.apply(make, params, len(sources), weights, pos, *sources, *params())


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
