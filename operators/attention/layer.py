"""Multi-head attention as a learned Petrov-Galerkin projection (Cao 2021), any mixer by name.

For ``x: (b, n, d_model)`` sampled at points ``pos: (b, n, p)`` with quadrature weights
``w: (b, n)``:

1. per head ``Q, K, V = x W^Q, x W^K, x W^V``                          ``(b, h, n, head_dim)``
   (only those the mixer reads, its ``inputs``; the others are None and have no projection)
2. the matrices the mixer names in ``normalized`` are normalized (``norm``: "column", "layer" or
   None; see [`petrov.operators.attention.norms`][]), using the weights;
3. the coordinates are appended to Q, K and V of every head             ``(b, h, n, head_dim + p)``
4. the mixer combines them, ``z = mixer(Q, K, V, pos, w)``              ``(b, h, n, head_dim + p)``
5. heads are concatenated, dropout, output projection
   ``Linear(h (head_dim + p), d_model)``                               ``(b, n, d_model)``

Mixers linear in Q (Galerkin; Fourier with ``associative=True``) expose ``matrix(k, v, pos,
weights) -> (b, h, e, e)`` with ``mixer(q, k, v) = q @ matrix``.  For them, when dropout is not
active, steps 4-5 are computed as ``sum_h q_h (matrix_h W_hᵀ) + bias`` (same operator, products
reassociated): one n-sized product instead of two, and z is never formed or kept for backward.

Weights: nonnegative, normalized here to sum 1 per batch (so any positive multiple, e.g. cell
areas, works); ``None`` means uniform ``1/n`` and takes the cheaper uniform code paths.

Dropout is one ``nn.Dropout`` on the concatenated mixer output (step 5), the same place for every
mixer (so mixers stay interchangeable; linear kernels have no attention matrix to drop); it is off
in ``eval()``.

Causal attention (``causal=True``; galerkin, fourier, linear, performer, cosformer, softmax): point i
attends to the points j <= i in index order (see [`petrov.operators.attention.mixers.causal`][]).  The
normalizations must then be point-wise: norm "layer" or None (the column norm's statistics are sums
over all points, later ones included; running statistics are not implemented).  For the linear-cost
mixers ``init_state`` / ``step`` run the same layer as a recurrence, one point at a time, with a
constant-size state.

Initialization: ``W^Q, W^K, W^V`` are Xavier-uniform with gain ``init_gain`` plus ``init_diagonal``
on the main diagonal, biases zero.  The reference (scaomath/galerkin-transformer, SimpleAttention)
defaults to gain 1e-2 and diagonal 1e-2 (its Burgers config used gain 1e-3).  The output
projection keeps PyTorch's default ``nn.Linear`` initialization.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..checks import check_matches_weights, checks_values, non_finite, non_finite_failure, raise_first
from .kernels import full_precision, upcast
from .mixers import MIXERS, build_mixer
from .mixers.causal import CausalState, check_causal, mixer_state, mixer_step
from .norms import build_norm


def _positive_int(name: str, value: object, low: int = 1) -> int:
    # a symbolic size (the batch of an export with a dynamic batch axis) passes: its bound is a guard there
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


@dataclass
class AttentionConfig:
    """Everything an attention layer is built from besides its width and its coordinates.

    Model configs extend this dataclass, so one config object is passed whole from a TOML table down
    to every layer.  Fields:

    - ``n_heads``: attention heads.
    - ``head_dim``: width of each head's Q, K and V (``None``: ``d_model // n_heads``; independent
      of it otherwise).
    - ``mixer``: the attention kernel by name (``petrov mixers`` lists them: ``galerkin``,
      ``fourier``, ``softmax``, ``linear``, ``performer``, ``cosformer``, ``physics``).
    - ``norm``: the normalization of the mixer's normalized pair (Galerkin: K and V; Fourier: Q and
      K): ``"column"`` (zero mean, unit L² norm per channel over the points, with the quadrature
      weights), ``"layer"`` (LayerNorm per point and head) or ``None``.
    - ``mixer_options``: keyword options of the mixer (``petrov mixers NAME`` lists them; an
      unknown one is an error).
    - ``dropout``: dropout probability on the concatenated mixer output.
    - ``init_gain``: gain of the Xavier-uniform initialization of the Q, K, V projections.
    - ``init_diagonal``: added to the diagonal of the Q, K, V weights at initialization.
    - ``norm_eps``: the eps of the normalization.
    - ``causal``: point i sees the points j ≤ i only (in index order); needs a point-wise ``norm``
      (``"layer"`` or ``None``); the mixer option ``chunk_size`` sets the chunk of the parallel form.
    """

    n_heads: int = 1
    head_dim: Optional[int] = None
    mixer: str = "galerkin"
    norm: Optional[str] = "column"
    mixer_options: dict = field(default_factory=dict)
    dropout: float = 0.0
    init_gain: float = 1e-2
    init_diagonal: float = 1e-2
    norm_eps: float = 1e-5
    causal: bool = False


_CONFIG_FIELDS = {f.name for f in dataclasses.fields(AttentionConfig)}


def _check_step_weight(weight, x_t: torch.Tensor) -> None:
    """A recurrent step's weight: a number (checked in Python) or a ``(b,)`` tensor on ``x_t``'s device
    (its values checked where ``checks_values`` says), finite and >= 0."""
    message = f"weight_t must be finite and >= 0 (a quadrature weight), got {weight!r}"
    if not isinstance(weight, torch.Tensor):
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight < math.inf:
            raise ValueError(message)
        return
    if weight.device != x_t.device:
        raise ValueError(f"weight_t is on {weight.device} but x_t is on {x_t.device}; move it "
                         "(weight_t.to(x_t.device))")
    if checks_values(weight):
        raise_first([(non_finite(weight) | (weight < 0).any(), lambda: message)])


class AttentionState(NamedTuple):
    """Recurrent state of a causal layer: the mixer's state and the default (uniform) point weight."""

    mixer: CausalState
    weight: float


