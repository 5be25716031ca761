"""What every grid model shares: its config, its input checks, the Dirichlet boundary.

A grid model takes channels-last grids ``x: (b, *grid, in_channels)`` with ``ndim`` grid axes and
optional coordinates ``pos: (b, *grid, ndim)`` (default: the uniform grid of its config,
``i/n`` periodic or ``i/(n-1)`` node grid; see :func:`petrov.operators.checks.grid_pos`).  It keeps
its config dataclass as ``.config`` (``.cfg``, the 0.1 name, reads the same object): with the
registered name that is all :func:`petrov.operators.build_model` needs to rebuild it.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..checks import check_grid_input, grid_pos, weight_dtype


class GridOperator(nn.Module):
    """Base of the grid models: ``.config``, and :meth:`grid_inputs` at the top of ``forward``.

    Subclasses set ``ndim`` (grid axes; 0: given by the config's ``ndim``) and, if their input is
    not ``config.in_channels`` wide, ``input_channels``."""

    ndim: int = 0

    def __init__(self, config):
        super().__init__()
        self.config = config

    @property
    def cfg(self):
        """The config dataclass (the name petrov 0.1 used; ``.config`` is the same object)."""
        return self.config

    @property
    def grid_ndim(self) -> int:
        return self.ndim or int(self.config.ndim)

    @property
    def input_channels(self) -> int:
        return self.config.in_channels

    def grid_inputs(self, x: torch.Tensor, pos: torch.Tensor | None) -> torch.Tensor:
        """Check ``x`` (shape, channels, dtype, NaN/inf; a clear ``ValueError`` naming the model) and
        return the coordinates ``(b, *grid, ndim)``: ``pos`` checked, or the config's uniform grid."""
        where = type(self).__name__
        check_grid_input(x, self.grid_ndim, self.input_channels, where, weight_dtype(self))
        return grid_pos(pos, x, self.config.periodic, where)


def zero_boundary(out: torch.Tensor) -> torch.Tensor:
    """``(b, n_1, n_2, c)``: the interior kept, exact zeros on the first and last rows and columns
    (the Dirichlet value of a node-grid solution)."""
    return F.pad(out[:, 1:-1, 1:-1], (0, 0, 1, 1, 1, 1))
