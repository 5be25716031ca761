"""The inversion methods by name, and one batch of observations through one of them.

``METHODS`` (one decorator adds one): ``pde`` (finite-difference solve + adjoint, L-BFGS-B),
``refined`` (``pde`` from the learned inverse's answer, stopped by the discrepancy principle),
``surrogate`` (Adam through a trained forward operator) and ``learned`` (a trained inverse operator).
A method is called as ``method(u, cfg, ops, start, ctx)`` with observations ``u (N, m, m)`` and
returns ``(a (N, grid, grid), info)``, one info dict per sample.

[`invert_samples`][] runs one batch: the learned start when asked for, the method, and for the
pde-based methods the Laplace uncertainty of each answer (``info[i]["uncertainty"]``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..common.registry import Registry
from .config import InversionConfig
from .laplace import laplace_uncertainty
from .learned import invert_learned
from .pde import invert_pde
from .surrogate import invert_surrogate

METHODS: Registry[Callable] = Registry("inversion method")
"""The inversion methods by name (``learned``, ``pde``, ``refined``, ``surrogate``)."""
NEEDS = {"surrogate": "forward", "learned": "inverse", "refined": "inverse"}  # the trained operator each needs
STARTS_LEARNED = {"refined"}  # methods that always start from the learned answer
UNCERTAIN = {"pde", "refined"}  # methods whose answers get a posterior (uncertainty=True)


@dataclass
class Operators:
    """The trained operators a method may use (``NormalizedOperator``-like: raw units in and out)."""

    forward: Any = None
    inverse: Any = None


@dataclass
class Context:
    """What a method may use besides the observations: their noise std ``(m, m)``/``(N, m, m)`` or None,
    the iterate trace flag, the per-sample posterior hook and the progress flag."""

    noise_std: np.ndarray | None = None
    trace: bool = False
    posterior: Callable[..., dict[str, Any]] | None = None
    progress: bool = True


@METHODS.register("pde")
def _pde(u: np.ndarray, cfg: InversionConfig, ops: Operators, start: np.ndarray | None, ctx: Context):
    return invert_pde(u, cfg, start, noise_std=ctx.noise_std, trace=ctx.trace, posterior=ctx.posterior,
                      progress=ctx.progress)


@METHODS.register("refined")
def _refined(u: np.ndarray, cfg: InversionConfig, ops: Operators, start: np.ndarray | None, ctx: Context):
    return _pde(u, replace(cfg, stop="discrepancy"), ops, start, ctx)


@METHODS.register("surrogate")
def _surrogate(u: np.ndarray, cfg: InversionConfig, ops: Operators, start: np.ndarray | None, ctx: Context):
    return invert_surrogate(ops.forward, u, cfg, start)


@METHODS.register("learned")
def _learned(u: np.ndarray, cfg: InversionConfig, ops: Operators, start: np.ndarray | None, ctx: Context):
    return invert_learned(ops.inverse, u, cfg.grid, cfg.batch_size, (cfg.low, cfg.high))


def invert_samples(method: str, u: np.ndarray, sample_ids: np.ndarray, cfg: InversionConfig, ops: Operators,
                   start: str = "midpoint", *, noise_std: np.ndarray | None = None, uncertainty: bool = False,
                   trace: bool = False, progress: bool = True) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """``method`` on observations ``u (N, m, m)`` (file samples ``sample_ids``): ``(a, info)``.

    ``start="learned"`` (always for ``refined``) starts pde/surrogate from the inverse operator's answer,
    whose CPU seconds are added to each sample's. ``uncertainty``: the Laplace summary of each answer
    (pde and refined only) in ``info[i]["uncertainty"]``, its CPU seconds in
    ``info[i]["uncertainty_cpu_seconds"]``.
    """
    start_a, start_seconds = None, 0.0
    if (start == "learned" or method in STARTS_LEARNED) and method != "learned":
        t0 = time.process_time()
        start_a = invert_learned(ops.inverse, u, cfg.grid, cfg.batch_size, (cfg.low, cfg.high))[0]
        start_seconds = (time.process_time() - t0) / len(u)
    posterior = None
    if uncertainty:
        ids = [int(i) for i in sample_ids]
        posterior = lambda i, a, obs, sigma: laplace_uncertainty(a, obs, sigma, cfg, ids[i])  # noqa: E731
    ctx = Context(noise_std=noise_std, trace=trace, posterior=posterior, progress=progress)
    a, info = METHODS.get(method)(u, cfg, ops, start_a, ctx)
    if start_a is not None:
        info = [{**i, "cpu_seconds": i["cpu_seconds"] + start_seconds} for i in info]
    return a, info


__all__ = ["Context", "METHODS", "NEEDS", "Operators", "STARTS_LEARNED", "UNCERTAIN", "invert_samples"]
