"""``petrov generate KIND ...``, ``petrov merge``, ``petrov import`` and ``petrov info FILE``.

Each registered dataset kind, grid (``recipes.RECIPES``) or mesh (``mesh.recipes.MESH_RECIPES``), gets its
own ``generate`` sub-command whose equation options are made from its parameter dataclass (``--nu``,
``--t``, ``--averaging``, ``--coarse-resolution``, ``--h``, ...), so a new recipe needs no CLI code; mesh
kinds have no ``--resolution``. ``--shard K/N`` (or ``--indices A:B``) writes one shard of the samples
and ``petrov merge SHARDS... -o FILE`` the whole file from the shards (``petrov.datasets.shards``).
``petrov import`` takes arrays on a grid (``--x/--y/--grid``), time series (``--series SPEC... --axes
NTXYC``, or ``--from pdebench|the-well FILE``) or meshes (``--mesh FILE ... --x-field/--y-field``). Errors are raised (ValueError, FileExistsError, ...) and
reported by ``petrov.cli.main``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import typing

from ..datasets.mesh.recipes import MESH_RECIPES
from ..datasets.recipes import RECIPES
from .usage import UsageError, add_command, as_usage_error, check_minimums


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


def _file_state(path) -> tuple | None:
    """What changes when a file is written (by a rename: its inode; or in place: its time and size)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


def _report_written(path, before: tuple | None) -> None:
    """``wrote PATH`` unless the file was kept as it was (``before``: its state then; "nothing to do")."""
    if before is None or _file_state(path) != before:
        print(f"wrote {path}")


def _generate(args: argparse.Namespace) -> int:
    from ..common.quick import quick_samples
    from ..datasets import generate_dataset
    from ..datasets.shards import sample_range

    check_minimums(args, n_samples=1, seed=0, workers=0, chunk_size=1)
    # --shard K/N or --indices A:B, checked as the generation checks them (of the samples quick mode keeps)
    as_usage_error(sample_range, quick_samples(args.n_samples), args.shard, args.indices)
    params = {k[len("param_"):]: v for k, v in vars(args).items() if k.startswith("param_")}
    before = _file_state(args.output)
    path = generate_dataset(
        args.kind, args.output, args.n_samples, getattr(args, "resolution", None),  # mesh kinds have none
        args.seed, shard=args.shard, indices=args.indices, overwrite=args.overwrite, chunk_size=args.chunk_size,
        workers=args.workers, progress=not args.no_progress, **params,
    )
    _report_written(path, before)
    return 0


def _resume_hint(args: argparse.Namespace) -> str:
    """What an interrupted generation or merge says (one line, by ``petrov.cli.main``)."""
    from ..datasets.hdf5_files import partial_path

    partial = partial_path(args.output)
    return f"rerun the same command to resume from {partial}" if partial.exists() else ""


def _merge(args: argparse.Namespace) -> int:
    from ..datasets.merging import merge_shards

    check_minimums(args, chunk_size=1)
    before = _file_state(args.output)
    path = merge_shards(args.shards, args.output, overwrite=args.overwrite, chunk_size=args.chunk_size,
                        progress=not args.no_progress)
    _report_written(path, before)
    return 0


