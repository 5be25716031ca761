"""Surrogate-based inversion: gradient descent on the coefficient through a trained forward operator.

For a batch of observations ``u_obs (b, m, m)`` minimize, with Adam for a fixed number of steps,

    sum_i 1/2 ||F_theta(a_f,i) - u_obs,i||^2 / ||u_obs,i||^2 + reg_weight * TV_delta(a_c,i),
    a_c = to_coefficient(theta),  a_f = prolong(a_c, m)

where ``F_theta`` is a trained Darcy operator a -> u (``petrov.train.load_operator``: raw units in
and out, channels-last, any grid its normalizers reach) evaluated on the observation grid. The
samples are independent (the sum separates), so a batch is one optimization. ``box``: the parameters
are projected onto ``[low, high]`` after each step. The operator's weights are not trained.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np
import torch

from ..common.allocator import retain_freed_memory
from ..common.host import to_numpy
from ..common.progress import progress_bar
from ..grids.layout import grid_coordinates
from .config import InversionConfig
from .parametrization import from_coefficient, prolong, to_coefficient, total_variation


@contextlib.contextmanager
def frozen(module: torch.nn.Module):
    """The module in eval mode with gradients off for its parameters; both restored on exit."""
    flags = [p.requires_grad for p in module.parameters()]
    was_training = module.training
    module.eval().requires_grad_(False)
    try:
        yield module
    finally:
        for p, flag in zip(module.parameters(), flags):
            p.requires_grad_(flag)
        module.train(was_training)


def forward_on_grid(operator, a: torch.Tensor) -> torch.Tensor:
    """``operator`` applied to coefficients ``a (b, n, n)`` on the node grid: u ``(b, n, n)``."""
    n = a.shape[-1]
    pos = grid_coordinates((n, n), periodic=False, dtype=a.dtype, device=a.device)
    return operator(a.unsqueeze(-1), pos.expand(a.shape[0], *pos.shape))[..., 0]


def _batch(operator, u_obs: torch.Tensor, theta: torch.Tensor, cfg: InversionConfig) -> list[float]:
    """Optimize ``theta`` in place for one batch; returns the objective (batch mean) at every step."""
    opt = torch.optim.Adam([theta], lr=cfg.lr)
    norm2 = (u_obs**2).sum(dim=(1, 2))
    history = []
    for _ in range(cfg.steps + 1):
        a_c = to_coefficient(theta, cfg)
        u = forward_on_grid(operator, prolong(a_c, u_obs.shape[-1]))
        loss = (0.5 * ((u - u_obs) ** 2).sum(dim=(1, 2)) / norm2
                + cfg.reg_weight * total_variation(a_c, cfg.tv_delta))
        history.append(loss.detach().mean().item())
        if len(history) > cfg.steps:  # the last entry is the objective of the returned parameters
            break
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        opt.step()
        if cfg.parametrization == "box":
            with torch.no_grad():
                theta.clamp_(cfg.low, cfg.high)
    return history


def invert_surrogate(operator, u_obs: np.ndarray, cfg: InversionConfig, start: np.ndarray | None = None):
    """Recover ``a_c (N, grid, grid)`` from ``u_obs (N, m, m)`` through ``operator`` (a -> u), batch by batch.

    ``start``: ``(N, grid, grid)`` starting coefficients (default the midpoint). Returns ``(a_c, info)``;
    ``info[i]`` holds the objective before and after and the CPU seconds per sample of its batch.  The
    process keeps the host memory the steps free for the next ones, as training does
    ([`retain_freed_memory`][petrov.common.allocator.retain_freed_memory]).
    """
    retain_freed_memory()
    try:
        dtype = next(operator.parameters()).dtype
        device = next(operator.parameters()).device
    except StopIteration:
        dtype, device = torch.float32, torch.device("cpu")
    n_c, n = cfg.grid, len(u_obs)
    if start is None:
        start = np.full((n, n_c, n_c), cfg.threshold)
    out, info = np.empty((n, n_c, n_c)), []
    with frozen(operator):
        batches = progress_bar(range(0, n, cfg.batch_size), desc="surrogate inversion", unit="batch", leave=False)
        for lo in batches:
            hi = min(n, lo + cfg.batch_size)
            t0 = time.process_time()
            obs = torch.as_tensor(u_obs[lo:hi], dtype=dtype, device=device)
            theta = from_coefficient(torch.as_tensor(start[lo:hi], dtype=dtype, device=device), cfg)
            theta.requires_grad_(True)
            history = _batch(operator, obs, theta, cfg)
            with torch.no_grad():
                out[lo:hi] = to_numpy(to_coefficient(theta, cfg).double())
            seconds = (time.process_time() - t0) / (hi - lo)
            info += [{"objective_start": history[0], "objective": history[-1], "steps": cfg.steps,
                      "cpu_seconds": seconds}] * (hi - lo)
    return out, info
