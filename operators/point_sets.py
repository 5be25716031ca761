"""The padded point-set batch the mesh models take, and what they do with its masks.

A batch of samples with different node counts, padded to one length ``n``::

    x        (b, n, c_in)   nodal input values (0 on padding)
    pos      (b, n, 2)      node coordinates in [0, 1]² (finite on padding, e.g. 0)
    weights  (b, n)         quadrature weights, e.g. lumped mass w_j = Σ_{T∋j} |T|/3 (Σ_j w_j = |Ω|),
                            0 on padding
    mask     (b, n) bool    True on real nodes (None: all real)
    boundary (b, n) bool    True on Dirichlet boundary nodes (None: none given)

Point-set models (:func:`petrov.operators.models.point_set_models`) are called
``model(x, pos, weights, mask=None, boundary=None) -> (b, n, c_out)``: every integral they take
uses ``weights``, so padding (weight 0) changes nothing on the real nodes, and a node of weight 0
is a point where the output is evaluated without taking part in any integral.  Outputs are exactly 0
on padding and, with ``dirichlet=True``, on the boundary nodes.
"""
from __future__ import annotations

import torch


def check_point_config(config, where: str) -> None:
    """Point sets have no order: ``causal`` attention is refused."""
    if getattr(config, "causal", False):
        raise ValueError(f"{where}: causal=True orders the points, which a mesh does not; use causal=False")


def finish_nodes(out: torch.Tensor, mask: torch.Tensor | None, boundary: torch.Tensor | None,
                 dirichlet: bool, where: str) -> torch.Tensor:
    """``out (b, n, c)`` with exact zeros on padding (``~mask``) and, if ``dirichlet``, on ``boundary``.

    ``dirichlet`` without ``boundary`` is an error (the zeros would silently be missing)."""
    zero = None if mask is None else ~mask
    if dirichlet:
        if boundary is None:
            raise ValueError(f"{where}: dirichlet=True needs the boundary flags: pass boundary (b, n) bool "
                             "(True on Dirichlet nodes), or build the model with dirichlet=False")
        zero = boundary if zero is None else zero | boundary
    return out if zero is None else out.masked_fill(zero.unsqueeze(-1), 0.0)
