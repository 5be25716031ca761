"""``petrov invert``: recover Darcy coefficients from observed solutions.

    petrov invert DATA.h5 --method pde --resolution 141 --indices 900:910 --noise 0.01 \\
                  --noise-stats runs/darcy-inverse --grid 36 --out inv/pde [--set reg_weight=1e-5]
    petrov invert DATA.h5 --method surrogate --forward-run runs/darcy --start learned --inverse-run runs/inv ...
    petrov invert OBS.npz --method learned --inverse-run runs/inv --noise observed --out inv/learned
    petrov invert DATA.h5 --method refined --inverse-run runs/inv --uncertainty --workers 2 --out inv/ref ...

Writes OUT/coefficients.h5, OUT/metrics.json, OUT/metrics.csv and OUT/inversion.png (unless --no-plots).
The samples run in chunks of --chunk-size on --workers processes; finished chunks stay in OUT until the
end, so the same command after an interruption continues where it stopped.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..common.quick import QUICK_ITERATIONS, quick_mode
from ..evaluate import parse_indices
from ..inverse import InversionConfig
from ..inverse.api import invert
from ..inverse.methods import METHODS
from ..inverse.runner import PARTIAL
from ..train.config import parse_override
from .usage import add_command, check_minimums


def parse_settings(items: list[str] | None) -> dict:
    """``["reg_weight=1e-5", "parametrization=level-set"]`` -> a dict (values parsed as TOML)."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected key=value (e.g. reg_weight=1e-5)")
        keys, value = parse_override(f"inversion.{item}")
        if len(keys) != 2:
            raise ValueError(f"--set {item!r}: expected key=value with a plain key")
        out[keys[1]] = value
    return out


def _run(args: argparse.Namespace) -> int:
    check_minimums(args, noise_seed=0, workers=0, chunk_size=1)
    # petrov invert has no run whose test split 'test' could name: 'all' or a slice only
    indices = None if args.indices is None else parse_indices(args.indices, test=False)
    calibrate = None if args.calibrate is None else parse_indices(args.calibrate, test=False, flag="--calibrate")
    settings = parse_settings(args.set)
    if args.grid is not None:
        settings["grid"] = args.grid
    if quick_mode():  # toy sizes: a few optimizer iterations (petrov.common.quick)
        for key in ("max_iter", "steps"):
            settings[key] = min(int(settings.get(key, getattr(InversionConfig, key))), QUICK_ITERATIONS)
    result = invert(args.source, args.method, resolution=args.resolution, indices=indices, noise=args.noise,
                    noise_seed=args.noise_seed, noise_stats=args.noise_stats, forward_run=args.forward_run,
                    inverse_run=args.inverse_run, start=args.start, settings=settings, out_dir=args.out,
                    plots=args.plots, overwrite=args.overwrite, uncertainty=args.uncertainty,
                    workers=args.workers, calibrate=calibrate,
                    chunk_size=args.chunk_size, progress=args.progress)
    summary = result.summary()
    print(f"{args.method}: {summary['n']} sample(s), grid {result.config.grid}, "
          + ", ".join(f"{k} {v:.4g}" for k, v in summary.items() if k != "n"))
    print("wrote " + ", ".join(str(p) for p in result.files))
    return 0


def _resume_hint(args: argparse.Namespace) -> str:
    """What an interrupted inversion says (one line, by ``petrov.cli.main``)."""
    partial = Path(args.out) / PARTIAL
    return f"rerun the same command to continue from the finished chunks in {partial}" if partial.is_dir() else ""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "invert", _run, resume_hint=_resume_hint,
        help="recover Darcy coefficients a from observed solutions u",
        description="Inverse Darcy: recover the coefficient on a coarse grid from observed u with a "
        "PDE-constrained (adjoint), refined (learned, then PDE-constrained to the noise level), surrogate-based "
        "or learned method; writes coefficients, metrics, plots, and with --uncertainty phase probabilities "
        "and error intervals.",
    )
    p.add_argument("source", metavar="SOURCE",
                   help="a Darcy dataset file (.h5 or FNO .mat) or an array file (.npy: u; .npz: u, a, u_clean)")
    p.add_argument("--method", required=True, choices=METHODS.names())
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--resolution", type=int, help="observation grid for a dataset file (default native)")
    p.add_argument("--indices", metavar="all|A:B", help="samples of a dataset file (default all)")
    p.add_argument("--noise", default="0", metavar="LEVEL|observed",
                   help="noise level added after point-wise normalization (default 0), or 'observed'")
    p.add_argument("--noise-seed", type=int, default=0, help="seed of the per-sample noise (default 0)")
    p.add_argument("--noise-stats", metavar="RUN_DIR|FILE",
                   help="point-wise statistics of u for the noise (default: --inverse-run, else SOURCE)")
    p.add_argument("--grid", type=int, help="output grid, nodes per side (default: the learned model's or 36)")
    p.add_argument("--forward-run", metavar="RUN_DIR", help="trained forward operator a -> u (surrogate)")
    p.add_argument("--inverse-run", metavar="RUN_DIR", help="trained inverse operator u -> a (learned, refined, --start learned)")
    p.add_argument("--start", default="midpoint", choices=["midpoint", "learned"],
                   help="starting coefficient of pde/surrogate (learned: the inverse run's output; refined "
                        "always starts there)")
    p.add_argument("--uncertainty", action="store_true",
                   help="pde/refined: the probability of the high phase per cell and an interval for each "
                        "sample's relative error (Laplace approximation; --set prior_std=, prior_length=, "
                        "interval=)")
    p.add_argument("--calibrate", metavar="A:B",
                   help="with --uncertainty: first invert these other samples of the dataset file (truth known) "
                        "and scale the error intervals so that the nominal share (--set interval=, default 0.9) of such "
                        "samples falls inside (split conformal)")
    p.add_argument("--workers", type=int, default=0, metavar="N",
                   help="worker processes, one single-threaded inversion each (default 0: this process)")
    p.add_argument("--chunk-size", type=int, default=8, metavar="K",
                   help="samples per chunk: the unit of work and of resumption (default 8)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="a progress bar on a terminal (default on)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="an inversion setting (reg_weight, parametrization, tau, max_iter, pde_grid, snap, stop, "
                        "discrepancy, steps, lr, prior_std, ...: the fields of petrov.inverse.InversionConfig)")
    p.add_argument("--plots", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--overwrite", action="store_true", help="write into DIR even if it holds other files")
