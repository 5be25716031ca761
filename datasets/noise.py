"""The inverse problem's input noise: one object, [`InputNoise`][], from the data to the operator.

The reference protocol adds ``level · ξ`` with ``ξ ~ N(0, 1)`` to the point-wise normalised input,
to training and test inputs alike.  ``ξ`` of a sample is drawn from its own generator
``np.random.default_rng([seed, 3, i])`` (``i`` its number in the data file; stream 3 separates it from
the GRF streams 1 and 2 of [`grf`][]), so a sample's noise is the same whatever the batch, order or
process.  The level comes from the data (a darcy-inverse file records it) or the config
(``data.noise``); the seed from ``data.noise_seed``.  A trained operator keeps its ``InputNoise``
(``petrov.train.NormalizedOperator.noise``, saved in its checkpoint), so evaluation and inversion add
exactly the noise it was trained with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..common.host import to_numpy

_NOISE_STREAM = 3


def add_noise(x: torch.Tensor, noise: float, seed: int, indices) -> torch.Tensor:
    """``x + noise * N(0, 1)`` for normalised inputs ``x (b, *grid, c)`` of file samples ``indices``
    (the noise of sample ``i`` seeded by ``(seed, i)``: see the module docstring)."""
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise}")
    idx = to_numpy(indices).reshape(-1)
    if idx.size and (not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0):
        raise ValueError("indices must be the samples' non-negative integer numbers in the file")
    if len(idx) != x.shape[0]:
        raise ValueError(f"{len(idx)} indices for a batch of {x.shape[0]} samples")
    if noise == 0:
        return x
    draws = np.stack([np.random.default_rng([int(seed), _NOISE_STREAM, int(i)]).standard_normal(x.shape[1:])
                      for i in idx])
    return x + noise * torch.from_numpy(draws).to(x.device, x.dtype)


@dataclass(frozen=True)
class InputNoise:
    """``level · ξ`` added to normalised inputs, ``ξ`` seeded per ``(seed, file sample number)``.

    ``InputNoise()`` (level 0) adds nothing.  ``apply(x_hat, sample_ids)``; ``to_state()`` /
    ``from_state`` give and take plain data (checkpoints are loaded with ``weights_only=True``)."""

    level: float = 0.0
    seed: int = 0

    def __post_init__(self):
        level = self.level
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not np.isfinite(level) or level < 0:
            raise ValueError(f"the input noise level must be a finite number >= 0, got {level!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"the input noise seed must be an integer >= 0, got {self.seed!r}")
        object.__setattr__(self, "level", float(level))
        object.__setattr__(self, "seed", int(self.seed))

    def __bool__(self) -> bool:
        return self.level > 0

    def apply(self, x_hat: torch.Tensor, sample_ids: Any = None) -> torch.Tensor:
        """``x_hat + level · ξ`` (``x_hat`` unchanged at level 0); ``sample_ids``: the batch's file
        sample numbers, needed when the level is positive."""
        if not self:
            return x_hat
        if sample_ids is None:
            raise ValueError("adding input noise needs the samples' numbers in the data file (sample_ids): "
                             "they seed each sample's noise")
        return add_noise(x_hat, self.level, self.seed, sample_ids)

    def to_state(self) -> dict[str, Any]:
        return {"level": self.level, "seed": self.seed}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> "InputNoise":
        return cls() if not state else cls(float(state["level"]), int(state["seed"]))
