"""``petrov generate KIND ...``, ``petrov import`` and ``petrov info FILE``.

Each registered dataset kind gets its own ``generate`` sub-command whose equation options are made from
its parameter dataclass (``--nu``, ``--t``, ``--averaging``, ``--coarse-resolution``, ...), so a new recipe
needs no CLI code. Errors are raised (ValueError, FileExistsError, ...) and reported by ``train/cli.py``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import typing

from petrov.datasets.recipes import RECIPES

from .main import UsageError


def _param_option(parser: argparse.ArgumentParser, field: dataclasses.Field, annotation) -> None:
    kwargs: dict = {"type": annotation}
    if typing.get_origin(annotation) is typing.Literal:
        kwargs = {"type": str, "choices": list(typing.get_args(annotation))}
    parser.add_argument(
        "--" + field.name.replace("_", "-"),
        dest=f"param_{field.name}",
        metavar=field.name.upper(),
        default=argparse.SUPPRESS,  # only parameters given on the command line are passed on
        help=f"(default: {field.default})",
        **kwargs,
    )


def _generate(args: argparse.Namespace) -> int:
    from petrov.datasets.storage import generate_dataset

    params = {k[len("param_"):]: v for k, v in vars(args).items() if k.startswith("param_")}
    path = generate_dataset(
        args.kind, args.output, args.n_samples, args.resolution, args.seed, overwrite=args.overwrite,
        chunk_size=args.chunk_size, workers=args.workers, progress=not args.no_progress, **params,
    )
    print(f"wrote {path}")
    return 0


def _generate_hint(args: argparse.Namespace) -> str:
    """What an interrupted generation says (one line, by ``petrov.cli.main``)."""
    from petrov.datasets.storage import partial_path

    partial = partial_path(args.output)
    return f"rerun the same command to resume from {partial}" if partial.exists() else ""


def _import(args: argparse.Namespace) -> int:
    from petrov.datasets.importing import import_arrays

    domain = None
    if args.domain is not None:
        if len(args.domain) % 2:
            raise UsageError(f"--domain takes LO HI pairs (one pair, or one per grid axis), got {args.domain}")
        domain = [args.domain[i : i + 2] for i in range(0, len(args.domain), 2)]
        domain = domain[0] if len(domain) == 1 else domain
    path = import_arrays(
        args.output, args.x, args.y, grid=args.grid, x_axes=args.x_axes, y_axes=args.y_axes, domain=domain,
        coords=args.coords, overwrite=args.overwrite, chunk_size=args.chunk_size, description=args.description,
        progress=not args.no_progress,
    )
    print(f"wrote {path}")
    return 0


def _add_import(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import", help="turn your own input/output arrays (.npy, .npz, HDF5, .mat) into a petrov dataset",
        description="Write input/output arrays into a petrov dataset file (HDF5) that loads at strided "
        "resolutions and trains through data.path like a generated one. SPEC is FILE.npy or FILE:KEY "
        "(a .npz key, an HDF5 dataset path, a .mat variable).",
        epilog="example: petrov import --x burgers.npz:a --y burgers.npz:u --grid periodic -o data/mine.h5",
    )
    p.add_argument("--x", required=True, metavar="SPEC", help="the input array, e.g. data.npz:a or in.npy")
    p.add_argument("--y", required=True, metavar="SPEC", help="the output (target) array")
    p.add_argument("--grid", required=True, choices=["periodic", "nodes"],
                   help="periodic: points i/n (right end excluded); nodes: i/(n-1) with both boundaries")
    p.add_argument("-o", "--output", required=True, help="output file, e.g. data/mine.h5")
    p.add_argument("--x-axes", metavar="AXES", help="axis order of x: N samples, X/Y grid, C channels "
                   "(e.g. NX, XN, NXY, NCXY, NXYC; default: samples first, no channels); .mat: MATLAB's order")
    p.add_argument("--y-axes", metavar="AXES", help="axis order of y (default: as x when the ranks match)")
    p.add_argument("--domain", type=float, nargs="+", metavar="LO HI",
                   help="the domain: LO HI for every axis, or one pair per axis (default 0 1)")
    p.add_argument("--coords", nargs="+", metavar="SPEC",
                   help="1-D coordinates of each grid axis (checked uniform; they give the domain)")
    p.add_argument("--description", help="what the data are (stored as the 'equation' attribute)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--chunk-size", type=int, default=None, help="samples read and written at a time")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_import)


def _format_value(value) -> str:
    if isinstance(value, str) and value.startswith("{"):
        try:  # JSON attributes (params, solver_settings) printed compactly
            return json.dumps(json.loads(value), sort_keys=True)
        except json.JSONDecodeError:
            pass
    return str(value)


def _info(args: argparse.Namespace) -> int:
    from petrov.datasets.loading import dataset_info

    info = dataset_info(args.file)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    status = "complete" if info["complete"] else "INCOMPLETE (rerun the generation to resume)"
    lines = [
        f"file:        {info['path']} ({info['source']})",
        f"kind:        {info['kind']}",
        f"samples:     {info['n_complete']} of {info['n_samples']} ({status})",
        f"x, y shape:  {info['x_shape']}, {info['y_shape']}",
        f"grid:        {info['grid']}, native resolution {info['native_resolution']}",
        f"resolutions: {', '.join(map(str, info['resolutions']))}",
        "attributes:",
    ]
    lines += [f"  {k} = {_format_value(v)}" for k, v in sorted(info["attrs"].items())]
    print("\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser("generate", help="generate a Burgers / Darcy / inverse-Darcy dataset (HDF5)",
                         description="Generate a dataset into an HDF5 file; an interrupted run resumes when rerun.")
    kinds = gen.add_subparsers(dest="kind", metavar="KIND", required=True)
    for name in RECIPES:
        recipe = RECIPES.get(name)
        if not recipe.generatable:  # imported data: `petrov import`
            continue
        p = kinds.add_parser(name, help=recipe.description, description=recipe.description, allow_abbrev=False)
        p.add_argument("--n-samples", type=int, required=True, help="number of samples")
        p.add_argument("--resolution", type=int, default=None,
                       help=f"native grid points per axis (default {recipe.native_resolution})")
        p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        p.add_argument("-o", "--output", required=True, help="output file, e.g. data/burgers.h5")
        p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
        p.add_argument("--workers", type=int, default=0,
                       help="Darcy solver worker processes (default 0: in this process; Burgers is batched)")
        p.add_argument("--chunk-size", type=int, default=None, help="samples per written chunk")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        hints = typing.get_type_hints(recipe.params_cls)
        group = p.add_argument_group("equation parameters")
        for field in dataclasses.fields(recipe.params_cls):
            _param_option(group, field, hints[field.name])
        p.set_defaults(func=_generate, resume_hint=_generate_hint)

    _add_import(sub)

    info = sub.add_parser("info", help="show what a dataset file (.h5 or FNO .mat) holds")
    info.add_argument("file", help="dataset file")
    info.add_argument("--json", action="store_true", help="print as JSON")
    info.set_defaults(func=_info)
