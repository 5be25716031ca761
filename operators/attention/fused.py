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
backward.  ``_NormalizedOuter`` computes S from the raw projections without concatenating the
coordinates (a block matrix of four products) and keeps only the raw K, V for backward: the
normalized K̃, Ṽ (and their copies with coordinates) are recomputed there, an element-wise cost.
For two column norms (the default; not with ``recompute``, and only where float64 is fast:
``petrov.common.dtypes.fast_float64``) ``column_normalized_outer`` does better: centring removes the
projections' biases, so ``K̃ᵀ W Ṽ`` depends on x only through its centred second moments
``x_cᵀ W x_c`` (m x m) and ``x_cᵀ W pos`` (formed in float64); K, V, K̃, Ṽ are never formed, and the
layer's n-sized work is two products forward (the moments, ``x A``) and three backward, against eight
or more when K and V are formed.

Under autocast S and the small products that make A, P, c are computed in float32 (S is a sum over
the points; the moment form's moments in float64, as without autocast), ``x A`` and the projections in
autocast's dtype; the backward recomputes K̃, Ṽ under the forward's autocast state, so it
differentiates what the forward computed.  A training step of ``galerkin1d`` at the reference
Burgers sizes with column norms (n = 8192, batch 4, bfloat16 autocast; 2-core Intel Xeon) took
379-438 ms in moment form, 658-900 ms forming K and V (three alternated pairs).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from ...common.dtypes import fast_float64, upcast
from .norms import ColumnNorm, NoNorm

_NO_NORM = NoNorm()


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
    # (posᵀ W K̃)ᵀ, not K̃ᵀ W pos: a long thin product is much faster with the n x p operand first
    top = torch.cat([s, (pos_h.transpose(-1, -2) @ kw).transpose(-1, -2)], dim=-1)  # (b, h, d, e)
    bottom = torch.cat([pw @ vt, pw @ pos_h], dim=-1)  # (b, h, p, e)
    return _uniform_scale(torch.cat([top, bottom], dim=-2), kt.shape[-2], weights)


class Normalized(NamedTuple):
    """How K̃ (or Ṽ) is made: ``make(source, weights) -> (b, h, n, d)`` from ``source`` (the raw
    projection through the normalization, or the layer input through projection and normalization);
    ``params()`` lists every parameter ``make`` uses, in a fixed order."""

    make: Callable[[torch.Tensor, Optional[torch.Tensor]], torch.Tensor]
    source: torch.Tensor
    params: Callable[[], list]


def _remake(side: Normalized, source: torch.Tensor, weights) -> tuple[torch.Tensor, list]:
    """``make(source)`` recomputed with autograd from a fresh leaf: the output and its inputs (the
    leaf, then every parameter), for ``_side_grads``."""
    with torch.enable_grad():
        leaf = source.detach().requires_grad_(source.requires_grad)
        return side.make(leaf, weights), [leaf] + list(side.params())


def _side_grads(out: torch.Tensor, inputs: list, grad_out: torch.Tensor) -> list:
    """Gradients of ``<grad_out, out>`` for each of ``inputs`` (None where not wanted)."""
    grad_out = grad_out.to(out.dtype)  # under autocast the normalized side is float32, its gradient may not be
    wanted = [t for t in inputs if t.requires_grad]
    found = dict(zip(map(id, wanted), torch.autograd.grad(out, wanted, grad_out, allow_unused=True)))
    return [found.get(id(t)) for t in inputs]


class _NormalizedOuter(torch.autograd.Function):
    """``S = [K̃, pos]ᵀ diag(w) [Ṽ, pos]`` from two [`Normalized`][] sides, saving only their
    sources for backward.

    ``forward(key, value, n_key_params, weights, pos, source_k, source_v, *params_k, *params_v)``:
    the parameters are passed as inputs so that autograd returns their gradients (computed with the
    parameters as they are at backward time, as ``torch.utils.checkpoint`` does); ``pos`` and
    ``weights`` take no gradient.

    Backward, with ``G = dL/dS`` split in blocks ``G_kk (d, d), G_kp (d, p), G_pk (p, d)``:
    ``dL/dK̃ = diag(w) (Ṽ G_kkᵀ + pos G_kpᵀ)``, ``dL/dṼ = diag(w) (K̃ G_kk + pos G_pk)``, then through
    each side's ``make``, recomputed once with autograd (K̃ and Ṽ serve both the products above and
    their own backward: two normalizations per backward, not four; both sides' recomputed values are
    alive together for a moment, one ``(b, h, n, d)`` tensor more than one side at a time).
    """

    @staticmethod
    def forward(ctx, key, value, n_key_params, weights, pos, source_k, source_v, *params):
        ctx.sides = (key, value)
        ctx.save_for_backward(pos, weights, source_k, source_v)
        ctx.autocast = _autocast_state(source_k.device.type)
        with torch.no_grad():
            kt, vt = key.make(source_k, weights), value.make(source_v, weights)
            with torch.autocast(source_k.device.type, enabled=False):  # sums over the points: float32 at least
                return outer_blocks(upcast(kt), upcast(vt), pos, weights)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        # recomputed under the forward's autocast state (as torch.utils.checkpoint does)
        with torch.autocast(**ctx.autocast):
            return _NormalizedOuter._backward(ctx, grad)

    @staticmethod
    def _backward(ctx, grad):
        pos, weights, source_k, source_v = ctx.saved_tensors
        key, value = ctx.sides
        pos_h = None if pos is None else _heads_pos(pos, grad.shape[1])

        def cross(t: torch.Tensor, g_main: torch.Tensor, g_pos: torch.Tensor) -> torch.Tensor:
            out = t @ g_main
            if pos_h is not None:
                add_thin_product_(out, pos_h, g_pos)
            return out if weights is None else out.mul_(weights[:, None, :, None])

        vt, inputs_v = _remake(value, source_v, weights)
        d = vt.shape[-1]
        grad = _uniform_scale(grad, vt.shape[-2], weights)
        g_kk, g_kp, g_pk = grad[..., :d, :d], grad[..., :d, d:], grad[..., d:, :d]
        grad_kt = cross(vt.detach(), g_kk.transpose(-1, -2), g_kp.transpose(-1, -2))
        kt, inputs_k = _remake(key, source_k, weights)
        grad_vt = cross(kt.detach(), g_kk, g_pk)
        grads_k = _side_grads(kt, inputs_k, grad_kt)
        del kt, grad_kt
        grads_v = _side_grads(vt, inputs_v, grad_vt)
        return (None, None, None, None, None, grads_k[0], grads_v[0], *grads_k[1:], *grads_v[1:])


def add_thin_product_(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``out += a @ b`` in place for a small inner size p (the coordinates): ``a (..., n, p)``,
    ``b (..., p, m)``, as p broadcast rank-1 updates; a matrix product with inner size p would write
    an n x m temporary first (or, as ``baddbmm_``, copy through one)."""
    for j in range(a.shape[-1]):
        out.addcmul_(a[..., j:j + 1], b[..., j:j + 1, :])
    return out


class _CentredMoments(torch.autograd.Function):
    """The centred second moments of the layer input, in float64: ``x: (b, n, m)``, ``pos: (b, n, p)``,
    ``weights: (b, n)`` or None (uniform ``1/n``) ->

        G = x_cᵀ W x_c  (b, m, m),   P = x_cᵀ W pos  (b, m, p),   x_c = x - 1 x̄ᵀ,  x̄ = xᵀ w,

    with ``W = diag(w)``, Σ w = 1.  Backward, ``Σ = dL/dG + dL/dGᵀ``, ``μ = posᵀ w``, in x's dtype:

        dL/dx = W (x_c Σ + (pos - 1 μᵀ) dL/dPᵀ)

    (the centring's own term vanishes on ``x_c Σ``, as ``wᵀ x_c = 0``): one n-sized product, and only
    ``x`` (which the layer's output product keeps anyway) and ``x̄`` are kept.

    Why float64: a column of ``K = x W_kᵀ`` whose spread is small next to the input's (rows of ``W_k``
    that cancel on correlated channels) is, in moment form, ``w_kᵀ G w_k``, a difference of ``G``'s
    entries: its relative error is the unit roundoff times the square of that ratio, where forming K
    costs it once.  In float64 ``G`` costs one ``(m x n) (n x m)`` product, a few per cent of a step
    where float64 runs at half float32's rate (the CPU, datacenter GPUs); elsewhere the layer forms K
    and V instead (``galerkin_layer``).
    """

    @staticmethod
    def forward(ctx, x, pos, weights):
        b, n, _ = x.shape
        xc, pos64 = x.to(torch.float64, copy=True), pos.double()  # a copy even of a float64 x
        w64 = None if weights is None else weights.double()
        mean = xc.mean(dim=1) if w64 is None else (w64.expand(b, n)[:, None] @ xc).squeeze(1)
        xc.sub_(mean[:, None])  # in place: the float64 copy of x is not needed again
        pos_w = pos64 / n if w64 is None else pos64 * w64[..., None]  # (b, n, p): small
        gram = (xc if w64 is None else xc * w64[..., None]).transpose(1, 2) @ xc
        # Out of place: under torch.compile (torch 2.11) an in-place op on a tensor this forward returns
        # routes the incoming gradients to the wrong outputs (pytorch/pytorch#180642): compiled
        # galerkin1d's input gradient was 2.4e-2 off the eager one (tests/test_capture.py)
        gram = gram if w64 is not None else gram / n
        # (pos_wᵀ x_c)ᵀ, not x_cᵀ pos_w: a long thin product is much faster with the n x p operand first
        cross = (pos_w.transpose(1, 2) @ xc).transpose(1, 2)
        ctx.save_for_backward(x, mean.to(x.dtype), pos, weights, pos_w.sum(dim=1).to(x.dtype))
        return gram, cross

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_gram, grad_cross):
        x, mean, pos, weights, mu = ctx.saved_tensors
        out = (x - mean[:, None]) @ (grad_gram + grad_gram.transpose(1, 2)).to(x.dtype)
        if pos.shape[-1]:
            add_thin_product_(out, pos - mu[:, None], grad_cross.transpose(1, 2).to(x.dtype))
        return (out / x.shape[1] if weights is None else out.mul_(weights[..., None])), None, None


def centred_moments(x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor | None) -> tuple:
    """``(x_cᵀ W x_c, x_cᵀ W pos)`` in float64 (see ``_CentredMoments``): ``(b, n, m), (b, n, p) ->
    (b, m, m), (b, m, p)``; no gradient for ``pos`` and ``weights``."""
    return _CentredMoments.apply(x, pos, weights)


def column_normalized_outer(x: torch.Tensor, k_proj: nn.Linear, v_proj: nn.Linear, n_heads: int,
                            norm_k: ColumnNorm, norm_v: ColumnNorm, pos: torch.Tensor | None,
                            weights: torch.Tensor | None) -> torch.Tensor:
    """``[K̃, pos]ᵀ W [Ṽ, pos]`` for two column norms of ``K = x W_kᵀ + b_k``, ``V = x W_vᵀ + b_v``,
    from the centred moments of ``x: (b, n, m)`` alone -> ``(b, h, d + p, d + p)`` in x's dtype, float32 at
    least (a 16-bit x under autocast).

    Centring removes the biases: ``c_k = K - 1 wᵀK = x_c W_kᵀ``, so per head (``W_{k,h}: (d, m)``)

        C_h = c_kᵀ W c_v = W_{k,h} G W_{v,h}ᵀ,   s_k² = diag(W_k G W_kᵀ) + eps,   a_k = γ_k / s_k,
        S_kk = diag(a_k) C diag(a_v) + β_k β_vᵀ,   S_kp = diag(a_k) W_k P + β_k μᵀ,
        S_pk = (diag(a_v) W_v P + β_v μᵀ)ᵀ,       S_pp = posᵀ W pos,

    with ``G, P`` from [`centred_moments`][] (float64) and ``μ = posᵀ w``.  The only n-sized work is
    ``G`` and ``P`` (one product, and one in backward); K, V, K̃, Ṽ are never formed, and everything
    after the moments is m x m algebra, in float64, that autograd differentiates.  The projections'
    biases get their exact gradient, zero (they still take part, so that data-parallel training sees
    every parameter used).
    """
    b, n, m = x.shape
    p = 0 if pos is None else pos.shape[-1]
    if pos is None:
        pos = x.new_zeros(b, n, 0)
    gram, cross = centred_moments(x, pos, weights)  # float64
    with torch.no_grad():
        pos_w = pos.double() / n if weights is None else pos.double() * weights.double()[..., None]
        mu, s_pp = pos_w.sum(dim=1), pos.double().transpose(1, 2) @ pos_w  # (b, p), (b, p, p)

    def side(proj: nn.Linear, norm: ColumnNorm):
        w = proj.weight.double()  # (h d, m)
        gw = gram @ w.t()  # (b, m, h d)
        var = (gw * w.t()).sum(dim=1).clamp_min(0)  # diag(W G Wᵀ): >= 0, up to rounding
        a = norm.weight.double() * torch.rsqrt(var.view(b, n_heads, -1) + norm.eps)  # (b, h, d)
        return gw, a, (w @ cross).view(b, n_heads, w.shape[0] // n_heads, p)  # W P: (b, h, d, p)

    gw_k, a_k, p_k = side(k_proj, norm_k)
    gw_v, a_v, p_v = side(v_proj, norm_v)
    d = a_k.shape[-1]
    c = torch.einsum("hdm,bmhe->bhde", k_proj.weight.double().view(n_heads, d, m), gw_v.view(b, m, n_heads, d))
    beta_k, beta_v = norm_k.bias.double(), norm_v.bias.double()
    s_kk = a_k[..., :, None] * c * a_v[..., None, :] + beta_k[:, :, None] * beta_v[:, None, :]
    biases = [t for t in (k_proj.bias, v_proj.bias) if t is not None]
    if biases:
        s_kk = s_kk + 0.0 * sum(t.sum() for t in biases)
    s_kp = a_k[..., None] * p_k + beta_k[..., None] * mu[:, None, None, :]
    s_pk = (p_v * a_v[..., None] + beta_v[..., None] * mu[:, None, None, :]).transpose(-1, -2)
    s_pp = s_pp[:, None].expand(b, n_heads, p, p)
    return torch.cat([torch.cat([s_kk, s_kp], dim=-1), torch.cat([s_pk, s_pp], dim=-1)], dim=-2).to(upcast(x).dtype)


def _plain_outer(layer: nn.Module, norm_k: nn.Module, norm_v: nn.Module, k: torch.Tensor, v: torch.Tensor,
                 pos: torch.Tensor | None, weights: torch.Tensor | None) -> torch.Tensor:
    """What ``normalized_outer`` computes from the raw projections ``k, v: (b, n, h d)``, with plain
    autograd (for ``torch.compile``)."""
    kt, vt = (norm(layer._split_heads(t), weights) for norm, t in ((norm_k, k), (norm_v, v)))
    with torch.autocast(k.device.type, enabled=False):  # sums over the points: float32 at least
        return outer_blocks(upcast(kt), upcast(vt), pos, weights)


def _autocast_state(device_type: str) -> dict:
    """``torch.autocast`` arguments that restore the current autocast state on ``device_type``."""
    return dict(device_type=device_type, dtype=torch.get_autocast_dtype(device_type),
                enabled=torch.is_autocast_enabled(device_type))


def normalized_outer(key: Normalized, value: Normalized, pos: torch.Tensor | None,
                     weights: torch.Tensor | None) -> torch.Tensor:
    """``[K̃, pos]ᵀ diag(w) [Ṽ, pos]`` (each ``(b, h, n, d)``) -> ``(b, h, d + p, d + p)``, keeping only
    the sources of K̃ and Ṽ for backward and recomputing the rest there (see ``_NormalizedOuter``)."""
    params_k = list(key.params())
    return _NormalizedOuter.apply(key, value, len(params_k), weights, pos, key.source, value.source,
                                  *params_k, *value.params())


def folded_output(x: torch.Tensor, pos: torch.Tensor | None, s: torch.Tensor, q_proj: nn.Linear,
                  out_proj: nn.Linear) -> torch.Tensor:
    """``out_proj(concat_h [Q_h, pos] S_h)`` with ``Q = q_proj(x)`` never formed: ``x A + pos P + c``.

    ``x: (b, n, m)``, ``pos: (b, n, p)`` or None, ``s: (b, h, e, e)`` -> ``(b, n, m)``.
    """
    b, h, e, _ = s.shape
    m = x.shape[-1]
    d = e - (0 if pos is None else pos.shape[-1])
    with torch.autocast(x.device.type, enabled=False):  # small products: in s's dtype (float32 at least)
        w_out = out_proj.weight.view(-1, h, e).permute(1, 2, 0).to(s.dtype)  # (h, e, m_out)
        mat = s @ w_out  # (b, h, e, m_out)
        mat_q = mat[:, :, :d]  # (b, h, d, m_out)
        a = torch.einsum("hdi,bhdo->bio", q_proj.weight.view(h, d, m).to(s.dtype), mat_q)  # (b, m, m_out)
        c = torch.einsum("hd,bhdo->bo", q_proj.bias.view(h, d).to(s.dtype), mat_q) + out_proj.bias.to(s.dtype)
    if not torch.is_autocast_enabled(x.device.type):
        a, c = a.to(x.dtype), c.to(x.dtype)
    out = torch.baddbmm(c.unsqueeze(1), x, a)  # the n-sized product: in autocast's dtype under autocast
    if pos is not None:
        # baddbmm keeps its operands for backward, not its output: pos P can be added in place
        out = add_thin_product_(out, pos, mat[:, :, d:].sum(dim=1))  # P: (b, p, m_out)
    return out


def galerkin_layer(layer: nn.Module, x: torch.Tensor, pos: torch.Tensor | None, weights: torch.Tensor | None,
                   recompute: bool = False) -> torch.Tensor:
    """Steps 1-5 of a Galerkin attention layer (``petrov.operators.attention.Attention``) in one pass:
    K, V normalized inside one autograd Function that keeps only the raw projections for backward
    (only ``x`` with ``recompute``: the projections are then recomputed too), the query projection
    folded into the output one.  Two column norms (norms declaring ``closed_form = True``) are not
    formed at all: S comes from the centred moments of ``x`` (``column_normalized_outer``, also under
    autocast; ``recompute`` and devices whose float64 is slow -- consumer GPUs, see
    [`fast_float64`][petrov.common.dtypes.fast_float64] -- take the generic path).  The same operator as
    the unfused layer.

    The fused path of [`GalerkinMixer`][petrov.operators.attention.mixers.galerkin.GalerkinMixer] (its
    ``fused_path``); ``x: (b, n, d_model)`` -> ``(b, n, d_model)``.
    """
    norm_k, norm_v = (layer.norms[name] if name in layer.norms else _NO_NORM for name in "kv")
    pos_or_none = pos if layer.pos_dim else None
    closed_form = getattr(norm_k, "closed_form", False) and getattr(norm_v, "closed_form", False)
    if closed_form and not recompute and fast_float64(x.device):  # float64: 32-64x float32's cost on consumer GPUs
        with torch.autocast(x.device.type, enabled=False):  # float64 moments, float32 S (at least)
            s = column_normalized_outer(x, layer.k_proj, layer.v_proj, layer.n_heads, norm_k, norm_v,
                                        pos_or_none, weights)
        return folded_output(x, pos_or_none, s, layer.q_proj, layer.out_proj)
    if torch.compiler.is_compiling():
        # _NormalizedOuter differentiates its recomputed sides with autograd.grad inside its backward,
        # which dynamo cannot trace: plain autograd here (the same operator), under checkpoints that keep
        # for backward what _NormalizedOuter keeps -- the raw K, V (only x with ``recompute``).  Left to
        # itself the compiler keeps K̃, Ṽ besides K, V: a training step of galerkin1d at the reference
        # Burgers configuration (n = 8192, batch 4; CPU allocator, AMD EPYC) peaked at 0.82x the
        # reference's memory compiled, 0.67x with this checkpoint, 0.64x eager
        def outer(k, v):
            return _plain_outer(layer, norm_k, norm_v, k, v, pos_or_none, weights)

        def layer_output(x):
            s = checkpoint(outer, layer.k_proj(x), layer.v_proj(x), use_reentrant=False)
            return folded_output(x, pos_or_none, s, layer.q_proj, layer.out_proj)

        return checkpoint(layer_output, x, use_reentrant=False) if recompute else layer_output(x)
    sides = []
    for norm, proj in ((norm_k, layer.k_proj), (norm_v, layer.v_proj)):
        if recompute:  # source x: the projection is recomputed too
            sides.append(Normalized(lambda x, w, norm=norm, proj=proj: norm(layer._split_heads(proj(x)), w), x,
                                    lambda norm=norm, proj=proj: [*norm.parameters(), *proj.parameters()]))
        else:
            sides.append(Normalized(norm, layer._split_heads(proj(x)), norm.parameters))
    s = normalized_outer(*sides, pos_or_none, weights)
    return folded_output(x, pos_or_none, s, layer.q_proj, layer.out_proj)
