"""Attention as a learned Petrov–Galerkin projection, and the kernels ("mixers") it plugs in by name.

- [`layer`][]: ``Attention`` (projections, normalizations, coordinates, mixer, output projection),
  ``AttentionConfig``, the causal recurrence (``init_state`` / ``step``);
- [`norms`][]: the normalizations (the tilde): column-wise over the points with quadrature
  weights, or per-head LayerNorm;
- [`mixers`][]: the kernels, registered in ``MIXERS`` (galerkin, fourier, softmax, linear,
  performer, cosformer), and their causal forms;
- [`kernels`][]: the quadrature sums and feature-map attention the linear-cost mixers share;
- [`fused`][]: a mixer's fused path (Galerkin: the whole layer in one pass), declared by the
  mixer as ``fused_path`` and chosen once when the layer is built.
"""
from .layer import Attention, AttentionConfig, AttentionState
from .mixers import MIXERS, build_mixer, list_mixers

__all__ = ["MIXERS", "Attention", "AttentionConfig", "AttentionState", "build_mixer", "list_mixers"]
