"""Relative L² and H¹-regularised losses on channels-last grids ``(b, *grid, c)``.

All functions are per sample first (shape ``(b,)``); the training loss is their batch mean.

Relative L² (the metric of every table):

    relL2(p, y) = ‖p − y‖ / ‖y‖,   ‖v‖² = Σ_points Σ_channels v²

(the uniform quadrature weight h^d cancels in the ratio, so the value is the discrete version of
‖p − y‖_{L²(Ω)} / ‖y‖_{L²(Ω)} at any resolution).  On point sets (meshes, ``(b, n, c)`` with quadrature
weights ``w (b, n)``, 0 on padding) the same ratio with the weights, ``√(Σ w |p − y|²) / √(Σ w |y|²)``:
never a plain sum over nodes, which crowd where a mesh is fine.  The H¹ term is defined on grids only.

H¹ seminorm by central differences along every grid axis i with spacing h_i:

    (D_i u)_j = (u_{j+1} − u_{j−1}) / (2 h_i)
    |u|²_{H¹,h} = (Π_i h_i) Σ_points Σ_channels Σ_i (D_i u)²        ≈ ∫_Ω |∇u|² dx

Boundary types (``periodic``):

- ``True`` (Burgers on the torus [0, 1)): ``h = 1/n``; neighbours wrap around.
- ``False`` (Darcy on the node grid of [0, 1]² with u = 0 on the boundary): ``h = 1/(n − 1)``;
  the field is continued by zeros outside the grid (the Dirichlet value).

Because h is the true spacing, ``h1_seminorm`` converges to ``‖∇u‖_{L²}`` as the grid is refined,
and the relative seminorm ``|p − y|_{H¹,h} / |y|_{H¹,h}`` is a resolution-independent quantity:
its weight γ in ``relL2 + γ·relH1`` does not drift when the training resolution changes.
"""
from __future__ import annotations

import torch

from ..common.dtypes import upcast

EPS = 1e-12  # floor for denominators; never reached by a non-degenerate target


def _check_pair(pred: torch.Tensor, target: torch.Tensor) -> None:
    if pred.shape != target.shape:
        raise ValueError(
            f"prediction shape {tuple(pred.shape)} does not match target shape "
            f"{tuple(target.shape)}; both must be channels-last (b, *grid, c)"
        )
    if pred.dim() < 3:
        raise ValueError(f"expected (b, *grid, c) tensors, got shape {tuple(pred.shape)}")


def relative_l2_per_sample(pred: torch.Tensor, target: torch.Tensor,
                           weights: torch.Tensor | None = None) -> torch.Tensor:
    """``‖pred_b − target_b‖ / ‖target_b‖`` for each sample b; inputs ``(b, *grid, c)`` -> ``(b,)``.
    ``weights (b, n)``: quadrature weights of point sets ``(b, n, c)`` (module docstring)."""
    _check_pair(pred, target)
    pred, target = upcast(pred), upcast(target)
    if weights is None:
        diff = (pred - target).flatten(1).norm(dim=1)
        return diff / target.flatten(1).norm(dim=1).clamp_min(EPS)
    if weights.shape != pred.shape[:2] or pred.dim() != 3:
        raise ValueError(f"quadrature weights {tuple(weights.shape)} do not fit point sets {tuple(pred.shape)}; "
                         "expected (b, n) weights for (b, n, c) values")
    w = upcast(weights).to(pred.dtype)
    diff = (w * (pred - target).square().sum(-1)).sum(1).sqrt()
    return diff / (w * target.square().sum(-1)).sum(1).sqrt().clamp_min(EPS)