def _add_merge(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "merge", _merge, resume_hint=_resume_hint, help="merge the shards of a dataset (petrov generate ... --shard K/N) into one file",
        description="Write the whole dataset file from its shards, identical (samples, attributes, content hash) "
        "to one `petrov generate` of all the samples. The shards are checked first: all of one dataset, each "
        "sample in exactly one shard, each shard's samples matching its content hash.",
        epilog="example: petrov merge shards/darcy-*.h5 -o data/darcy-421.h5")
    p.add_argument("shards", nargs="+", metavar="SHARD", help="the shard files, in any order")
    p.add_argument("-o", "--output", required=True, help="output file, e.g. data/darcy-421.h5")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--chunk-size", type=int, default=None, help="samples copied at a time")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _import(args: argparse.Namespace) -> int:
    from ..datasets.importing import import_arrays

    check_minimums(args, chunk_size=1)
    if args.mesh:
        return _import_meshes(args, UsageError)
    if args.fno:
        return _import_fno(args)
    if args.series or args.from_format:
        return _import_series(args)
    clash = [flag for flag, value in (("--axes", args.axes), ("--fields", args.fields), ("--dt", args.dt))
             if value is not None]
    if clash:
        raise UsageError(f"{', '.join(clash)} {'applies' if len(clash) == 1 else 'apply'} to time series "
                         f"(--series or --from), not to --x/--y arrays")
    if args.grid is not None and len(args.grid) > 1:
        raise UsageError(f"--grid takes one grid for --x/--y arrays (square grids), got {' '.join(args.grid)}")
    missing = [opt for opt, value in (("--x", args.x), ("--y", args.y), ("--grid", args.grid)) if value is None]
    if missing:
        raise UsageError(f"grid arrays need {', '.join(missing)} (or import meshes with --mesh FILE ... "
                         f"--x-field NAME --y-field NAME)")
    path = import_arrays(
        args.output, args.x, args.y, grid=args.grid[0], x_axes=args.x_axes, y_axes=args.y_axes, domain=_domain(args),
        coords=args.coords, overwrite=args.overwrite, chunk_size=args.chunk_size, description=args.description,
        progress=not args.no_progress,
    )
    print(f"wrote {path}")
    return 0


def _domain(args: argparse.Namespace):
    """``--domain LO HI [LO HI]`` as one pair or a pair per axis (None when absent)."""
    if args.domain is None:
        return None
    if len(args.domain) % 2:
        raise UsageError(f"--domain takes LO HI pairs (one pair, or one per grid axis), got {args.domain}")
    domain = [args.domain[i : i + 2] for i in range(0, len(args.domain), 2)]
    return domain[0] if len(domain) == 1 else domain


def _import_series(args: argparse.Namespace) -> int:
    """A time series: the user's arrays (``--series``) or a known format's file (``--from NAME FILE``)."""
    from ..datasets.series_formats import import_series_file
    from ..datasets.time_series import import_time_series

    if args.dt is not None and not args.dt > 0:
        raise UsageError(f"--dt (the time between stored states) must be > 0, got {args.dt}")
    options = dict(overwrite=args.overwrite, chunk_size=args.chunk_size, description=args.description,
                   progress=not args.no_progress)
    if args.from_format:
        clash = [f"--{name.replace('_', '-')}" for name in ("series", "axes", "x", "y", "x_axes", "y_axes", "domain",
                                                             "coords", "dt") if getattr(args, name) is not None]
        if clash:
            raise UsageError(f"{', '.join(clash)} {'applies' if len(clash) == 1 else 'apply'} to arrays; --from reads "
                             f"the layout, coordinates and times from the file")
        name, file = args.from_format
        path = import_series_file(args.output, file, format=name, grid=args.grid, fields=args.fields, **options)
    else:
        clash = [f"--{name.replace('_', '-')}" for name in ("x", "y", "x_axes", "y_axes") if getattr(args, name)]
        if clash:
            raise UsageError(f"{', '.join(clash)} {'applies' if len(clash) == 1 else 'apply'} to input/output pairs, "
                             f"not to --series (a time series' first state is its input)")
        missing = [flag for flag, value in (("--axes", args.axes), ("--grid", args.grid)) if value is None]
        if missing:
            raise UsageError(f"--series needs {' and '.join(missing)} (e.g. --axes NTXYC --grid periodic)")
        path = import_time_series(args.output, args.series, axes=args.axes, grid=args.grid, fields=args.fields,
                                  domain=_domain(args), coords=args.coords, dt=args.dt, **options)
    print(f"wrote {path}")
    return 0


_GRID_ONLY = ("x", "y", "grid", "x_axes", "y_axes", "domain", "coords", "series", "axes", "fields", "dt",
              "from_format")


