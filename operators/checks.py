"""Entry checks shared by the models: clear errors for wrong shapes, channel counts and NaN.

Models call [`check_grid_input`][] on ``x`` and [`grid_pos`][] for ``pos`` at the top of
``forward`` (once per model call, never per layer); point-set models call [`check_point_input`][]
on ``x, pos, weights, mask, boundary``.  All raise ``ValueError`` naming the expected and the
received value.

The NaN/inf check reads every input value and, on an accelerator, makes the host wait for the
device at each forward.  [`set_finite_check`][] chooses: ``"cpu"`` (default: check tensors on
the CPU, where it costs one pass over the input and no synchronization; data files are checked
once when they are loaded), ``"always"`` or ``"never"``.
"""
from __future__ import annotations

import torch

from .layout import grid_coordinates

_FINITE_CHECK = {"mode": "cpu"}


def set_finite_check(mode: str) -> None:
    """When models check their inputs for NaN/inf: ``"cpu"`` (default), ``"always"`` or ``"never"``."""
    if mode not in ("cpu", "always", "never"):
        raise ValueError(f"finite check mode must be 'cpu', 'always' or 'never', got {mode!r}")
    _FINITE_CHECK["mode"] = mode


def _checks_finite(x: torch.Tensor) -> bool:
    mode = _FINITE_CHECK["mode"]
    return mode == "always" or (mode == "cpu" and x.device.type == "cpu")


def check_finite(t: torch.Tensor, where: str) -> None:
    """ValueError if ``t`` holds NaN or inf (when [`set_finite_check`][] says to look)."""
    if _checks_finite(t) and not bool(torch.isfinite(t).all()):
        n_bad = int((~torch.isfinite(t)).sum())
        raise ValueError(f"{where} contains NaN or inf ({n_bad} of {t.numel()} values); one bad value would "
                         f"make every output NaN: check the input and its normalization")


def check_grid_input(x: torch.Tensor, ndim: int, channels: int, where: str,
                     dtype: torch.dtype | None = None) -> None:
    """Check ``x`` is a finite channels-last grid tensor ``(b, *grid, channels)`` with ``ndim`` grid axes,
    a non-empty batch and, if given, the floating dtype ``dtype`` of the model's weights."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{where}: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != ndim + 2:
        grid = ", ".join(f"n{i + 1}" for i in range(ndim))
        raise ValueError(
            f"{where}: expected x of shape (batch, {grid}, {channels}) (rank {ndim + 2}, "
            f"channels last), got shape {tuple(x.shape)} (rank {x.dim()})"
        )
    if x.shape[-1] != channels:
        raise ValueError(
            f"{where}: expected {channels} input channel(s) in the last dim, got {x.shape[-1]} "
            f"(shape {tuple(x.shape)}); inputs are channels-last (batch, *grid, channels)"
        )
    if not torch.is_floating_point(x):
        raise ValueError(f"{where}: x must be a floating-point tensor, got {x.dtype}")
    if x.shape[0] == 0 or any(n == 0 for n in x.shape[1:-1]):
        raise ValueError(f"{where}: got an empty input of shape {tuple(x.shape)}; give at least one sample "
                         "and a non-empty grid")
    if dtype is not None and x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
        raise ValueError(f"{where}: x is {x.dtype} but the model's weights are {dtype}; convert the input "
                         f"(x.to({dtype})) or the model (model.to({x.dtype}))")
    if _checks_finite(x) and not bool(torch.isfinite(x).all()):
        n_bad = int((~torch.isfinite(x)).sum())
        raise ValueError(
            f"{where}: input contains NaN or inf ({n_bad} of {x.numel()} values); "
            "check the data and its normalization"
        )


def grid_pos(
    pos: torch.Tensor | None, x: torch.Tensor, periodic: bool, where: str
) -> torch.Tensor:
    """Coordinates ``(b, *grid, d)`` for the grid of ``x: (b, *grid, c)``.

    ``pos=None`` gives the uniform grid of [`grid_coordinates`][]
    (``periodic`` chooses ``i/n`` or ``i/(n-1)``); a given ``pos`` must be ``(b, *grid, d)`` or
    ``(1, *grid, d)`` with ``d`` the number of grid axes, and finite.
    """
    grid = tuple(x.shape[1:-1])
    d = len(grid)
    if pos is None:
        coords = grid_coordinates(grid, periodic=periodic, dtype=x.dtype, device=x.device)
        return coords.unsqueeze(0).expand(x.shape[0], *coords.shape)
    expected = f"({x.shape[0]}, {', '.join(map(str, grid))}, {d})"
    if not isinstance(pos, torch.Tensor) or pos.dim() != d + 2:
        shape = tuple(pos.shape) if isinstance(pos, torch.Tensor) else type(pos).__name__
        raise ValueError(f"{where}: expected pos of shape {expected}, got {shape}")
    if tuple(pos.shape[1:-1]) != grid or pos.shape[-1] != d or pos.shape[0] not in (1, x.shape[0]):
        raise ValueError(
            f"{where}: expected pos of shape {expected} (coordinates of the input grid), "
            f"got {tuple(pos.shape)}"
        )
    if _checks_finite(pos) and not bool(torch.isfinite(pos).all()):
        raise ValueError(f"{where}: pos contains NaN or inf")
    return pos.to(x.dtype).expand(x.shape[0], *pos.shape[1:])


def weight_dtype(module: torch.nn.Module) -> torch.dtype | None:
    """The dtype of ``module``'s first real floating-point parameter (None if it has none)."""
    for p in module.parameters():
        if p.is_floating_point():
            return p.dtype
    return None


