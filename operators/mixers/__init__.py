"""Attention kernels ("mixers"), one module each, registered by name in ``MIXERS``.

A mixer is an ``nn.Module`` built as ``Mixer(head_dim, n_heads, **options)`` whose forward is

    forward(q, k, v, pos=None, weights=None) -> z

with ``q, k, v: (b, h, n, d)`` (already projected, normalized and with coordinates appended),
``pos: (b, n, p)`` the point coordinates or None, ``weights: (b, n)`` quadrature weights summing
to 1 or None for uniform ``1/n``; ``z: (b, h, n, d_v)``.  Its class attribute ``normalized``
names which of "q", "k", "v" the attention layer normalizes before calling it.

Adding a mixer: write a module here with ``@MIXERS.register("name")`` on the class and import it
below.
"""
from __future__ import annotations

from ..registry import Registry

MIXERS: Registry = Registry("mixer")


def list_mixers() -> list[str]:
    """Names of the registered mixers."""
    return MIXERS.names()


# Importing the modules registers the mixers.
from . import cosformer, fourier, galerkin, linear, performer, softmax  # noqa: E402,F401