def _import_fno(args: argparse.Namespace) -> int:
    from ..datasets.importing import import_fno

    clash = [f"--{name.replace('_', '-')}" for name in _GRID_ONLY if getattr(args, name) is not None]
    if clash:
        raise UsageError(f"{', '.join(clash)} {'applies' if len(clash) == 1 else 'apply'} to grid arrays, not to an "
                         f"--fno file (its layout is known)")
    path = import_fno(args.output, args.fno, overwrite=args.overwrite, chunk_size=args.chunk_size,
                      progress=not args.no_progress)
    print(f"wrote {path}")
    return 0


def _import_meshes(args: argparse.Namespace, usage_error: type) -> int:
    from ..datasets.mesh.importing import import_meshes

    clash = [f"--{name.replace('_', '-')}" for name in _GRID_ONLY if getattr(args, name) is not None]
    if clash:
        verb = "applies" if len(clash) == 1 else "apply"
        raise usage_error(f"{', '.join(clash)} {verb} to grid arrays, not to --mesh files")
    missing = [opt for opt, value in (("--x-field", args.x_field), ("--y-field", args.y_field)) if value is None]
    if missing:
        raise usage_error(f"--mesh needs {' and '.join(missing)}: the names of the nodal input and target fields")
    path = import_meshes(
        args.output, args.mesh, x_field=args.x_field, y_field=args.y_field, points_key=args.points_key,
        triangles_key=args.triangles_key, rescale=args.rescale, overwrite=args.overwrite, chunk_size=args.chunk_size,
        description=args.description, progress=not args.no_progress,
    )
    print(f"wrote {path}")
    return 0


