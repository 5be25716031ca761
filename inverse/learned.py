"""Learned inversion: a trained inverse operator u -> a (``petrov.train.load_operator``), used as is.

The operator takes the observation ``u (b, m, m, 1)`` in physical units on the node grid with its
coordinates and returns the coefficient on its own output grid (the coarse grid it was trained on);
a different requested grid is reached by bilinear interpolation between node grids.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..common.host import to_numpy
from .parametrization import prolong
from .surrogate import forward_on_grid


def output_grid(operator, n_obs: int) -> int:
    """The output grid of ``operator`` for ``n_obs``-point inputs (one forward pass on zeros)."""
    return int(predict(operator, np.zeros((1, n_obs, n_obs)))[0].shape[-1])


@torch.no_grad()
def predict(operator, u_obs: np.ndarray, batch_size: int = 16) -> np.ndarray:
    """``operator`` on ``u_obs (N, m, m)``: coefficients ``(N, k, k)`` on its output grid (float64).

    A grid the operator cannot take (its normalizers or layers) is a ValueError naming the grid.
    """
    try:
        p = next(operator.parameters())
        dtype, device = p.dtype, p.device
    except StopIteration:
        dtype, device = torch.float32, torch.device("cpu")
    operator.eval()
    parts = []
    for lo in range(0, len(u_obs), batch_size):
        u = torch.as_tensor(u_obs[lo:lo + batch_size], dtype=dtype, device=device)
        try:
            parts.append(to_numpy(forward_on_grid(operator, u).double()))
        except (RuntimeError, ValueError) as err:
            raise ValueError(f"the operator cannot take inputs on a {u.shape[-1]} x {u.shape[-1]} grid: {err}") from None
    return np.concatenate(parts)


def invert_learned(operator, u_obs: np.ndarray, grid: int, batch_size: int = 16,
                   bounds: tuple[float, float] = (3.0, 12.0)):
    """``a (N, grid, grid)`` predicted by the inverse ``operator`` from ``u_obs (N, m, m)``; ``(a, info)``.

    The prediction is clipped to the coefficient ``bounds`` ``[low, high]``, the admissible set the
    other methods optimize over: a learned map may step outside it (e.g. slightly below 0 in the
    corner cells), and the PDE, hence the data misfit, needs ``a > 0``.
    """
    t0 = time.process_time()
    a = predict(operator, u_obs, batch_size)
    if a.shape[-1] != grid:
        a = to_numpy(prolong(torch.from_numpy(a), grid))
    a = np.clip(a, *bounds)
    seconds = (time.process_time() - t0) / max(1, len(u_obs))
    return a, [{"cpu_seconds": seconds}] * len(u_obs)
