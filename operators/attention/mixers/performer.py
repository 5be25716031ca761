"""FAVOR+ (Choromanski et al. 2021): softmax attention estimated with positive random features.

The softmax kernel ``exp(q·k/√d)`` equals ``E_ω[φ(x)·φ(y)]`` with ``x = q/d^{1/4}``, ``y = k/d^{1/4}``,
``ω ~ N(0, I_d)`` and

    φ(x) = m^{-1/2} [exp(ω_r·x − |x|²/2)]_{r=1..m}      (positive, so the normalizer is > 0).

Attention is then ``z_i = φ(q_i)ᵀ Σ_j w_j φ(k_j) v_jᵀ / (φ(q_i)ᵀ Σ_j w_j φ(k_j) + eps)``, O(n m d).

- Orthogonal features (``ortho=True``): the rows of ω come in blocks of d mutually orthogonal
  directions (QR of a Gaussian d x d matrix), each row rescaled to a chi_d-distributed norm so its
  marginal law stays N(0, I_d); this lowers the estimator's variance.  ``ortho=False``: i.i.d. rows.
- Stabilizer: before the exponential, each query row subtracts its own max over the features and
  the keys subtract one max per (batch, head); both factors cancel between numerator and
  denominator, so they only prevent overflow.  ``eps`` is added to the stabilized denominator,
  where the largest query feature of a row and the largest key feature of a head are ``m^{-1/2}``.
  Keys of weight 0 (padding of point sets of different sizes) take no part: their features are 0
  and the key max runs over the keys of positive weight, so the output on the other points is the
  same whatever values the padding holds.
- Randomness: the features are a buffer (saved with the model, so a loaded model reproduces its
  outputs).  Draw number t is made by a ``torch.Generator`` seeded from ``(seed, t)``, so two
  layers built with the same seed agree.  In training mode the features are redrawn every
  ``redraw_interval`` forward calls (0 = never); in eval they are frozen.  ``seed=None`` takes a
  seed from torch's global generator (reproducible under ``torch.manual_seed``).  Counting and
  redrawing are host work (the count is kept on the host as well as in the ``calls`` buffer, so
  counting reads nothing back): a step compiled by ``torch.compile`` or captured in a CUDA graph
  leaves them out, and a loop that runs such a step calls ``advance_feature_draws`` on the model
  once per training step, outside it.
- Under autocast the projections, exponentials, sums and normalizer are computed in float32.
- ``causal=True`` ([`petrov.operators.attention.mixers.causal`][]): the per-(batch, head) key max would look
  at later tokens, so the keys subtract instead a constant that does not depend on the data:
  ``ω_r·x − |x|²/2 ≤ |ω_r|²/2``, so ``shift = max(0, max_r |ω_r|²/2 − KEY_HEADROOM)`` keeps every key
  exponent below ``KEY_HEADROOM`` (no float32 overflow) and is 0 for the usual head widths.  It
  cancels like the max; eps is scaled by ``exp(−shift)`` so that it means the same as without it.
  The per-row query max is point-wise and stays.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ...checks import capturing
from ..kernels import check_eps, feature_map_attention, upcast
from . import MIXERS
from .causal import DEFAULT_CHUNK_SIZE, causal_forward, check_causal, check_chunk_size

KEY_HEADROOM = 60.0  # causal keys: exponents stay below this (exp(60) ~ 1e26, far from float32's 3e38)


def seeded_generator(seed: int, draw: int) -> torch.Generator:
    """A CPU generator for draw number ``draw`` of ``seed`` (independent streams via SeedSequence)."""
    state = np.random.SeedSequence([int(seed), int(draw)]).generate_state(2, dtype=np.uint32)
    generator = torch.Generator(device="cpu")
    generator.manual_seed(int(state[0]) << 32 | int(state[1]))
    return generator


def draw_omega(n_features: int, dim: int, generator: torch.Generator, ortho: bool = True) -> torch.Tensor:
    """Random projection rows ``ω: (n_features, dim)`` in float64 on the CPU.

    ``ortho``: blocks of ``dim`` orthonormal rows (Haar-distributed via QR with the sign fix),
    each row rescaled to the norm of an independent ``N(0, I_dim)`` vector (chi_dim law).
    """
    if not ortho:
        return torch.randn(n_features, dim, generator=generator, dtype=torch.float64)
    blocks = []
    for _ in range(math.ceil(n_features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(gaussian)
        # sign fix: makes Q Haar-distributed (QR alone is biased by LAPACK's sign convention)
        q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
        blocks.append(q.T)
    rows = torch.cat(blocks)[:n_features]
    norms = torch.randn(n_features, dim, generator=generator, dtype=torch.float64).norm(dim=1)
    return rows * norms.unsqueeze(1)


def key_shift(omega: torch.Tensor) -> torch.Tensor:
    """The causal keys' data-independent stabilizer ``max(0, max_r |ω_r|²/2 − KEY_HEADROOM)``: a 0-d
    float64 tensor on ω's device (a tensor, not a number: reading it would wait for the device)."""
    return (omega.double().square().sum(dim=1).max() / 2 - KEY_HEADROOM).clamp_min(0.0)


