"""``export_operator``: a trained operator written as an ONNX file or a ``torch.export`` program, checked.

    export_operator("runs/darcy", "darcy.onnx")                          # at the run's training resolution
    export_operator("runs/darcy", "darcy.pt2", format="torch-export", dynamic=True)

The steps: the source's operator ([`load_source`][petrov.export.sources.load_source]), an example input at the
export's resolution, the whole inference path traced ([`InferenceGraph`][petrov.export.graph.InferenceGraph],
[`trace`][petrov.export.tracing.trace]), the file's bytes, and -- unless ``check=False`` -- the file run back
on random inputs and compared with the PyTorch operator's ``predict``: at the export's resolution and, for a
dynamic grid size, at two others among the sizes it takes.  A relative L2 difference above ``TOLERANCE`` is
an error; the file is written (temp file and rename) only after the check passed, so a failure leaves
nothing behind.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..common.files import atomic_write
from ..common.path_checks import check_writable
from ..grids.domain import all_periodic
from ..train.operator import NormalizedOperator
from .formats import ExportFormat, export_format
from .graph import InferenceGraph
from .sources import load_source
from .tracing import GridSizes, trace

TOLERANCE = 1e-5
"""The largest relative L2 difference between the exported file's outputs and the PyTorch operator's."""
EXAMPLE_BATCH = 2  # a batch of 1 would be traced as a constant


@dataclass
class ExportResult:
    """What [`export_operator`][] wrote: ``path``, ``format``, the ``model`` name, the ``resolution`` it was
    traced at, ``sizes`` (the [`GridSizes`][petrov.export.tracing.GridSizes] a dynamic export takes; None:
    fixed), ``differences`` (relative L2 difference from the PyTorch operator per checked
    resolution; empty without the check) and ``bytes``."""

    path: Path
    format: str
    model: str
    resolution: int
    sizes: GridSizes | None
    differences: dict[int, float] = field(default_factory=dict)
    bytes: int = 0
    seconds: float = 0.0


def random_input(operator: NormalizedOperator, n: int, ndim: int, channels: int, batch: int,
                 generator: torch.Generator) -> torch.Tensor:
    """``(batch, n, ..., n, channels)`` float32 raw inputs: ``μ + σ ξ`` with the input statistics at ``n``
    (``ξ`` standard normal), plain ``ξ`` without them."""
    x = torch.randn(batch, *(n,) * ndim, channels, generator=generator)
    norm = operator.x_normalizer
    if norm is None:
        return x
    here = norm.at_resolution(n) if norm.pointwise else norm
    return (here.mean + here.std * x).float()


def check_sizes(operator: NormalizedOperator, n: int, sizes: GridSizes, periodic: bool) -> list[int]:
    """Two grid sizes besides ``n`` to check a dynamic export at: a coarser and a finer one inside ``sizes``
    that the operator's input statistics reach (nested sub-grids first: ``n/2`` and ``2n`` on periodic and
    cell grids, ``(n-1)/2 + 1`` and ``2(n-1) + 1`` on node grids), else the nearest sizes that are."""
    norm = operator.x_normalizer
    cells = bool(getattr(norm, "cells", False))
    nested = [n // 2, 2 * n] if periodic or cells else [(n - 1) // 2 + 1, 2 * (n - 1) + 1]
    near = [m for k in range(1, 9) for m in (n - k, n + k)]
    chosen: list[int] = []
    for m in nested + near:
        fits = m in sizes and m != n and m not in chosen
        if fits and (norm is None or norm.reaches(m)):
            chosen.append(m)
        if len(chosen) == 2:
            break
    return chosen


def _relative_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-300))


def compare(run, operator: NormalizedOperator, sizes: list[int], ndim: int, channels: int,
            generator: torch.Generator) -> dict[int, float]:
    """The relative L2 difference of ``run(x)`` from ``operator.predict(x)`` on random inputs at each size."""
    out = {}
    for n in sizes:
        x = random_input(operator, n, ndim, channels, EXAMPLE_BATCH, generator)
        with torch.no_grad():
            ref = operator.predict(x)
        out[n] = _relative_l2(run(x), ref)
    return out


def export_operator(source: str | os.PathLike, path: str | os.PathLike, format: str | None = None,
                    resolution: int | None = None, dynamic: bool = False, check: bool = True,
                    threads: int | None = None, seed: int = 0) -> ExportResult:
    """Write ``source``'s trained operator (a run folder) to ``path`` as ``format`` (``"onnx"``,
    ``"torch-export"``; None: by the suffix of ``path``, ``.onnx`` or ``.pt2``): the whole inference path,
    raw inputs ``x (b, *grid, c_in)`` to raw outputs, batch size free.

    ``resolution``: the grid size (points per axis) it takes, default the run's training resolution; with
    ``dynamic`` the grid size is an input too (``resolution`` is then the size it is traced and first
    checked at).  ``check``: run the file back (onnxruntime with ``threads`` threads, default torch's;
    ``torch.export.load``) and compare with the PyTorch operator (module docstring).  One-line errors: an
    unknown format, an unwritable ``path``, a source without weights, a model that cannot export (and why),
    a missing package (with the pip line)."""
    started = time.perf_counter()
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"output {str(path)!r} is a folder; give a file name (e.g. "
                                f"{path / 'operator.onnx'})")
    fmt: ExportFormat = export_format(format, path)
    check_writable(path.parent, "output folder")
    src = load_source(source)
    op, model = src.operator, src.operator.model
    if getattr(model, "point_set", False):
        raise ValueError(f"{src.model} takes meshes: a padded batch of point sets (x, pos, weights, mask, "
                         f"boundary) with normalisers that are functions of the position, an input layout petrov "
                         f"export does not write yet (it exports grid operators only)")
    n = resolution if resolution is not None else src.resolution
    if n is None:
        raise ValueError(f"{src.label}: the run does not say its training resolution; give the resolution")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"the resolution must be an integer >= 2 (points per grid axis), got {n!r}")
    ndim, channels = model.grid_ndim, model.input_channels
    generator = torch.Generator().manual_seed(seed)
    try:  # a size the model's modes or the run's statistics do not reach is refused here, by the PyTorch operator
        example = random_input(op, n, ndim, channels, EXAMPLE_BATCH, generator)
        graph = InferenceGraph(op, example, dynamic).eval()
    except ValueError as err:
        raise ValueError(f"cannot export {src.model} at resolution {n}: {err}") from None
    traced = trace(graph, example, src.model, dynamic)
    data = fmt.serialize(traced.program)
    differences: dict[int, float] = {}
    if check:
        run = fmt.runner(data, threads or torch.get_num_threads())
        sizes = [n] + (check_sizes(op, n, traced.sizes, all_periodic(getattr(model.config, "periodic", False)))
                       if traced.sizes else [])
        differences = compare(run, op, sizes, ndim, channels, generator)
        worst = max(differences, key=differences.get)
        if not differences[worst] <= TOLERANCE:
            raise ValueError(f"the {fmt.name} export of {src.model} computes other numbers than the PyTorch "
                             f"operator: relative L2 difference {differences[worst]:.3g} at resolution {worst} "
                             f"(more than {TOLERANCE:g}); nothing written")
    atomic_write(path, data)
    return ExportResult(path, fmt.name, src.model, n, traced.sizes, differences, len(data),
                        time.perf_counter() - started)


__all__ = ["EXAMPLE_BATCH", "ExportResult", "TOLERANCE", "check_sizes", "compare", "export_operator",
           "random_input"]
