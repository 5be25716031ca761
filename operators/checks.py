"""Entry checks shared by the models: clear errors for wrong shapes, channel counts and NaN.

Models call :func:`check_grid_input` on ``x`` and :func:`grid_pos` for ``pos`` at the top of
``forward``; both raise ``ValueError`` naming the expected and the received value.
"""
from __future__ import annotations

import torch

from .layout import grid_coordinates


def check_grid_input(x: torch.Tensor, ndim: int, channels: int, where: str) -> None:
    """Check ``x`` is a finite channels-last grid tensor ``(b, *grid, channels)`` with ``ndim`` grid axes."""
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
    if not bool(torch.isfinite(x).all()):
        n_bad = int((~torch.isfinite(x)).sum())
        raise ValueError(
            f"{where}: input contains NaN or inf ({n_bad} of {x.numel()} values); "
            "check the data and its normalization"
        )


def grid_pos(
    pos: torch.Tensor | None, x: torch.Tensor, periodic: bool, where: str
) -> torch.Tensor:
    """Coordinates ``(b, *grid, d)`` for the grid of ``x: (b, *grid, c)``.

    ``pos=None`` gives the uniform grid of :func:`~petrov.operators.layout.grid_coordinates`
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
    if not bool(torch.isfinite(pos).all()):
        raise ValueError(f"{where}: pos contains NaN or inf")
    return pos.to(x.dtype).expand(x.shape[0], *pos.shape[1:])
