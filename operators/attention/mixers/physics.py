"""Physics attention (Transolver, Wu et al., ICML 2024): attention among G learned slices of the domain.

Per head, with ``k_i`` the slice logits' input and ``v_i`` the features of point i (width d):

    s_ij  = softmax_j((W_s k_i + b_s) / τ)                      soft assignment of point i to slice j
    z_j   = Σ_i w_i s_ij v_i / (Σ_i w_i s_ij + eps)             slice token: a weighted average
    z'    = softmax(Q Kᵀ / √d) V,   Q, K, V = z W_q, z W_k, z W_v  softmax attention among the G tokens
    out_i = Σ_j s_ij z'_j                                       de-slicing

``w`` are the layer's quadrature weights (uniform ``1/n`` when None).  The token is the ratio of two
integrals ``∫ s_j v / ∫ s_j``, so the mixer is a discretization of one operator: the same field on any
point set, weighted by its quadrature, gives tokens that converge to the same values (first order with
uniform weights on a left-endpoint grid, the quadrature's own order otherwise), and it works on meshes
(a point of weight 2w counts as two copies of weight w; points of weight 0, e.g. padding, have no
effect on the tokens and hence on the other points).  Without weights the sums are the reference's
plain sums over the points (thuml/Transolver ``Physics_Attention_1D``): on a non-uniform point set
they are not quadratures, and a region sampled densely weighs more than its area; pass weights there.

Which of q, k, v carry what: the assignment ``s_ij`` is a property of point i alone (no query-key
pair), and the paper uses the same ``s`` to slice and to de-slice.  ``k`` carries the slice logits
(the projection the reference calls ``in_project_x``: how a point addresses the tokens) and ``v`` the
sliced features (``in_project_fx``: what it contributes); there is no query at the points, so the
class attribute ``inputs = ("k", "v")`` tells the attention layer not to project one (``q`` is
ignored if given).  Nothing is normalized by the layer (``normalized = ()``), as in the reference.

Parameters, shared by the heads as in the reference: ``W_s: (G, d)``, ``b_s: (G,)`` (orthogonal
initialization, as the reference's module), the token maps ``W_q, W_k, W_v: (d, d)`` without bias
(PyTorch's default initialization); per head the temperature ``τ`` (initial value ``temperature``),
clamped to ``[0.1, 5]`` where used (the reference's grid variants clamp there; an unclamped τ can
reach 0 or change sign).  The token attention has no dropout of its own: the layer's dropout acts on
the mixer output like for every mixer.

``eps`` keeps a slice whose mass underflows to 0 (large logits over a small τ) from giving 0/0.  It is
added to the integral ``Σ_i w_i s_ij`` (weights summing to 1), so it means the same at every
resolution; the reference adds 1e-5 to the plain sum ``Σ_i s_ij``, which grows with n.

Cost O(n G d) per head (assignment, slicing, de-slicing) + O(G² d) (token attention); memory O(n G).
Under autocast the slice logits (a point-wise product) run in autocast's dtype; the softmax over the
slices, the two sums over the points (one product, [`slice_sums`][]) and the token attention run in
float32; the de-slicing product (a sum over the G slices, not over the points) runs in autocast's
dtype, like the n-sized products of the other mixers.

No causal form (``supports_causal`` is False): a token is an average over all points, and the
de-slicing hands it to every point, so a point would see later ones through every slice.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..kernels import _OuterSum, autocast_dtype, check_eps, full_precision, upcast
from . import MIXERS

TEMPERATURE_RANGE = (0.1, 5.0)  # τ is clamped to this where it is used


def check_temperature(temperature: float) -> float:
    low, high = TEMPERATURE_RANGE
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not low <= temperature <= high:
        raise ValueError(f"temperature must be a number in [{low}, {high}] (τ is clamped there), got {temperature!r}")
    return float(temperature)


def slice_sums(s: torch.Tensor, v: torch.Tensor, weights: torch.Tensor | None,
               grad_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``[Σ_i w_i s_ij v_i, Σ_i w_i s_ij]``: ``(b, h, n, G), (b, h, n, d) -> (b, h, G, d + 1)`` (uniform
    ``w = 1/n`` for None), both sums in one product ``sᵀ [w v, w]``: the weights scale the d-wide
    features, not the G-wide assignment.  ``grad_dtype``: see ``_OuterSum``."""
    b, h, n, g = s.shape
    if weights is None:
        c = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
    else:
        w = weights[:, None, :, None].to(v.dtype)
        c = torch.cat([v * w, w.expand(b, h, n, 1)], dim=-1)
    out = _OuterSum.apply(s.reshape(b * h, n, g), c.reshape(b * h, n, -1), grad_dtype).view(b, h, g, -1)
    return out / n if weights is None else out