def _shape(t: object) -> object:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__


def check_point_input(x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                      mask: torch.Tensor | None = None, boundary: torch.Tensor | None = None, *,
                      channels: int, where: str, dtype: torch.dtype | None = None) -> None:
    """Check a padded batch of point sets, ``ValueError`` naming what is wrong:

    - ``x (b, n, channels)`` floating, non-empty, in the model's ``dtype`` (see [`check_grid_input`][]);
    - ``pos (b, n, 2)`` floating and finite everywhere (padding included), inside ``[0, 1]²`` on the
      points of positive weight;
    - ``weights (b, n)`` finite, >= 0, with a positive sum in every sample;
    - ``mask (b, n)`` bool (True on real points) or None (all real); weights 0 wherever mask is False;
    - ``boundary (b, n)`` bool or None;
    - ``x`` finite.

    The checks of values (everything but shapes and dtypes) run when [`set_finite_check`][] says so.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"{where}: expected x of shape (batch, n_points, {channels}), got {_shape(x)}")
    b, n, c = x.shape
    if c != channels:
        raise ValueError(f"{where}: expected {channels} input channel(s) in the last dim of x "
                         f"(batch, n_points, channels), got shape {tuple(x.shape)}")
    if not torch.is_floating_point(x):
        raise ValueError(f"{where}: x must be a floating-point tensor, got {x.dtype}")
    if b == 0 or n == 0:
        raise ValueError(f"{where}: got an empty input of shape {tuple(x.shape)}; give at least one sample "
                         "and one point")
    if dtype is not None and x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
        raise ValueError(f"{where}: x is {x.dtype} but the model's weights are {dtype}; convert the input "
                         f"(x.to({dtype})) or the model (model.to({x.dtype}))")
    if not isinstance(pos, torch.Tensor) or tuple(pos.shape) != (b, n, 2) or not torch.is_floating_point(pos):
        raise ValueError(f"{where}: expected pos of shape ({b}, {n}, 2) (floating node coordinates in "
                         f"[0, 1]², one row per point of x), got {_shape(pos)}")
    if not isinstance(weights, torch.Tensor) or tuple(weights.shape) != (b, n) \
            or not torch.is_floating_point(weights):
        raise ValueError(f"{where}: expected weights of shape ({b}, {n}) (floating quadrature weights, "
                         f"0 on padding), got {_shape(weights)}")
    for name, t in (("mask", mask), ("boundary", boundary)):
        if t is not None and (not isinstance(t, torch.Tensor) or tuple(t.shape) != (b, n)
                              or t.dtype != torch.bool):
            got = f"{_shape(t)} {t.dtype}" if isinstance(t, torch.Tensor) else _shape(t)
            raise ValueError(f"{where}: expected {name} of shape ({b}, {n}) and dtype bool, got {got}")
    if not _checks_finite(x):  # the value checks below read every value (see set_finite_check)
        return
    if not bool(torch.isfinite(pos).all()):
        raise ValueError(f"{where}: pos contains NaN or inf (padding points too must hold finite "
                         "coordinates, e.g. 0)")
    if not bool(torch.isfinite(weights).all()):
        raise ValueError(f"{where}: weights contain NaN or inf")
    if bool((weights < 0).any()):
        raise ValueError(f"{where}: weights must be >= 0 (quadrature weights, 0 on padding)")
    empty = (weights.sum(dim=1) <= 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"{where}: the weights of sample(s) {empty} sum to 0; every sample needs a point "
                         "of positive weight")
    if mask is not None and bool((weights[~mask] != 0).any()):
        raise ValueError(f"{where}: weights must be 0 on padding (where mask is False); got nonzero "
                         "weights there")
    real = weights > 0
    tol = 1e-6
    outside = ((pos < -tol) | (pos > 1 + tol)).any(dim=-1) & real
    if bool(outside.any()):
        raise ValueError(f"{where}: {int(outside.sum())} point(s) of positive weight lie outside [0, 1]² "
                         f"(coordinates from {float(pos[real].min()):.4g} to {float(pos[real].max()):.4g}); "
                         "map the domain into the unit square")
    if not bool(torch.isfinite(x).all()):
        n_bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{where}: x contains NaN or inf ({n_bad} of {x.numel()} values); "
                         "check the data and its normalization (padding points must hold finite values, e.g. 0)")
