"""``petrov export``: a trained operator as an ONNX file or a ``torch.export`` program.

    petrov export runs/darcy -o darcy.onnx                                 # at the run's training resolution
    petrov export runs/darcy --format torch-export -o darcy.pt2 --resolution 141
    petrov export runs/burgers -o burgers.onnx --dynamic                   # the grid size an input too

The file maps raw inputs ``x (batch, *grid, channels)`` to raw outputs (the run's normalisers inside) and is
checked against the PyTorch operator before it is written.  The work is done by
[`petrov.export.export_operator`][].
"""
from __future__ import annotations

import argparse

from ..common.disk_space import format_size
from ..export import FORMATS, export_format, export_operator
from ..export.api import ExportResult
from .usage import as_usage_error, check_minimums


def _sizes(result: ExportResult) -> str:
    if result.sizes is None:
        return f"resolution {result.resolution}"
    return f"resolution dynamic ({result.sizes}; traced at {result.resolution})"


def _run(args: argparse.Namespace) -> int:
    check_minimums(args, resolution=2, threads=1)
    as_usage_error(export_format, args.format, args.out)
    result = export_operator(args.source, args.out, format=args.format, resolution=args.resolution,
                             dynamic=args.dynamic, check=args.check, threads=args.threads)
    print(f"exported {result.model} from {args.source} as {result.format}: {_sizes(result)}, any batch size")
    if result.differences:
        shown = ", ".join(f"{d:.2e} at {n}" for n, d in result.differences.items())
        print(f"checked against PyTorch on random inputs, relative L2 difference: {shown}")
    print(f"wrote {result.path} ({format_size(result.bytes)})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a trained operator as an ONNX file or a torch.export program",
        description="Write a trained grid operator (raw inputs to raw outputs, its normalisers included) as an "
        "ONNX file or a torch.export program (.pt2), at a fixed resolution or with the grid size as an input "
        "(--dynamic), and check the file against the PyTorch operator on random inputs before writing it.",
    )
    p.add_argument("source", metavar="RUN", help="a run folder written by petrov train (its best.pt is exported)")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the file to write (.onnx or .pt2)")
    p.add_argument("--format", metavar="|".join(FORMATS.names()),
                   help="the file format (default: by the suffix of FILE, .onnx or .pt2)")
    p.add_argument("--resolution", type=int, metavar="N",
                   help="points per grid axis the export takes (default: the run's training resolution; with "
                        "--dynamic: the size it is traced and first checked at)")
    p.add_argument("--dynamic", action="store_true",
                   help="the grid size as an input of the file too (models that allow it: see the docs)")
    p.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                   help="run the file back and compare with PyTorch before writing it (default on; ONNX: needs "
                        "onnxruntime)")
    p.add_argument("--threads", type=int, metavar="K", help="threads of the check's onnxruntime (default torch's)")
    p.set_defaults(func=_run)