class Attention(nn.Module):
    """``Attention(d_model, config=None, *, pos_dim=0, **options)``.

    ``config`` is an [`AttentionConfig`][] (or a config extending it, e.g. a model's);
    keyword ``options`` name its fields (``n_heads=4, mixer="fourier"``) and override it; any other
    keyword is a mixer option (``Attention(64, n_heads=4, mixer="performer", n_features=128)``).

    ``forward(x, pos=None, weights=None) -> (b, n, d_model)`` with ``x: (b, n, d_model)``,
    ``pos: (b, n, pos_dim)`` (required iff ``pos_dim > 0``; batch size 1 broadcasts) and
    ``weights: (b, n)`` nonnegative quadrature weights (batch size 1 broadcasts).

    Inputs are checked at every call: shapes, and ``x`` in the layer's dtype (any floating dtype
    under autocast) with every tensor on the layer's device (a one-line error saying what to
    ``.to(...)``), always; values (NaN/inf, weights ``>= 0`` with a positive sum) where
    ``petrov.operators.checks.checks_values`` says, in one host read, never inside a compiled or
    captured step.
    """

    def __init__(self, d_model: int, config: AttentionConfig | None = None, *, pos_dim: int = 0, **options):
        super().__init__()
        if config is not None and not isinstance(config, AttentionConfig):
            raise ValueError(f"Attention's second argument is an AttentionConfig, got {type(config).__name__} "
                             f"{config!r}; give the options by name, e.g. Attention({d_model}, n_heads=4)")
        fields = {k: v for k, v in options.items() if k in _CONFIG_FIELDS}
        extra = {k: v for k, v in options.items() if k not in _CONFIG_FIELDS}
        c = dataclasses.replace(config or AttentionConfig(), **fields)
        mixer_options = {**c.mixer_options, **extra}
        mixer, norm, dropout, head_dim = c.mixer, c.norm, c.dropout, c.head_dim
        init_gain, init_diagonal, causal = c.init_gain, c.init_diagonal, c.causal
        self.d_model = _positive_int("d_model", d_model)
        self.n_heads = n_heads = _positive_int("n_heads", c.n_heads)
        if head_dim is None:
            if d_model < n_heads:
                raise ValueError(f"d_model // n_heads = 0 ({d_model} // {n_heads}); pass head_dim")
            head_dim = d_model // n_heads
        self.head_dim = _positive_int("head_dim", head_dim)
        self.pos_dim = _positive_int("pos_dim", pos_dim, low=0)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        for name, value in (("init_gain", init_gain), ("init_diagonal", init_diagonal)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        norm_eps = c.norm_eps
        if isinstance(norm_eps, bool) or not isinstance(norm_eps, (int, float)) or not 0 < norm_eps < math.inf:
            raise ValueError(f"norm_eps must be a finite number > 0 (the eps of the normalization, e.g. 1e-5), "
                             f"got {norm_eps!r}")

        self.causal = check_causal(causal)
        if causal:
            mixer_options["causal"] = True
        mixer_cls = MIXERS.get(mixer) if isinstance(mixer, str) else None
        self.mixer = build_mixer(mixer, self.head_dim + self.pos_dim, self.n_heads, **mixer_options)
        if getattr(mixer_cls, "requires_pos", False) and self.pos_dim == 0:
            raise ValueError(f"mixer {mixer!r} needs point coordinates: build Attention with pos_dim > 0")
        self.mixer_name, self.norm_name = mixer, norm
        normalized = tuple(getattr(self.mixer, "normalized", ()))
        norms = {name: build_norm(norm, self.n_heads, self.head_dim, eps=norm_eps) for name in normalized}
        self.norms = nn.ModuleDict(norms if norm is not None else {})
        # a mixer may declare a fused path computing the whole layer (steps 1-5) in one pass; it is
        # chosen here, once (a plugin's mixer opts in the same way)
        self.fused_path = None if causal else getattr(self.mixer, "fused_path", None)
        if causal and not all(getattr(m, "pointwise", False) for m in self.norms.values()):
            raise ValueError(f"causal attention needs a point-wise normalization: norm={norm!r} uses "
                             f"statistics over all points, later ones included; pass norm='layer' or None")

        inner = self.n_heads * self.head_dim
        # a mixer that reads no query (physics attention) gets no query projection
        self.inputs = tuple(getattr(self.mixer, "inputs", ("q", "k", "v")))
        if not set(self.inputs) <= {"q", "k", "v"}:
            raise ValueError(f"mixer {mixer!r}: inputs must be a subset of ('q', 'k', 'v'), got {self.inputs}")
        self.q_proj = nn.Linear(d_model, inner) if "q" in self.inputs else None
        self.k_proj = nn.Linear(d_model, inner) if "k" in self.inputs else None
        self.v_proj = nn.Linear(d_model, inner) if "v" in self.inputs else None
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(self.n_heads * (self.head_dim + self.pos_dim), d_model)
        self.init_gain, self.init_diagonal = float(init_gain), float(init_diagonal)
        self.reset_projections()

    @torch.no_grad()
    def reset_projections(self) -> None:
        """Xavier-uniform (gain ``init_gain``) + ``init_diagonal`` * identity on Q, K, V; zero biases."""
        for proj in (p for p in (self.q_proj, self.k_proj, self.v_proj) if p is not None):
            nn.init.xavier_uniform_(proj.weight, gain=self.init_gain)
            proj.weight += self.init_diagonal * torch.eye(
                *proj.weight.shape, dtype=proj.weight.dtype, device=proj.weight.device)
            nn.init.zeros_(proj.bias)

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

    def _heads(self, x: torch.Tensor, pos: torch.Tensor | None, weights: torch.Tensor | None):
        """Steps 1-3: ``x: (b, n, d_model)`` -> normalized q, k, v with coordinates ``(b, h, n, e)``."""
        b, n, _ = x.shape
        projections = (self.q_proj, self.k_proj, self.v_proj)
        q, k, v = (None if p is None else self._split_heads(p(x)) for p in projections)
        q, k, v = (self.norms[name](t, weights) if name in self.norms and t is not None else t
                   for name, t in zip("qkv", (q, k, v)))
        if self.pos_dim:
            coords = pos.unsqueeze(1).expand(b, self.n_heads, n, self.pos_dim)
            # cat promotes (under autocast bf16 q + float32 coords -> float32): coordinates keep
            # their precision, bf16 cannot resolve a 1/8192 grid spacing
            q, k, v = (None if t is None else torch.cat([t, coords], dim=-1) for t in (q, k, v))
        return q, k, v

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None,
                weights: torch.Tensor | None = None, recompute: bool = False) -> torch.Tensor:
        """``recompute=True`` (training memory): keep only ``x`` for backward and recompute the rest
        there (Galerkin: the K, V projections and normalizations; other mixers: the whole layer,
        by ``torch.utils.checkpoint``).  Same numbers."""
        pos, weights = self._check_inputs(x, pos, weights)
        if self._fusable(x, pos, weights):
            return self.fused_path(self, x, pos, weights, recompute and torch.is_grad_enabled())
        if recompute and torch.is_grad_enabled():
            return checkpoint(self._unfused, x, pos, weights, use_reentrant=False)
        return self._unfused(x, pos, weights)

    def _unfused(self, x, pos, weights) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self._heads(x, pos, weights)
        matrix = getattr(self.mixer, "matrix", None)
        if matrix is not None and not (self.training and self.dropout.p > 0):
            kv = matrix(k, v, pos=pos, weights=weights)  # None: not linear in q after all
            if kv is not None:
                return self._project_through(q, kv)
        z = self.mixer(q, k, v, pos=pos, weights=weights)  # (b, h, n, head_dim + p)
        z = z.transpose(1, 2).reshape(b, n, -1)
        return self.out_proj(self.dropout(z))

    def init_state(self, batch: int, n_points: int, *, dtype: torch.dtype | None = None,
                   device=None) -> AttentionState:
        """Empty recurrent state for ``batch`` sequences of ``n_points`` points (the uniform
        weight ``1/n_points`` is what ``step`` uses when no weight is given); causal linear-cost
        mixers only.  ``dtype``/``device`` default to the layer's (state at least float32)."""
        if not self.causal:
            raise ValueError("init_state/step need a causal layer: build Attention with causal=True")
        if not hasattr(self.mixer, "features"):
            raise ValueError(f"mixer {self.mixer_name!r} has no recurrent form (no constant-size state); "
                             f"use forward on the whole prefix, or a linear-cost mixer")
        _positive_int("batch", batch)
        _positive_int("n_points", n_points)
        param = self.out_proj.weight
        state = mixer_state(self.mixer, batch, self.n_heads, self.head_dim + self.pos_dim, self.pos_dim,
                            dtype or param.dtype, device or param.device)
        return AttentionState(state, 1.0 / n_points)

    def step(self, state: AttentionState, x_t: torch.Tensor, pos_t: torch.Tensor | None = None,
             weight_t: torch.Tensor | float | None = None) -> tuple[torch.Tensor, AttentionState]:
        """One point of the causal layer: ``x_t: (b, d_model)``, ``pos_t: (b, pos_dim)``,
        ``weight_t``: this point's quadrature weight (a number or ``(b,)``, normalized over the whole
        sequence as ``forward`` normalizes ``weights``; default ``1/n_points``) -> ``(y_t: (b,
        d_model), new state)``.  Steps 0..n-1 give the rows of ``forward`` (eval mode)."""
        if not isinstance(state, AttentionState):
            raise ValueError("step needs the state from init_state (or from the previous step)")
        if not isinstance(x_t, torch.Tensor) or x_t.ndim != 2:
            shape = tuple(x_t.shape) if isinstance(x_t, torch.Tensor) else type(x_t).__name__
            raise ValueError(f"step expects x_t of shape (b, {self.d_model}), got {shape}")
        pos, _ = self._check_inputs(x_t[:, None], None if pos_t is None else pos_t[:, None], None)
        q, k, v = self._heads(x_t[:, None], pos, None)
        weight = state.weight if weight_t is None else weight_t
        _check_step_weight(weight, x_t)
        pos = None if pos is None else pos[:, 0]
        z, mixer = mixer_step(self.mixer, state.mixer, q[:, :, 0], k[:, :, 0], v[:, :, 0], pos, weight)
        y = self.out_proj(self.dropout(z.reshape(z.shape[0], -1)))
        return y, AttentionState(mixer, state.weight)

    def _fusable(self, x, pos, weights) -> bool:
        """The mixer's fused path applies: it has one (``fused_path``, chosen at build time), no active dropout, float32/64
        (or a 16-bit activation under autocast: the sums over the points then run in float32, the
        n-sized products in autocast's dtype), no gradient wanted for the coordinates or the weights."""
        autocast = torch.is_autocast_enabled(x.device.type)
        return (self.fused_path is not None
                and not (self.training and self.dropout.p > 0)
                and (x.dtype in (torch.float32, torch.float64) or autocast and upcast(x).dtype == torch.float32)
                and not any(t is not None and t.requires_grad for t in (pos, weights)))

    def _project_through(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        """``out_proj(concat_h q_h kv_h) = sum_h q_h (kv_h W_hᵀ) + bias`` for a mixer linear in Q
        (one whose ``matrix(k, v)`` gives ``mixer(q, k, v) = q @ matrix``).

        ``q: (b, h, n, e)``, ``kv: (b, h, e, e)`` -> ``(b, n, d_model)``.  Multiplying the small
        ``kv`` by the output weight first leaves one n-sized product instead of two (forward and
        backward), and the mixer output z is never formed or kept for backward.  Only without
        active dropout, which acts on z.
        """
        b, h, n, e = q.shape
        w = self.out_proj.weight.view(self.d_model, h, e).permute(1, 2, 0)  # (h, e, d_model)
        with full_precision(kv):
            m = kv @ w.to(kv.dtype)  # (b, h, e, d_model), float32 at least like kv
        q = q.transpose(1, 2).reshape(b, n, h * e)  # a view for one head
        m = m.reshape(b, h * e, self.d_model)
        if not torch.is_autocast_enabled(q.device.type):
            m = m.to(q.dtype)
        return torch.baddbmm(self.out_proj.bias.to(m.dtype), q, m)

    def _check_inputs(self, x, pos, weights):
        """Validate shapes, dtype and devices (plain Python) and, where ``checks_values`` says, the
        values (NaN/inf, nonnegative weights with a positive sum: one host read for all); return pos
        expanded to ``(b, n, p)`` and weights normalized to sum 1, both in x's dtype (under autocast in
        float32 at least: a bfloat16 coordinate cannot resolve a 1/512 grid spacing near 1, and
        bfloat16 weights no longer sum to 1)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.d_model:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"Attention expects x of shape (b, n, {self.d_model}), got {shape}")
        b, n, _ = x.shape
        if b == 0:
            raise ValueError(f"Attention got an empty batch (x of shape {tuple(x.shape)}); give at least one sample")
        if n == 0:
            raise ValueError("Attention got an empty point set (n = 0)")
        param = self.out_proj.weight
        if not torch.is_floating_point(x):
            raise ValueError(f"Attention: x must be a floating-point tensor, got {x.dtype}; convert it to the "
                             f"layer's dtype (x.to({param.dtype}))")
        for name, t in (("pos", pos), ("weights", weights)):
            if t is not None and not isinstance(t, torch.Tensor):
                raise TypeError(f"Attention: {name} must be a torch.Tensor or None, got {type(t).__name__}; "
                                f"convert it (torch.as_tensor({name}))")
        check_matches_weights(x, "x", param, "Attention", owner="layer")
        dtype = upcast(x).dtype if torch.is_autocast_enabled(x.device.type) else x.dtype
        look = checks_values(x)
        failures = [non_finite_failure(x, "Attention: x")] if look else []
        if self.pos_dim == 0:
            if pos is not None:
                raise ValueError("pos given but the layer was built with pos_dim=0; "
                                 "build it with pos_dim=p to use coordinates")
        else:
            if pos is None:
                raise ValueError(f"the layer was built with pos_dim={self.pos_dim}: "
                                 f"pass pos of shape (b, n, {self.pos_dim})")
            if pos.ndim != 3 or pos.shape[0] not in (1, b) or pos.shape[1:] != (n, self.pos_dim):
                raise ValueError(f"pos must have shape ({b}, {n}, {self.pos_dim}) "
                                 f"(or batch 1), got {tuple(pos.shape)}")
            check_matches_weights(pos, "pos", param, "Attention", owner="layer", dtype=False)
            if look:
                failures.append(non_finite_failure(pos, "Attention: pos"))
            pos = pos.to(dtype).expand(b, n, self.pos_dim)
        if weights is not None:
            if weights.ndim != 2 or weights.shape[0] not in (1, b) or weights.shape[1] != n:
                raise ValueError(f"weights must have shape ({b}, {n}) (or batch 1), "
                                 f"got {tuple(weights.shape)}")
            check_matches_weights(weights, "weights", param, "Attention", owner="layer", dtype=False)
            total = weights.sum(dim=-1, keepdim=True)
            if look:
                failures += [(non_finite(weights), lambda: "weights contain NaN or inf"),
                             ((weights < 0).any(), lambda: "weights must be nonnegative (quadrature weights)"),
                             ((total <= 0).any(), lambda: "weights sum to 0 for some batch entry; at least one "
                                                          "must be positive")]
            weights = (weights / total).to(dtype).expand(b, n)
        raise_first(failures)
        return pos, weights

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}, "
                f"mixer={self.mixer_name!r}, norm={self.norm_name!r}, pos_dim={self.pos_dim}"
                + (", causal=True" if self.causal else ""))
