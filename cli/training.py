"""``petrov train`` and ``petrov evaluate``: the command-line side of training and evaluation.

    petrov train CONFIG.toml --out RUN_DIR [--set section.key=value ...] [--device cpu|cuda]
    petrov train burgers-quick --out runs/b --set optim.epochs=5
    petrov train darcy-gpu --out runs/d --budget-minutes 10   # epochs planned to fill 10 minutes here
    petrov train --out RUN_DIR --resume            # continue a killed run (config from RUN_DIR)
    petrov train --continue RUN_DIR --out RUN_DIR2 --set optim.epochs=20   # more epochs after a finished run
    torchrun --nproc-per-node=2 -m petrov train CONFIG --out RUN_DIR   # data parallel
    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \
        -m petrov train CONFIG --out RUN_DIR --resume    # on each of two machines (a job script)

    petrov evaluate RUN_DIR --data FILE.h5 --resolutions 256,512,1024,2048,4096,8192
                    [--indices test|a:b|all] [--device auto|cpu|cuda] [--batch-size N] [--no-plots]

The work is done by [`petrov.train.trainer.train`][] and
[`petrov.evaluate.run_evaluation`][]; this module parses arguments and prints the results
(the library's notices, such as epoch lines and written files, are log lines: see ``cli/console.py``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from ..common.shipped import resolve_source
from ..evaluate import format_table, parse_indices, parse_resolutions, run_evaluation
from ..evaluate.resolutions import ResolutionChoiceError
from ..evaluate.runs import slice_text
from ..train.config import (
    apply_overrides,
    check_resumable,
    config_from_dict,
    config_to_dict,
    load_config,
    load_config_json,
    parse_override,
    preset_names,
)
from ..train.trainer import train
from .usage import UsageError, add_command, as_usage_error, check_minimums


def _check_train_flags(args: argparse.Namespace) -> None:
    """UsageError for flags of ``petrov train`` that are wrong whatever the config: a ``--set`` item that is
    not ``section.key=value`` (or ``~section.key``), --resume with --overwrite, a --budget-minutes that is not
    a finite number > 0."""
    for item in args.set or []:
        as_usage_error(parse_override, item)
    if args.resume and args.overwrite:
        raise UsageError("choose one of --resume (continue the run in --out) and --overwrite (replace it)")
    if args.budget_minutes is not None and not (math.isfinite(args.budget_minutes) and args.budget_minutes > 0):
        raise UsageError(f"--budget-minutes must be a number of minutes > 0, got {args.budget_minutes:g}")


def _run_train(args: argparse.Namespace) -> int:
    _check_train_flags(args)
    overrides = list(args.set or [])
    if args.device:
        overrides.append(f"run.device={json.dumps(args.device)}")
    if args.budget_minutes is not None:  # a finite number > 0 (_check_train_flags)
        overrides += [f"run.time_budget_minutes={args.budget_minutes!r}", "run.fill_budget=true"]
    run_dir = Path(args.out)
    if args.continue_from is not None:
        if args.resume or args.config is not None:
            raise UsageError("--continue RUN_DIR takes that run's config: give neither CONFIG nor --resume")
        source = Path(resolve_source(args.continue_from))  # pretrained:NAME: a shipped operator's folder
        saved = load_config_json(source / "config.json")
        overrides.append(f"run.init_from={json.dumps(source.as_posix())}")
        config = config_from_dict(apply_overrides(config_to_dict(saved), overrides))
    elif args.config is None:
        if not args.resume:
            raise UsageError("give a CONFIG (a .toml file or a preset name), or --resume an existing run")
        saved = load_config_json(run_dir / "config.json")
        config = config_from_dict(apply_overrides(config_to_dict(saved), overrides))
        check_resumable(saved, config, run_dir)
    else:
        config = load_config(args.config, overrides)
    result = train(config, run_dir, resume=args.resume, overwrite=args.overwrite)
    lines = [f"run {result.run_dir}: {result.stopped} after {result.epochs_completed:.4g} epochs; "
             f"best val relL2 {result.best_val_rel_l2:.4e} (epoch {result.best_epoch})"]
    for row in result.test:
        lines.append(f"  test relL2 at resolution {row['resolution']}: {row['mean']:.4e} "
                     f"(std {row['std']:.2e}, max {row['max']:.2e}, n={row['n']})")
    if int(os.environ.get("RANK", "0")) == 0:  # one summary under torchrun
        print("\n".join(lines))
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "train", _run_train, resume_hint=_train_hint,
        help="train an operator from a TOML config",
        description="Train an operator; writes config.json, log.csv/jsonl, last.pt, best.pt and "
        "metrics.json into --out. Run under torchrun for data parallel training.",
    )
    p.add_argument("config", nargs="?", metavar="CONFIG",
                   help=f"a TOML file or a shipped preset ({', '.join(preset_names())})")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                   help="override a config value (TOML syntax, e.g. optim.lr=5e-4), or remove one so that its "
                   "default applies (~run.time_budget_minutes); repeatable")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in RUN_DIR from its last.pt (written after every epoch, and where Ctrl-C "
                   "or SIGTERM stopped it); with nothing to resume the run starts, so a job script can always pass it")
    p.add_argument("--continue", dest="continue_from", metavar="FINISHED_RUN",
                   help="train on from a finished run's best weights (or a shipped operator's: pretrained:NAME) "
                   "with its config and a new schedule into --out (e.g. --set optim.epochs=20)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run in RUN_DIR, or write beside other files there")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="same as --set run.device=...")
    p.add_argument("--budget-minutes", type=float, metavar="M",
                   help="train for M minutes on this machine: the epochs are planned from a timing probe of the "
                   "run to fill 95%% of them (optim.epochs at most); same as --set run.time_budget_minutes=M "
                   "--set run.fill_budget=true")


def _train_hint(args: argparse.Namespace) -> str:
    """What an interrupted training says (one line, by ``petrov.cli.main``)."""
    if (Path(args.out) / "last.pt").is_file():
        return f"continue with `petrov train --out {args.out} --resume`"
    return ""


def _run_evaluate(args: argparse.Namespace) -> int:
    check_minimums(args, batch_size=1)
    resolutions = as_usage_error(parse_resolutions, args.resolutions)
    indices = parse_indices(args.indices)
    try:
        rows = run_evaluation(args.run_dir, args.data, resolutions,
                              indices=indices, device=args.device, batch_size=args.batch_size,
                              plots=args.plots, out_dir=args.out, echo=False, overwrite=args.overwrite)
    except ResolutionChoiceError as err:
        if resolutions is None:  # the run's own resolutions do not fit --data: not a bad flag value
            raise
        raise UsageError(f"--resolutions: {err}") from None
    run_dir = Path(resolve_source(args.run_dir))  # pretrained:NAME: the shipped operator's folder
    config = load_config_json(run_dir / "config.json", check_model=False)
    print(format_table(rows, config.data.train_resolution, _evaluated(indices), config.loss.trajectory_metric))
    return 0


def _evaluated(indices) -> str:
    """The samples ``--indices`` picked, as the table's title names them."""
    if indices in (None, "test"):
        return "the test samples"
    if indices == "all":
        return "all samples of the file"
    return f"samples {slice_text(indices)} of the file"


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "evaluate", _run_evaluate,
        help="evaluate a trained run at several resolutions",
        description="Evaluate RUN_DIR/best.pt on the test split at each resolution; print a table of "
        "relative L2 and save RUN_DIR/eval/metrics.csv, metrics.json and plots.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by `petrov train`, or pretrained:NAME (a "
                   "shipped operator: petrov pretrained lists them)")
    p.add_argument("--data", metavar="FILE", help="dataset file (.h5 or FNO .mat; default: the run's)")
    p.add_argument("--resolutions", metavar="R1,R2,...",
                   help="comma-separated resolutions (grid runs), or mesh level names such as level0,level1 "
                   "(mesh runs) (default: the run's data.eval_resolutions or data.eval_levels)")
    p.add_argument("--indices", default="test", metavar="test|all|A:B",
                   help="samples to evaluate: the run's test split (default), all, or a slice A:B")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--batch-size", type=int, default=None,
                   help="evaluation batch (default: the run's run.eval_batch_size or optim.batch_size)")
    p.add_argument("--plots", action=argparse.BooleanOptionalAction, default=True,
                   help="write PNG figures next to the metrics (default: yes)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: RUN_DIR/eval; for pretrained:NAME, "
                   "pretrained-eval/NAME)")
    p.add_argument("--overwrite", action="store_true", help="write into DIR even if it holds other files")


def register(sub: argparse._SubParsersAction) -> None:
    _add_train(sub)
    _add_evaluate(sub)
