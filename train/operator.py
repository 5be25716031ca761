"""The trained operator users load for inference: a model between its data normalisers.

Normalisation (decided once, the same at every resolution): the network sees point-wise Gaussian
normalised inputs ``x̂ = (x − μ_x)/σ_x`` (plus the input noise of the inverse problem, an
[`InputNoise`][]) and its output is read as a normalised target, decoded
``y = ŷ σ_y + μ_y`` *before* any loss or metric, so those are always in raw units.  The normalisers
are fitted on the training split at the file's native resolution and restricted to any other grid
with ``at_resolution``, so a model trained at one resolution is evaluated at another with
consistent statistics.  ``petrov.train.load_operator(RUN_DIR)`` rebuilds one from a run's
checkpoint; its ``noise`` is saved there with it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..common.dtypes import upcast
from ..datasets import InputNoise
from .precision import autocast


class NormalizedOperator(nn.Module):
    """``y = decode(model(encode(x) + noise, pos))`` at any resolution of the training family.

    ``x: (b, *grid, c_in)`` raw units -> ``(b, *grid_out, c_out)`` raw units.  ``model`` is the
    trained network (it sees normalised data); ``x_normalizer``/``y_normalizer`` are fitted
    point-wise Gaussian normalisers (``None``: identity); ``noise`` the input noise of its training
    and test protocol (default none; [`predict`][] adds it only when asked).  The restricted normalisers are cached per (grid, device).
    """

    def __init__(self, model: nn.Module, x_normalizer: Any = None, y_normalizer: Any = None,
                 noise: InputNoise | None = None):
        super().__init__()
        self.model = model
        self.x_normalizer = x_normalizer
        self.y_normalizer = y_normalizer
        self.noise = noise or InputNoise()
        self._cache: dict[tuple, Any] = {}

    def _at(self, which: str, grid: tuple[int, ...], device: torch.device) -> Any:
        base = self.x_normalizer if which == "x" else self.y_normalizer
        if base is None:
            return None
        point_sets = getattr(base, "field", False)  # statistics as functions of the position
        key = (which, () if point_sets else tuple(grid), str(device))
        if key not in self._cache:
            self._cache[key] = (base if point_sets else base.at_resolution(grid[0])).to(device)
        return self._cache[key]

    def prepare(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Restrict the normalisers to the grids of inputs like ``x`` and targets like ``y`` now, so that
        compiled code only reads them: building one checks its statistics on the host, which would split
        the compiled graph."""
        self._at("x", x.shape[1:-1], x.device)
        self._at("y", y.shape[1:-1], y.device)

    def encode(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        """Raw inputs in the units the model takes (``pos``: the points, for point-set data)."""
        check_input(x)
        norm = self._at("x", x.shape[1:-1], x.device)
        return x if norm is None else norm.encode(x, pos) if getattr(norm, "field", False) else norm.encode(x)

    def decode(self, y_hat: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        """The model's output in raw units (``pos``: the points, for point-set data)."""
        norm = self._at("y", y_hat.shape[1:-1], y_hat.device)
        if norm is None:
            return y_hat
        return norm.decode(y_hat, pos) if getattr(norm, "field", False) else norm.decode(y_hat)

    def encode_target(self, y: torch.Tensor) -> torch.Tensor:
        """Raw targets in the units the model outputs (the inverse of [`decode`][])."""
        norm = self._at("y", y.shape[1:-1], y.device)
        return y if norm is None else norm.encode(y)

    def predict(
        self,
        x: torch.Tensor,
        pos: torch.Tensor | None = None,
        *,
        sample_ids: torch.Tensor | np.ndarray | None = None,
        noise: InputNoise | None = None,
        net=None,
        amp: torch.dtype | None = None,
        teacher: torch.Tensor | None = None,
        **inputs: torch.Tensor,
    ) -> torch.Tensor:
        """``decode(net(noise.apply(encode(x), sample_ids), pos))``: the one path from raw inputs to
        raw predictions, in the floating dtype of the model's output (float32 for a 16-bit one, under
        autocast).

        ``noise``: none by default (inference on observed data); training and test scoring pass the
        protocol's, ``self.noise``.  A positive level needs ``sample_ids``, the samples' numbers in
        the data file (they seed each sample's noise).  ``net`` defaults to ``self.model``
        (the trainer passes its DDP-wrapped model under autocast).  ``teacher`` (raw units, the
        target's shape): states a marching model conditions on (teacher forcing), passed to it as
        ``teacher=encode_target(teacher)`` (see [`petrov.operators.trajectory`][]).  ``inputs``: the
        model's other keyword inputs as they are (point sets: ``weights``, ``mask``, ``boundary``, ...).
        """
        x_hat = self.encode(x, pos)
        x_hat = x_hat if noise is None else noise.apply(x_hat, sample_ids)
        extra = {} if teacher is None else {"teacher": self.encode_target(teacher)}
        with autocast(x.device, amp):
            out = (self.model if net is None else net)(x_hat, pos, **inputs, **extra)
        out = self.decode(upcast(out), pos)
        return self._keep_zeros(out, inputs)

    def _keep_zeros(self, out: torch.Tensor, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Point sets: the model's exact zeros on padding and (``dirichlet``) on boundary nodes stay zero
        in raw units (a normaliser's mean there need not be 0)."""
        mask, boundary = inputs.get("mask"), inputs.get("boundary")
        zero = None if mask is None else ~mask
        if boundary is not None and getattr(getattr(self.model, "config", None), "dirichlet", False):
            zero = boundary if zero is None else zero | boundary
        return out if zero is None else out.masked_fill(zero.unsqueeze(-1), 0.0)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        return self.predict(x, pos)

    def normalizer_states(self) -> dict[str, Any]:
        return {"x": self.x_normalizer, "y": self.y_normalizer}


def check_input(x: object) -> None:
    """``x`` is a floating tensor ``(b, *grid, c)`` or ``(b, n_points, c)`` (rank >= 3, channels last), as
    [`check_grid_input`][petrov.operators.checks.check_grid_input] words it; metadata only, no value read."""
    where = "NormalizedOperator"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{where}: x must be a torch.Tensor, got {type(x).__name__}; convert it "
                        f"(torch.as_tensor(x, dtype=torch.float32))")
    if x.dim() < 3:
        raise ValueError(f"{where}: expected x of shape (batch, *grid, channels) (rank >= 3, channels last), "
                         f"got shape {tuple(x.shape)} (rank {x.dim()}); add the missing axis (one channel: "
                         f"x.unsqueeze(-1))")
    if not torch.is_floating_point(x):
        raise ValueError(f"{where}: x must be a floating-point tensor, got {x.dtype}; convert it (x.float())")


__all__ = ["NormalizedOperator"]
