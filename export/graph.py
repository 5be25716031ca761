"""The module an export traces: a trained grid operator's whole inference path, raw inputs to raw outputs.

    y = decode(upcast(model(encode(x))))        x (b, *grid, c_in) raw units -> y (b, *grid_out, c_out) raw units

what ``NormalizedOperator.predict(x)`` computes (no input noise, default coordinates), with the normalisers
as [`ExportedNormalizer`][petrov.export.statistics.ExportedNormalizer]s: constants of the example's grid, or
statistics resampled in the graph when the grid size is a dynamic axis.

The models' own code needs no export mode: while ``torch.export`` traces (``torch.compiler.is_compiling()``
is true there) the spectral layers and periodic transfers take their real-arithmetic form (truncated DFT
matrices, [`petrov.grids.fourier_modes`][]: no complex tensor in the graph, which ONNX could not hold),
value checks that would read a tensor step aside (``petrov.operators.checks``), and shape-only matrices
enter as constants of the example's sizes, or as traced builders of symbolic sizes.
"""
from __future__ import annotations

import torch
from torch import nn

from ..common.dtypes import upcast
from ..train.operator import NormalizedOperator
from .statistics import ExportedNormalizer


class InferenceGraph(nn.Module):
    """``forward(x) = operator.predict(x)`` for a grid operator, ready to trace.

    ``example``: an input ``(b, *grid, c_in)`` at the export's resolution (it fixes the statistics' grids);
    ``dynamic``: keep the native statistics to resample them to another grid size, and on 2-D grids tie the
    axes to one size (square grids, as the data are: the normalisers take one resolution)."""

    def __init__(self, operator: NormalizedOperator, example: torch.Tensor, dynamic: bool = False):
        super().__init__()
        self.model = operator.model
        with torch.no_grad():
            y = operator.predict(example)
        self.x_normalizer = ExportedNormalizer(operator.x_normalizer, tuple(example.shape[1:-1]), dynamic)
        self.y_normalizer = ExportedNormalizer(operator.y_normalizer, tuple(y.shape[1:-1]), dynamic)
        self.square = dynamic and example.dim() > 3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.square:
            for n in x.shape[2:-1]:
                torch._check(n == x.shape[1], lambda: "the grid must be square (one size on every axis)")
        x_hat = self.x_normalizer.encode(x)
        return self.y_normalizer.decode(upcast(self.model(x_hat)))


__all__ = ["InferenceGraph"]
