"""Whether stated uncertainties can be trusted: interval coverage and the phase probabilities' calibration.

- ``interval_coverage(errors, intervals)``: the fraction of samples whose actual error lies in its
  interval ``[low, high]`` (a nominal 90% interval should cover about 90% of held-out samples);
- ``expected_calibration_error(p, outcome, bins)``: the predicted probabilities in ``bins`` equal-width
  bins of [0, 1]; ``ECE = sum_b (n_b / n) |mean(p in b) - frequency of the outcome in b|`` (0: when a
  cell is given probability 0.7 it is the high phase 70% of the time);
- ``reliability(p, outcome, bins)``: the per-bin counts, mean predictions and frequencies behind it.
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