@MIXERS.register("physics")
class PhysicsMixer(nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``k, v: (b, h, n, d)`` -> ``(b, h, n, d)`` (``q`` unused).

    ``slice_weights(k)`` gives the assignment ``s: (b, h, n, G)``.

    - ``n_slices``: slices G per head (the tokens the attention runs among).
    - ``temperature``: the initial temperature τ of the slice assignment (per head, learned).
    - ``eps``: keeps a slice whose mass underflows to 0 from giving 0/0.
    """

    normalized: tuple[str, ...] = ()
    inputs = ("k", "v")  # no query at the points: the layer does not project one
    supports_causal = False

    def __init__(self, head_dim: int, n_heads: int, n_slices: int = 32, temperature: float = 0.5,
                 eps: float = 1e-5):
        super().__init__()
        for name, value in (("head_dim", head_dim), ("n_heads", n_heads), ("n_slices", n_slices)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"physics attention: {name} must be an integer >= 1, got {value!r}")
        self.head_dim, self.n_heads, self.n_slices = head_dim, n_heads, n_slices
        self.eps = check_eps(eps)
        self.slice = nn.Linear(head_dim, n_slices)
        nn.init.orthogonal_(self.slice.weight)
        self.temperature = nn.Parameter(torch.full((n_heads,), check_temperature(temperature)))
        self.to_q = nn.Linear(head_dim, head_dim, bias=False)
        self.to_k = nn.Linear(head_dim, head_dim, bias=False)
        self.to_v = nn.Linear(head_dim, head_dim, bias=False)

    def slice_weights(self, k: torch.Tensor) -> torch.Tensor:
        """``s = softmax((W_s k + b_s) / τ)`` over the slices: ``(b, h, n, d) -> (b, h, n, G)``, float32 at least."""
        tau = self.temperature.clamp(*TEMPERATURE_RANGE)[:, None, None]
        # 1/τ folded into per-head copies of the small (G, d) projection: no pass over (b, h, n, G)
        weight = (self.slice.weight / tau).transpose(-1, -2)  # (h, d, G)
        bias = self.slice.bias / tau  # (h, 1, G)
        logits = torch.matmul(k, weight.to(k.dtype)) + bias.to(k.dtype)  # point-wise: autocast's dtype there
        with full_precision(k):
            return torch.softmax(upcast(logits), dim=-1)

    def tokens(self, s: torch.Tensor, v: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
        """``z_j = Σ_i w_i s_ij v_i / (Σ_i w_i s_ij + eps)``: ``(b, h, n, G), (b, h, n, d) -> (b, h, G, d)``,
        float32 at least (the gradient's point-wise products in autocast's dtype, as Galerkin's)."""
        with full_precision(v):
            sums = slice_sums(s, upcast(v), weights, autocast_dtype(v))  # (b, h, G, d + 1)
            return sums[..., :-1] / (sums[..., -1:] + self.eps)

    def forward(self, q, k, v, pos=None, weights=None):
        self._check(k, v, weights)
        s = self.slice_weights(k)
        z = self.tokens(s, v, weights)
        with full_precision(z):  # G tokens: cheap, and a softmax wants the digits
            z = F.scaled_dot_product_attention(self.to_q(z), self.to_k(z), self.to_v(z),
                                               scale=1.0 / math.sqrt(self.head_dim))
        if torch.is_autocast_enabled(v.device.type):
            return s @ z  # the n-sized product in autocast's dtype (no sum over the points)
        return (s @ z).to(v.dtype)

    def _check(self, k, v, weights) -> None:
        if k is None or v is None or k.dim() != 4 or k.shape[:3] != v.shape[:3]:
            shapes = [None if t is None else tuple(t.shape) for t in (k, v)]
            raise ValueError(f"physics attention expects k, v of shape (b, h, n, d) with equal b, h, n; got {shapes}")
        if k.shape[1] != self.n_heads or k.shape[-1] != self.head_dim or v.shape[-1] != self.head_dim:
            raise ValueError(f"physics attention built for {self.n_heads} heads of width {self.head_dim}, got k "
                             f"{tuple(k.shape)} and v {tuple(v.shape)}")
        if weights is not None and (weights.dim() != 2 or weights.shape[-1] != k.shape[2]):
            raise ValueError(f"weights must have shape (b, {k.shape[2]}), got {tuple(weights.shape)}")

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, n_heads={self.n_heads}, n_slices={self.n_slices}, eps={self.eps}"
