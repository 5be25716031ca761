"""Whether stated uncertainties can be trusted: interval coverage and the phase probabilities' calibration.

- ``interval_coverage(errors, intervals)``: the fraction of samples whose actual error lies in its
  interval ``[low, high]`` (a nominal 90% interval should cover about 90% of held-out samples);
- ``expected_calibration_error(p, outcome, bins)``: the predicted probabilities in ``bins`` equal-width
  bins of [0, 1]; ``ECE = sum_b (n_b / n) |mean(p in b) - frequency of the outcome in b|`` (0: when a
  cell is given probability 0.7 it is the high phase 70% of the time);
- ``reliability(p, outcome, bins)``: the per-bin counts, mean predictions and frequencies behind it;
- ``conformal_scale(errors, predicted, level)``: split-conformal factors ``(c_low, c_high)`` from
  validation samples: the order statistics ``r_(k_low)``, ``r_(k_high)`` of the ratios ``r = error /
  predicted error``, leaving ``e = floor((n + 1)(1 - level))`` of the ``n + 1`` ranks outside (``k_low =
  ceil(e/2)``, ``k_high = n + 1 - floor(e/2)``): for a new sample exchangeable with them,
  ``[c_low, c_high] * predicted`` holds its error with probability ``1 - e/(n + 1) >= level``, as close
  to ``level`` as ``n`` allows (the odd rank goes to the lower tail: an error above the interval is the
  worse surprise).
"""
from __future__ import annotations

import numpy as np


def interval_coverage(errors: np.ndarray, intervals: np.ndarray) -> float:
    """Fraction of ``errors (N,)`` inside ``intervals (N, 2)`` (ends included)."""
    errors, intervals = np.asarray(errors, dtype=np.float64), np.asarray(intervals, dtype=np.float64)
    if intervals.shape != (len(errors), 2):
        raise ValueError(f"intervals must have shape (N, 2) = ({len(errors)}, 2), got {intervals.shape}")
    if len(errors) == 0:
        raise ValueError("no samples to measure the coverage on")
    return float(np.mean((intervals[:, 0] <= errors) & (errors <= intervals[:, 1])))


def reliability(p: np.ndarray, outcome: np.ndarray, bins: int = 10) -> dict[str, np.ndarray]:
    """``count``, ``mean_p`` and ``frequency`` per bin ``(bins,)`` of the probabilities ``p`` (any shape)
    against the 0/1 ``outcome`` of the same shape (empty bins: count 0, NaN means)."""
    p, outcome = np.asarray(p, dtype=np.float64).ravel(), np.asarray(outcome, dtype=np.float64).ravel()
    if p.shape != outcome.shape:
        raise ValueError(f"probabilities and outcomes differ in size: {p.size} vs {outcome.size}")
    if p.size == 0 or not np.isfinite(p).all() or (p < 0).any() or (p > 1).any():
        raise ValueError("probabilities must be a non-empty array of finite values in [0, 1]")
    if not (isinstance(bins, (int, np.integer)) and bins >= 1):
        raise ValueError(f"bins must be an integer >= 1, got {bins!r}")
    which = np.minimum((p * bins).astype(int), bins - 1)  # p = 1 falls in the last bin
    count = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, p, minlength=bins) / count
        frequency = np.bincount(which, outcome, minlength=bins) / count
    return {"count": count, "mean_p": mean_p, "frequency": frequency}


def expected_calibration_error(p: np.ndarray, outcome: np.ndarray, bins: int = 10) -> float:
    """``sum_b (n_b / n) |mean(p in b) - frequency in b|`` over the non-empty bins (see the module)."""
    table = reliability(p, outcome, bins)
    used = table["count"] > 0
    weights = table["count"][used] / table["count"].sum()
    return float(np.sum(weights * np.abs(table["mean_p"][used] - table["frequency"][used])))


def _ranks(n: int, level: float) -> tuple[int, int]:
    excluded = int(np.floor((n + 1) * (1 - level) + 1e-9))  # the 1e-9: 0.9 is not exact in binary
    return -(-excluded // 2), n + 1 - excluded // 2


def conformal_scale(errors: np.ndarray, predicted: np.ndarray, level: float = 0.9) -> tuple[float, float]:
    """``(c_low, c_high)`` such that ``[c_low, c_high] * predicted`` is a ``level`` interval of the error
    (split conformal on the ratios ``errors / predicted`` of validation samples; see the module)."""
    errors, predicted = np.asarray(errors, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if errors.shape != predicted.shape or errors.ndim != 1 or len(errors) == 0:
        raise ValueError(f"errors and predicted errors must be two (N,) arrays, got {errors.shape}, {predicted.shape}")
    if not (np.isfinite(errors).all() and np.isfinite(predicted).all() and (predicted > 0).all()):
        raise ValueError("errors must be finite and predicted errors finite and positive")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    n, ratios = len(errors), np.sort(errors / predicted)
    low, high = _ranks(n, level)
    if high > n:
        need = next(k for k in range(1, 10**6) if _ranks(k, level)[1] <= k)
        raise ValueError(f"a {level:g} interval needs at least {need} validation samples, got {n}")
    return (float(ratios[low - 1]) if low >= 1 else 0.0), float(ratios[high - 1])
