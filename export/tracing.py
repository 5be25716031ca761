"""Tracing an [`InferenceGraph`][petrov.export.graph.InferenceGraph] with ``torch.export``: which axes stay
dynamic, and which models cannot have a dynamic grid size.

The batch axis is always dynamic.  With ``dynamic=True`` the grid size is too: every grid axis is
``torch.export.Dim.AUTO`` (torch finds the range of sizes the traced code holds for, from the guards the
models' size checks leave: e.g. ``n >= 2·modes`` on a spectral layer's first axis, ``n > latent_size`` where a
periodic transfer would otherwise skip its identity case) and the axes of a 2-D grid are tied to one size.

Models whose forward computes a size from the grid size that a graph cannot keep symbolic have a fixed
resolution only (``FIXED_RESOLUTION`` says why); any other model whose trace ties the grid to the example's
size is refused with the generic reason.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch.export import Dim
from torch.utils._sympy.numbers import int_oo

from .formats import quiet_torch
from .graph import InferenceGraph

_SAMPLERS = ("its convolutional samplers pass through an intermediate grid of round(sqrt(n * coarse_size)) "
             "points, a size a graph cannot compute from a symbolic n (the trace fixes it to the example's)")
FIXED_RESOLUTION = {"galerkin2d": _SAMPLERS, "galerkin2d_inverse": _SAMPLERS}
"""Why a model exports at a fixed resolution only, by registered name."""


@dataclass(frozen=True)
class GridSizes:
    """The grid sizes a dynamic export computes the operator at: ``low <= n <= high`` (``high`` None: no upper
    bound), ``n`` not in ``excluded``."""

    low: int
    high: int | None = None
    excluded: tuple[int, ...] = ()

    def __contains__(self, n: object) -> bool:
        return isinstance(n, int) and self.low <= n and (self.high is None or n <= self.high) \
            and n not in self.excluded

    def __str__(self) -> str:
        text = f"{self.low} <= n" + (f" <= {self.high}" if self.high is not None else "")
        return text + "".join(f", n != {k}" for k in self.excluded)


@dataclass(frozen=True)
class Traced:
    """``program``; ``sizes``: the [`GridSizes`][] it takes, None when its grid is fixed."""

    program: torch.export.ExportedProgram
    sizes: GridSizes | None


_BOUND = re.compile(r"L\['x'\]\.size\(\)\[(\d+)\] (>=|>|<=|<|!=) (\d+)")
_REVERSED = re.compile(r"(\d+) (<=|<) L\['x'\]\.size\(\)\[(\d+)\]")


def _grid_sizes(program: torch.export.ExportedProgram) -> GridSizes | None:
    """The sizes the input's grid axes take, None if they are fixed: the range torch records for the size,
    narrowed by the plain bounds among the guards on the input (``n >= 9``, ``n != 8``: where a model's code
    branches on the size, e.g. a periodic transfer that is the identity when the sizes agree).  A
    ``torch.export`` program checks its guards when it runs; an ONNX runtime does not, so the range is said
    with the file."""
    x = next(node for node in program.graph.nodes if node.op == "placeholder" and node.name == "x")
    size = x.meta["val"].shape[1]
    if not isinstance(size, torch.SymInt):
        return None
    bounds = program.range_constraints[size.node.expr]
    low, high = int(bounds.lower), (None if bounds.upper == int_oo else int(bounds.upper))
    excluded = set()
    # torch keeps the input guards it checks at run time as text (2.13: ExportedProgram._guards_code)
    for guard in getattr(program, "_guards_code", None) or ():
        for clause in str(guard).split(" and "):
            if found := _BOUND.fullmatch(clause.strip()):
                axis, op, value = found.groups()
            elif found := _REVERSED.fullmatch(clause.strip()):  # "9 <= n" is "n >= 9"
                value, op, axis = found.groups()
                op = {"<=": ">=", "<": ">"}[op]
            else:
                continue
            if int(axis) < 1:  # the batch
                continue
            value = int(value)
            if op in (">=", ">"):
                low = max(low, value + (op == ">"))
            elif op in ("<=", "<"):
                bound = value - (op == "<")
                high = bound if high is None else min(high, bound)
            else:
                excluded.add(value)
    while low in excluded:
        low += 1
    return GridSizes(low, high, tuple(sorted(k for k in excluded if k > low and (high is None or k <= high))))


def trace(graph: InferenceGraph, example: torch.Tensor, model: str, dynamic: bool) -> Traced:
    """``torch.export.export(graph, (example,))`` with a dynamic batch, and with ``dynamic`` a dynamic grid
    size; ValueError naming the model and the reason when the grid size cannot be dynamic.  ``example``:
    at least 2 samples (a batch of 1 would be traced as a constant 1)."""
    if dynamic and model in FIXED_RESOLUTION:
        raise ValueError(f"{model} exports at a fixed resolution only: {FIXED_RESOLUTION[model]}; leave out "
                         f"--dynamic")
    shapes = {0: Dim("batch", min=1)}
    if dynamic:
        shapes.update({axis: Dim.AUTO(min=2) for axis in range(1, example.dim() - 1)})
    try:
        with quiet_torch():
            program = torch.export.export(graph, (example,), dynamic_shapes={"x": shapes})
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{model} cannot be exported: torch.export failed ({type(err).__name__}: {first})") from err
    sizes = _grid_sizes(program) if dynamic else None
    if dynamic and sizes is None:
        raise ValueError(f"{model} exports at a fixed resolution only: its forward ties the grid size to the "
                         f"example's (a size computed as a number); leave out --dynamic")
    return Traced(program, sizes)


__all__ = ["FIXED_RESOLUTION", "GridSizes", "Traced", "trace"]