def _add_import(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "import", _import,
        help="turn your own arrays (.npy, .npz, HDF5, .mat) or meshes (.msh, .vtu, .npz, ...) into a petrov dataset",
        description="Write input/output arrays on a grid into a petrov dataset file (HDF5) that loads at "
        "strided resolutions and trains through data.path like a generated one (SPEC is FILE.npy or FILE:KEY: "
        "a .npz key, an HDF5 dataset path, a .mat variable); or, with --mesh, triangle meshes with nodal "
        "fields (one sample per file: anything meshio reads, or a .npz of points, triangles and fields) into "
        "a mesh dataset read by petrov.datasets.mesh.open_mesh_dataset; or, with --fno, an FNO benchmark .mat file "
        "(Burgers, Darcy, Navier-Stokes) into a petrov file of its kind; or, with --series or --from pdebench|the-well, "
        "a time series of one or more fields on a 1-D or 2-D (rectangular) grid, kind time-series.",
        epilog="examples: petrov import --x burgers.npz:a --y burgers.npz:u --grid periodic -o data/mine.h5\n"
        "          petrov import --mesh runs/*.vtu --x-field a --y-field u -o data/meshes.h5\n"
        "          petrov import --fno ns_V1e-3_N5000_T50.mat -o data/ns-1e-3.h5\n"
        "          petrov import --series cfd.h5:Vx cfd.h5:Vy --axes NTXY --grid periodic -o data/flow.h5\n"
        "          petrov import --series rd.h5:'*/data' --axes TXYC --fields u v --grid cells -o data/rd.h5\n"
        "          petrov import --from pdebench 2D_CFD_Rand_M0.1_Eta0.1_Zeta0.1_periodic_128_Train.hdf5 -o data/cfd.h5\n"
        "          petrov import --from the-well shear_flow_Reynolds_1e4_Schmidt_1e0.hdf5 -o data/shear.h5",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--x", metavar="SPEC", help="the input array, e.g. data.npz:a or in.npy")
    p.add_argument("--y", metavar="SPEC", help="the output (target) array")
    p.add_argument("--grid", choices=["periodic", "nodes", "cells"], nargs="+", metavar="GRID",
                   help="periodic: points i/n (right end excluded); nodes: i/(n-1) with both boundaries; "
                   "cells: cell centres (i+1/2)/n (finite-volume data, e.g. PDEBench's Darcy files); time series: "
                   "one per grid axis allowed (e.g. periodic nodes)")
    p.add_argument("-o", "--output", required=True, help="output file, e.g. data/mine.h5")
    p.add_argument("--x-axes", metavar="AXES", help="axis order of x: N samples, X/Y grid, C channels "
                   "(e.g. NX, XN, NXY, NCXY, NXYC; default: samples first, no channels); .mat: MATLAB's order")
    p.add_argument("--y-axes", metavar="AXES", help="axis order of y (default: as x when the ranks match)")
    p.add_argument("--domain", type=float, nargs="+", metavar="LO HI",
                   help="the domain: LO HI for every axis, or one pair per axis (default 0 1)")
    p.add_argument("--coords", nargs="+", metavar="SPEC",
                   help="1-D coordinates of each grid axis (checked uniform; they give the domain)")
    p.add_argument("--fno", metavar="FILE.mat", help="an FNO benchmark file (burgers_data_R10, piececonst_r421_*, "
                   "NavierStokes_V1e-5_N1200_T20, ns_V1e-3_N5000_T50, ...): written as a petrov file of its kind "
                   "(instead of --x/--y/--grid)")
    series = p.add_argument_group("time series (instead of --x/--y): kind time-series, y = the states of the fields")
    series.add_argument("--series", nargs="+", metavar="SPEC", help="one array holding every field (a C axis), or "
                        "one array per field; FILE.h5:'*/KEY' reads KEY of every group, one sample per group")
    series.add_argument("--axes", metavar="AXES", help="the arrays' axis order: N samples (none for '*/KEY'), T time, "
                        "X/Y grid, C fields, e.g. NTXYC, NTXY, NXYT, TXYC")
    series.add_argument("--fields", nargs="+", metavar="NAME", help="one name per field, e.g. Vx Vy density pressure "
                        "(default: the arrays' keys, or the file's names with --from)")
    series.add_argument("--dt", type=float, metavar="DT", help="the time between stored states (recorded)")
    series.add_argument("--from", dest="from_format", nargs=2, metavar=("FORMAT", "FILE"),
                        help="a file of a known layout: pdebench or the-well (fields, grid, times and boundary "
                        "conditions read from it; --grid where it does not record them)")
    meshes = p.add_argument_group("meshes (instead of --x/--y/--grid)")
    meshes.add_argument("--mesh", nargs="+", metavar="FILE", help="mesh files, one sample each (.msh, .vtu, "
                        ".xdmf, ... read by meshio; or .npz with points, triangles and the fields)")
    meshes.add_argument("--x-field", metavar="NAME", help="nodal input field (point data / .npz array name)")
    meshes.add_argument("--y-field", metavar="NAME", help="nodal target field")
    meshes.add_argument("--points-key", default="points", metavar="NAME", help=".npz: node coordinates (n, 2)")
    meshes.add_argument("--triangles-key", default="triangles", metavar="NAME", help=".npz: triangles (t, 3), 0-based")
    meshes.add_argument("--rescale", action="store_true",
                        help="map the meshes' common bounding box into [0, 1]^2 (aspect ratio kept)")
    p.add_argument("--description", help="what the data are (stored as the 'equation' attribute)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--chunk-size", type=int, default=None, help="samples read and written at a time")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _format_value(value) -> str:
    if isinstance(value, str) and value.startswith("{"):
        try:  # JSON attributes (params, solver_settings) printed compactly
            return json.dumps(json.loads(value), sort_keys=True)
        except json.JSONDecodeError:
            pass
    return str(value)


def _info(args: argparse.Namespace) -> int:
    from ..datasets.loading import dataset_info

    info = dataset_info(args.file)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    if info.get("layout") == "mesh":
        print("\n".join(_mesh_info_lines(info)))
        return 0
    lines = _head_lines(info) + [
        f"x, y shape:  {info['x_shape']}, {info['y_shape']}",
        f"grid:        {info['grid']}, " + (f"native resolution {info['native_resolution']}" if len(
            set(info.get("native_shape", [0]))) == 1 else f"native grid {' x '.join(map(str, info['native_shape']))}"),
        f"resolutions: {', '.join(map(str, info['resolutions']))}",
        "attributes:",
    ]
    lines += [f"  {k} = {_format_value(v)}" for k, v in sorted(info["attrs"].items())]
    print("\n".join(lines))
    return 0


def _head_lines(info: dict) -> list[str]:
    """The file, its kind, its samples (and, for a shard, which of the dataset's)."""
    status = "complete" if info["complete"] else "INCOMPLETE (rerun the generation to resume)"
    lines = [
        f"file:        {info['path']} ({info['source']})",
        f"kind:        {info['kind']}",
        f"samples:     {info['n_complete']} of {info['n_samples']} ({status})",
    ]
    attrs = info["attrs"]
    if "shard_start" in attrs:
        label = f"{attrs['shard']}: " if attrs.get("shard") else ""
        lines.append(f"shard:       {label}samples {attrs['shard_start']}..{attrs['shard_stop'] - 1} of the dataset's "
                     f"{attrs['total_samples']} (petrov merge joins the shards into the whole file)")
    return lines


def _mesh_info_lines(info: dict) -> list[str]:
    lines = _head_lines(info) + ["meshes:      nodes per sample (min / mean / max), mean triangles"]
    for name, level in info["levels"].items():
        nodes, triangles = level["nodes"], level["triangles"]
        counts = (f"{nodes['min']:,} / {nodes['mean']:,.0f} / {nodes['max']:,} nodes, {triangles['mean']:,.0f} "
                  f"triangles" if nodes else "none written")
        spacing = f" (spacing {level['spacing']:.4g})" if "spacing" in level else ""
        lines.append(f"  {name:<10} {counts}{spacing}")
    if info["domain_families"]:
        lines.append("domains:     " + ", ".join(f"{k} {v}" for k, v in info["domain_families"].items()))
    lines.append("attributes:")
    lines += [f"  {k} = {_format_value(v)}" for k, v in sorted(info["attrs"].items())]
    return lines


def _add_generate(kinds: argparse._SubParsersAction, recipe, mesh: bool) -> None:
    p = add_command(kinds, recipe.name, _generate, resume_hint=_resume_hint, help=recipe.description,
                    description=recipe.description, allow_abbrev=False)
    p.add_argument("--n-samples", type=int, required=True, help="number of samples")
    if not mesh:
        p.add_argument("--resolution", type=int, default=None,
                       help=f"native grid points per axis (default {recipe.native_resolution})")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("-o", "--output", required=True, help="output file, e.g. data/burgers.h5")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--workers", type=int, default=0,
                   help="Darcy and Navier-Stokes solver worker processes (default 0: in this process; Burgers is "
                   "batched)")
    p.add_argument("--chunk-size", type=int, default=None, help="samples per written chunk")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    part = p.add_mutually_exclusive_group()
    part.add_argument("--shard", metavar="K/N", help="write only shard K of N (K counts from 0, as "
                      "$SLURM_ARRAY_TASK_ID with --array=0-(N-1) or $JOB_COMPLETION_INDEX): the K-th of N "
                      "contiguous ranges of the samples, into a shard file for petrov merge")
    part.add_argument("--indices", metavar="A:B", help="write only the samples A..B-1, into a shard file for "
                      "petrov merge")
    hints = typing.get_type_hints(recipe.params_cls)
    group = p.add_argument_group("equation parameters")
    for field in dataclasses.fields(recipe.params_cls):
        _param_option(group, field, hints[field.name])


def register(sub: argparse._SubParsersAction) -> None:
    gen = sub.add_parser("generate", help="generate a Burgers / Darcy / inverse-Darcy / Darcy-on-meshes dataset (HDF5)",
                         description="Generate a dataset into an HDF5 file; an interrupted run resumes when rerun. "
                         "--shard K/N generates one shard of it (a job-array task), petrov merge joins the shards.")
    kinds = gen.add_subparsers(dest="kind", metavar="KIND", required=True)
    for registry, mesh in ((RECIPES, False), (MESH_RECIPES, True)):
        for name in registry:
            recipe = registry.get(name)
            if recipe.generatable:  # imported data: `petrov import`
                _add_generate(kinds, recipe, mesh)

    _add_merge(sub)
    _add_import(sub)

    info = add_command(sub, "info", _info, help="show what a dataset file (grid or mesh .h5, or FNO .mat) holds")
    info.add_argument("file", help="dataset file")
    info.add_argument("--json", action="store_true", help="print as JSON")
