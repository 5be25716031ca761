"""What an inverse-problem user reads: coefficient error, phase accuracy, data misfit (per sample).

- ``relative_l2(a, a_true) = ||a - a_true|| / ||a_true||`` on the coarse node grid (uniform weights);
- ``phase_accuracy``: fraction of the coarse cells where the truth is two-valued (its average over
  the cell's fine points equals ``low`` or ``high``, i.e. no interface crosses it) and the recovered
  value lies on the same side of the threshold ``(low + high)/2`` (7.5 for 3 and 12);
- ``data_misfit``: solve ``-div(a grad u) = f`` with the recovered coefficient, prolonged bilinearly to
  the observation grid (petrov's finite-difference solver), and give ``||u(a) - u_ref|| / ||u_ref||``,
  against the clean solution and against the noisy observation.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from ..common.host import to_numpy
from ..datasets import solve_darcy
from ..train.losses import relative_l2_per_sample
from .parametrization import prolong


def relative_l2(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """``(N,)`` relative L2 of fields ``(N, *grid)`` ([`petrov.train.losses.relative_l2_per_sample`][]
    on float64 arrays)."""
    pred, true = np.asarray(pred, dtype=np.float64), np.asarray(true, dtype=np.float64)
    if pred.shape != true.shape:
        raise ValueError(f"shapes differ: {pred.shape} vs {true.shape}")
    return to_numpy(relative_l2_per_sample(torch.from_numpy(pred)[..., None], torch.from_numpy(true)[..., None]))


def phase_accuracy(a: np.ndarray, a_true: np.ndarray, low: float = 3.0, high: float = 12.0,
                   tol: float = 1e-6) -> np.ndarray:
    """``(N,)`` fraction of the two-valued cells of ``a_true (N, k, k)`` where ``a`` is on the right side
    of ``(low + high)/2``. NaN (with a warning) for a sample with no two-valued cell."""
    a, a_true = np.asarray(a, dtype=np.float64), np.asarray(a_true, dtype=np.float64)
    if a.shape != a_true.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {a_true.shape}")
    threshold = 0.5 * (low + high)
    pure = (np.abs(a_true - low) <= tol * high) | (np.abs(a_true - high) <= tol * high)
    right = (a > threshold) == (a_true > threshold)
    count = pure.sum(axis=(1, 2))
    if (count == 0).any():
        warnings.warn(f"{int((count == 0).sum())} sample(s) have no two-valued cell; their phase accuracy is NaN",
                      stacklevel=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (right & pure).sum(axis=(1, 2)) / np.maximum(count, 1), np.nan)


def solve_recovered(a: np.ndarray, n: int, f: float = 1.0, averaging: str = "arithmetic") -> np.ndarray:
    """The finite-difference solution ``(N, n, n)`` for coarse coefficients ``a (N, k, k)`` prolonged to n."""
    a_f = to_numpy(prolong(torch.as_tensor(np.asarray(a, dtype=np.float64)), n))
    return solve_darcy(a_f, f, averaging=averaging, solver="auto")


def data_misfit(a: np.ndarray, u_ref: np.ndarray, f: float = 1.0, averaging: str = "arithmetic") -> np.ndarray:
    """``(N,)`` relative L2 between the solve with the recovered ``a (N, k, k)`` and ``u_ref (N, n, n)``."""
    return relative_l2(solve_recovered(a, u_ref.shape[-1], f, averaging), u_ref)


def inversion_metrics(a: np.ndarray, u_obs: np.ndarray, *, a_true: np.ndarray | None = None,
                      u_clean: np.ndarray | None = None, low: float = 3.0, high: float = 12.0,
                      f: float = 1.0, averaging: str = "arithmetic") -> dict[str, np.ndarray]:
    """Per-sample metrics ``{name: (N,)}``: ``rel_l2_a`` and ``phase_accuracy`` when the (coarse) truth is
    known, ``misfit_noisy`` always, ``misfit_clean`` when the clean solution is known. One solve per sample."""
    u_rec = solve_recovered(a, u_obs.shape[-1], f, averaging)
    out = {"misfit_noisy": relative_l2(u_rec, u_obs)}
    if u_clean is not None:
        out["misfit_clean"] = relative_l2(u_rec, u_clean)
    if a_true is not None:
        out["rel_l2_a"] = relative_l2(a, a_true)
        out["phase_accuracy"] = phase_accuracy(a, a_true, low, high)
    return out