def relative_l2(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Batch mean of [`relative_l2_per_sample`][] (a scalar)."""
    return relative_l2_per_sample(pred, target).mean()


def grid_spacing(n: int, periodic: bool) -> float:
    """Spacing of an n-point grid on [0, 1]: ``1/n`` periodic, ``1/(n − 1)`` node grid."""
    if n < 2:
        raise ValueError(f"a derivative needs at least 2 grid points per axis, got {n}")
    return 1.0 / n if periodic else 1.0 / (n - 1)


def central_differences(u: torch.Tensor, periodic: bool) -> list[torch.Tensor]:
    """``[D_1 u, ..., D_d u]``, each shaped like ``u: (b, *grid, c)`` (formula in the module doc)."""
    grid_dims = range(1, u.dim() - 1)
    derivatives = []
    for dim in grid_dims:
        h = grid_spacing(u.shape[dim], periodic)
        if periodic:
            forward, backward = u.roll(-1, dims=dim), u.roll(1, dims=dim)
        else:
            # zero continuation outside the node grid (u = 0 on and beyond the boundary)
            zero = torch.zeros_like(u.narrow(dim, 0, 1))
            forward = torch.cat([u.narrow(dim, 1, u.shape[dim] - 1), zero], dim=dim)
            backward = torch.cat([zero, u.narrow(dim, 0, u.shape[dim] - 1)], dim=dim)
        derivatives.append((forward - backward) / (2.0 * h))
    return derivatives


def h1_seminorm(u: torch.Tensor, periodic: bool) -> torch.Tensor:
    """Discrete ``|u|_{H¹} ≈ ‖∇u‖_{L²(Ω)}`` per sample; ``u: (b, *grid, c)`` -> ``(b,)``."""
    if u.dim() < 3:
        raise ValueError(f"expected a (b, *grid, c) tensor, got shape {tuple(u.shape)}")
    u = upcast(u)
    cell = 1.0
    for n in u.shape[1:-1]:
        cell *= grid_spacing(n, periodic)
    squares = sum(d.pow(2).flatten(1).sum(dim=1) for d in central_differences(u, periodic))
    return (cell * squares).sqrt()


def relative_h1_per_sample(
    pred: torch.Tensor, target: torch.Tensor, periodic: bool
) -> torch.Tensor:
    """``|pred − target|_{H¹} / |target|_{H¹}`` per sample -> ``(b,)``."""
    _check_pair(pred, target)
    num = h1_seminorm(upcast(pred) - upcast(target), periodic)
    return num / h1_seminorm(target, periodic).clamp_min(EPS)


def training_loss_per_sample(
    pred: torch.Tensor, target: torch.Tensor, h1_weight: float = 0.0, periodic: bool = True,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """``relL2 + γ·relH1`` per sample (γ = ``h1_weight``; the H¹ term is skipped when γ = 0);
    ``weights``: point sets' quadrature weights (then γ must be 0)."""
    loss = relative_l2_per_sample(pred, target, weights)
    if h1_weight and weights is not None:
        raise ValueError("loss.h1_weight > 0 takes derivatives on a grid; point-set (mesh) data have none: "
                         "set loss.h1_weight = 0")
    if h1_weight:
        loss = loss + h1_weight * relative_h1_per_sample(pred, target, periodic)
    return loss


# --- trajectories: states as the trailing channels ``(b, *grid, h + T)``, the first h given ----------

def _grid_only(weights: torch.Tensor | None) -> None:
    if weights is not None:
        raise ValueError("trajectory training modes take grid data; point-set (mesh) data train with "
                         "loss.mode = 'direct'")


def _snapshots_as_samples(u: torch.Tensor) -> torch.Tensor:
    """``(b, *grid, S)`` -> ``(b S, *grid, 1)``: each snapshot a sample (sample-major)."""
    return u.movedim(-1, 1).reshape(-1, *u.shape[1:-1], 1)


def per_time_relative_l2(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``‖p_k − y_k‖ / ‖y_k‖`` for every sample and snapshot k (the channels): ``(b, S)``."""
    _check_pair(pred, target)
    return relative_l2_per_sample(_snapshots_as_samples(pred), _snapshots_as_samples(target)).view(pred.shape[0], -1)


def trajectory_relative_l2_per_sample(pred: torch.Tensor, target: torch.Tensor,
                                      weights: torch.Tensor | None = None, history: int = 1) -> torch.Tensor:
    """Mean over the predicted states ``k = history .. S-1`` of the per-time relative L² (the ``history``
    given states are left out): ``(b,)``.  Every time counts alike, although the field decays."""
    _grid_only(weights)
    return per_time_relative_l2(pred, target)[:, history:].mean(dim=1)


def space_time_relative_l2_per_sample(pred: torch.Tensor, target: torch.Tensor,
                                      weights: torch.Tensor | None = None, history: int = 1) -> torch.Tensor:
    """The relative L² of the whole predicted space-time block, states ``history .. S-1`` together:
    ``‖p − y‖ / ‖y‖`` over every point and predicted state, ``(b,)`` (the FNO paper's Navier–Stokes metric:
    late states, larger or smaller, weigh by their size)."""
    _grid_only(weights)
    return relative_l2_per_sample(pred[..., history:], target[..., history:])


def trajectory_loss_per_sample(
    pred: torch.Tensor, target: torch.Tensor, h1_weight: float = 0.0, periodic: bool = True,
    weights: torch.Tensor | None = None, history: int = 1,
) -> torch.Tensor:
    """``relL2 + γ·relH1`` per predicted state ``k = history .. S-1``, averaged over the states: ``(b,)``."""
    _grid_only(weights)
    _check_pair(pred, target)
    b = pred.shape[0]
    per_snapshot = training_loss_per_sample(_snapshots_as_samples(pred[..., history:]),
                                            _snapshots_as_samples(target[..., history:]), h1_weight, periodic)
    return per_snapshot.view(b, -1).mean(dim=1)


def check_targets(y: torch.Tensor, sample_ids, where: str, *, periodic: bool = True, h1_weight: float = 0.0,
                  snapshots: bool = False, history: int = 1) -> None:
    """ValueError naming the first sample whose target leaves the relative error undefined: zero
    everywhere (``||y|| = 0``: relative L2), or, with ``h1_weight > 0``, constant (``|y|_H1 = 0``: the
    relative H1 term).  ``y: (b, *grid, c)``; ``snapshots``: the channels are time snapshots scored one
    by one, from state ``history`` on (the states before are given), as the trajectory losses do."""
    ys = _snapshots_as_samples(y[..., history:]) if snapshots else y
    if ys.shape[0] == 0:
        return
    per = ys.shape[0] // y.shape[0]
    checks = [("zero everywhere", upcast(ys).flatten(1).norm(dim=1),
               "the relative L2 error ||p - y|| / ||y|| is undefined for it: drop such samples from the data")]
    if h1_weight:
        checks.append(("constant", h1_seminorm(ys, periodic),
                       f"its H1 seminorm is 0, so the relative H1 term of the loss (loss.h1_weight = {h1_weight:g}) "
                       f"is undefined: set loss.h1_weight = 0, or drop such samples"))
    ids = [int(i) for i in sample_ids]
    for what, norm, why in checks:
        bad = (norm <= EPS).view(-1, per).any(dim=1)
        if bool(bad.any()):
            first = ids[int(bad.nonzero()[0])]
            snap = " in a snapshot" if snapshots else ""
            raise ValueError(f"{where}: the target of sample {first} is {what}{snap} ({int(bad.sum())} of "
                             f"{len(ids)} samples are); {why}")