def favor_features(x: torch.Tensor, omega: torch.Tensor, stabilize: str | float | None = None,
                   keep: torch.Tensor | None = None) -> torch.Tensor:
    """``φ(x) = m^{-1/2} exp(ωx − |x|²/2)``: ``(b, h, n, d) -> (b, h, n, m)``.

    ``x`` is already scaled by ``d^{-1/4}``.  ``stabilize``: ``"row"`` subtracts the max over the
    features of each point (queries), ``"head"`` one max per (b, h) (keys), a number or a 0-d tensor
    subtracts that constant (causal keys, [`key_shift`][]), ``None`` nothing (exact unstabilized features, for
    tests).  The subtracted maxima are constants for autograd.  ``keep: (b, n)`` bool: the points
    not kept get features 0 and stay out of the ``"head"`` max (keys of weight 0).
    """
    logits = x @ omega.transpose(0, 1).to(x.dtype) - x.square().sum(dim=-1, keepdim=True) / 2
    if keep is not None:
        # -inf before the exponential: feature 0 and gradient 0 (an inf feature masked after the
        # exponential would give 0 * inf = NaN in backward)
        logits = logits.masked_fill(~keep[:, None, :, None], float("-inf"))
    if isinstance(stabilize, (float, torch.Tensor)):
        logits = logits - stabilize
    elif stabilize == "row":
        logits = logits - logits.detach().amax(dim=-1, keepdim=True)
    elif stabilize == "head":
        logits = logits - logits.detach().amax(dim=(-2, -1), keepdim=True)
    elif stabilize is not None:
        raise ValueError(f"stabilize must be 'row', 'head' or None, got {stabilize!r}")
    return torch.exp(logits) / math.sqrt(omega.shape[0])


def advance_feature_draws(model: nn.Module) -> None:
    """One training step's count (and redraw where due) for every Performer mixer of ``model`` in
    training mode: what their forward does in eager mode, for a loop whose step runs compiled or
    captured (there the forward leaves it out).  Not for eager loops: it would count twice."""
    for module in model.modules():
        if isinstance(module, PerformerMixer) and module.training:
            module.count_training_call()


