"""Softmax attention through ``torch.nn.functional.scaled_dot_product_attention``.

    z_i = Σ_j w_j exp(s q_i·k_j) v_j / Σ_j w_j exp(s q_i·k_j),      s = 1/sqrt(d) by default

i.e. the softmax of the logits ``s q_i·k_j + log w_j``.  This is the quadrature reading: the
softmax is a ratio of two integrals over ξ, and the weights enter both.  With uniform weights
``log w_j = -log n`` is a constant that cancels, so no mask is passed (and SDPA can use its fused
kernels); points with weight 0 are excluded.  Cost O(n² d).

``causal=True`` (a reference for the causal linear mixers): the sums run over ``j ≤ i`` — SDPA's
``is_causal`` without weights; with weights an explicit ``(n, n)`` additive mask (log weights plus
``-inf`` above the diagonal).  A first token of weight 0 is an error (its attention is 0/0; checked
where ``petrov.operators.checks.checks_values`` says: not inside a compiled or captured step).  There
is no recurrent step (its state, the keys and values seen so far, grows with the sequence).
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ...checks import checks_values, raise_first
from . import MIXERS
from .causal import check_causal


@MIXERS.register("softmax")
class SoftmaxMixer(nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``.

    - ``scale``: the logit scale ``s`` (``None``: ``1/sqrt(d)`` with d the width of q).
    """

    normalized: tuple[str, ...] = ()
    supports_causal = True

    def __init__(self, head_dim: int, n_heads: int, scale: float | None = None, causal: bool = False):
        super().__init__()
        self.causal = check_causal(causal)
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                                  or not math.isfinite(scale) or scale <= 0):
            raise ValueError(f"scale must be a positive number or None, got {scale!r}")
        self.scale = None if scale is None else float(scale)

    def forward(self, q, k, v, pos=None, weights=None):
        mask = None
        if weights is not None:
            # log(n w_j) differs from log w_j by a constant the softmax ignores, but stays O(1),
            # so it keeps its digits when SDPA wants the mask in bfloat16 under autocast.
            # log 0 = -inf removes zero-weight points; (b, 1, 1, n) broadcasts over heads, queries
            log_w = torch.log(weights * weights.shape[-1])
            mask = log_w.to(q.dtype)[:, None, None, :]
            if self.causal:
                if checks_values(weights):
                    raise_first([((weights[:, 0] == 0).any(),
                                  lambda: "causal softmax: the first token has weight 0, so its attention is 0/0; "
                                          "give every prefix a positive weight")])
                n = q.shape[-2]
                future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
                mask = mask.masked_fill(future, float("-inf"))
        causal = self.causal and mask is None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale, is_causal=causal)

    def extra_repr(self) -> str:
        return f"scale={self.scale}" + (", causal=True" if self.causal else "")
