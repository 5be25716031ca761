"""Attention kernels ("mixers"), one module each, registered by name in ``MIXERS``.

A mixer is an ``nn.Module`` built as ``Mixer(head_dim, n_heads, **options)`` whose forward is

    forward(q, k, v, pos=None, weights=None) -> z

with ``q, k, v: (b, h, n, d)`` (already projected, normalized and with coordinates appended),
``pos: (b, n, p)`` the point coordinates or None, ``weights: (b, n)`` quadrature weights summing
to 1 or None for uniform ``1/n``; ``z: (b, h, n, d_v)``.  Its class attribute ``normalized``
names which of "q", "k", "v" the attention layer normalizes before calling it; an optional class
attribute ``requires_pos = True`` makes the layer insist on coordinates (``pos_dim > 0``), and an
optional ``inputs`` (default ``("q", "k", "v")``) names the ones the mixer reads: the layer projects
only those and passes None for the others (physics attention has no query at the points).
``head_dim`` is the width of q, k, v as the mixer sees them (the layer's head_dim + pos_dim).
A mixer linear in q may also define ``matrix(k, v, pos=None, weights=None) -> (b, h, d, d)`` with
``forward(q, k, v) == q @ matrix(k, v)``; the layer then folds the output projection into that
small matrix (see ``petrov.operators.attention``).

Padding: a point of weight 0 must not change the output on the other points, whatever finite
values its q, k, v and coordinates hold (point sets of different sizes are batched by padding with
weight-0 points); a mixer whose features need the weights for that (a stabilizer, a domain check)
receives them as ``features(q, k, pos, weights=...)`` in its non-causal form.

Causal attention (token i sees tokens j <= i, in point index order): a mixer with the class
attribute ``supports_causal = True`` takes the option ``causal=False``.  The linear-cost ones also
take ``chunk_size`` and define ``features(q, k, pos) -> (φ_q, φ_k)`` (point-wise feature maps),
``feature_width(width, pos_dim)`` and ``causal_eps`` (None: no normalizer), and get the parallel
chunked form and the recurrent step from [`petrov.operators.attention.mixers.causal`][].
``build_mixer(name, ..., causal=True)`` on any other mixer raises.

The options several mixers share (``model.options.mixer_options`` in a config):

- ``causal``: token i sees the tokens j ≤ i only (set through the attention's ``causal`` field).
- ``chunk_size``: causal linear-cost mixers: the chunk of the parallel (training) form; memory
  ``O(n c + (n/c) d²)``.
- ``eps``: the stabilizer of the normalizer in the denominator.

Adding a mixer: write a module here with ``@MIXERS.register("name")`` on the class and import it
below.
"""
from __future__ import annotations

import inspect

from torch import nn

from ....common.registry import Registry

MIXERS: Registry = Registry("mixer", entry_point_group="petrov.mixers")
"""The attention mixers by name (``petrov mixers``); ``@MIXERS.register("name")`` adds one."""


def list_mixers() -> list[str]:
    """Names of the registered mixers."""
    return MIXERS.names()


def causal_mixers() -> list[str]:
    """Names of the mixers that accept ``causal=True``."""
    return [name for name in MIXERS if getattr(MIXERS.get(name), "supports_causal", False)]


def mixer_options(name: str) -> list[str] | None:
    """The keyword options the mixer ``name`` accepts besides head_dim, n_heads (None: any)."""
    factory = MIXERS.get(name)
    is_class = isinstance(factory, type)
    params = list(inspect.signature(factory.__init__ if is_class else factory).parameters.values())
    params = params[3 if is_class else 2:]  # (self,) head_dim, n_heads
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def build_mixer(name: str, head_dim: int, n_heads: int, **options) -> nn.Module:
    """``MIXERS.get(name)(head_dim, n_heads, **options)``; unknown names/options raise clearly."""
    if not isinstance(name, str):
        raise TypeError(f"mixer must be a name, got {type(name).__name__} {name!r}")
    if options.get("causal") and not getattr(MIXERS.get(name), "supports_causal", False):
        raise ValueError(f"mixer {name!r} has no causal form; causal=True works with "
                         f"{causal_mixers()}")
    valid = mixer_options(name)
    unknown = [] if valid is None else sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"mixer {name!r} has no option(s) {unknown}; "
                         f"its options are {valid or 'none'}")
    return MIXERS.get(name)(head_dim, n_heads, **options)


# Importing the modules registers the mixers.
from . import cosformer, fourier, galerkin, linear, performer, physics, softmax  # noqa: E402,F401