@MIXERS.register("performer")
class PerformerMixer(nn.Module):
    """``forward(q, k, v, pos=None, weights=None)``: ``(b,h,n,d)`` x3 -> ``(b,h,n,d)``.

    ``head_dim`` is the width d of q and k as the mixer sees them (with coordinates appended).

    - ``n_features``: random features m (``None``: ``ceil(d ln d)``, at least d).
    - ``redraw_interval``: in training, the features are redrawn every this many forward calls
      (0: never; frozen in eval).
    - ``seed``: seeds the draws (``None``: a seed from torch's global generator).
    - ``ortho``: blocks of mutually orthogonal feature directions (lower variance) instead of
      i.i.d. ones.
    """

    normalized: tuple[str, ...] = ()
    supports_causal = True

    def __init__(
        self,
        head_dim: int,
        n_heads: int,
        n_features: int | None = None,
        redraw_interval: int = 1000,
        seed: int | None = None,
        ortho: bool = True,
        eps: float = 1e-6,
        causal: bool = False,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ):
        super().__init__()
        self.causal, self.chunk_size = check_causal(causal), check_chunk_size(chunk_size)
        if n_features is None:
            n_features = max(head_dim, math.ceil(head_dim * math.log(max(head_dim, 1))))
        for name, value, low in (("n_features", n_features, 1), ("redraw_interval", redraw_interval, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if seed is None:
            seed = int(torch.randint(0, 2**31 - 1, ()))
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a nonnegative integer or None, got {seed!r}")
        if not isinstance(ortho, bool):
            raise ValueError(f"ortho must be True or False, got {ortho!r}")
        self.head_dim, self.n_features = head_dim, n_features
        self.redraw_interval, self.ortho, self.eps = redraw_interval, ortho, check_eps(eps)
        self.register_buffer("seed", torch.tensor(seed, dtype=torch.int64))
        self.register_buffer("draw", torch.tensor(0, dtype=torch.int64))
        self.register_buffer("calls", torch.tensor(0, dtype=torch.int64))  # training-mode forwards
        self.register_buffer("omega", torch.empty(n_features, head_dim))
        self._host_seed, self._host_calls = seed, 0
        self.redraw(0)

    @torch.no_grad()
    def redraw(self, draw: int) -> None:
        """Set the features to draw number ``draw`` of this layer's seed (host work: a CPU generator,
        then one copy to the features' device)."""
        generator = seeded_generator(self._host_seed, draw)
        omega = draw_omega(self.n_features, self.head_dim, generator, self.ortho)
        self.omega.copy_(omega.to(self.omega))
        self.draw.fill_(draw)

    def count_training_call(self) -> None:
        """Count one training-mode forward and redraw the features when the interval says so.  The
        forward does this itself in eager mode; a compiled or captured step leaves it out (see
        ``advance_feature_draws``).  The count is kept on the host too, so counting reads nothing
        back from the device."""
        if self.redraw_interval:
            calls = self._host_calls
            if calls > 0 and calls % self.redraw_interval == 0:
                self.redraw(calls // self.redraw_interval)
        self._host_calls += 1
        self.calls.add_(1)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._host_seed, self._host_calls = int(self.seed), int(self.calls)  # the host copies follow the buffers

    @property
    def causal_eps(self) -> torch.Tensor:
        return self.eps * torch.exp(-key_shift(self.omega))

    def feature_width(self, width: int, pos_dim: int) -> int:
        """Width of the feature maps for q, k of ``width`` (m random features)."""
        return self.n_features

    def features(self, q, k, pos=None, weights=None):
        """Query features (row-stabilized) and key features (``"head"``-stabilized over the keys of
        positive weight, 0 for the others; or by the constant [`key_shift`][] when causal):
        ``(b,h,n,d)`` x2 -> ``(b,h,n,m)`` x2."""
        d = q.shape[-1]
        if d != self.head_dim:
            raise ValueError(f"performer built for q/k width {self.head_dim}, got {d}")
        scale = d ** -0.25
        omega = upcast(self.omega)
        key_stabilizer = key_shift(self.omega) if self.causal else "head"
        keep = None if weights is None else weights > 0
        return favor_features(q * scale, omega, "row"), favor_features(k * scale, omega, key_stabilizer, keep)

    def forward(self, q, k, v, pos=None, weights=None):
        if self.training and not capturing(q):
            self.count_training_call()
        if self.causal:
            return causal_forward(self, q, k, v, pos, weights)
        return feature_map_attention(self, q, k, v, weights)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, n_features={self.n_features}, "
                f"redraw_interval={self.redraw_interval}, ortho={self.ortho}, eps={self.eps}"
                + (f", causal=True, chunk_size={self.chunk_size}" if self.causal else ""))
