"""``petrov train``: train an operator from a TOML config (or a shipped preset) into a run directory.

    petrov train CONFIG.toml --out RUN_DIR [--set section.key=value ...] [--device cpu|cuda]
    petrov train burgers-quick --out runs/b --set optim.epochs=5
    petrov train --out RUN_DIR --resume            # continue a killed run (config from RUN_DIR)
    torchrun --nproc-per-node=2 -m petrov.train.cli train CONFIG --out RUN_DIR   # data parallel

Each subcommand is an ``add(subparsers)`` function in ``SUBCOMMANDS``; another subcommand (e.g.
``petrov evaluate`` in train/evaluate.py) is one more entry there, or its own module with a
``register(subparsers)`` listed in ``petrov.train.cli.COMMAND_MODULES``.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def _run_train(args: argparse.Namespace) -> int:
    from .config import apply_overrides, config_differences, config_from_dict, config_to_dict
    from .config import load_config, load_config_json
    from .trainer import train

    overrides = list(args.set or [])
    if args.device:
        overrides.append(f"run.device={json.dumps(args.device)}")
    run_dir = Path(args.out)
    if args.config is None:
        if not args.resume:
            from .cli import UsageError

            raise UsageError("give a CONFIG (a .toml file or a preset name), or --resume an existing run")
        saved = load_config_json(run_dir / "config.json")
        config = config_from_dict(apply_overrides(config_to_dict(saved), overrides))
        changed = config_differences(saved, config)
        if changed:
            raise ValueError(f"--set may only change runtime keys when resuming; changed: {', '.join(changed)}")
    else:
        config = load_config(args.config, overrides)
    result = train(config, run_dir, resume=args.resume)
    lines = [f"run {result.run_dir}: {result.stopped} after {result.epochs_completed} epochs; "
             f"best val relL2 {result.best_val_rel_l2:.4e} (epoch {result.best_epoch})"]
    for res, stats in result.test.items():
        lines.append(f"  test relL2 at resolution {res}: {stats['mean']:.4e} "
                     f"(std {stats['std']:.2e}, max {stats['max']:.2e}, n={stats['n']})")
    if int(os.environ.get("RANK", "0")) == 0:  # one summary under torchrun
        print("\n".join(lines))
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    from .config import preset_names

    p = sub.add_parser(
        "train",
        help="train an operator from a TOML config",
        description="Train an operator; writes config.json, log.csv/jsonl, last.pt, best.pt and "
        "metrics.json into --out. Run under torchrun for data parallel training.",
    )
    p.add_argument("config", nargs="?", metavar="CONFIG",
                   help=f"a TOML file or a shipped preset ({', '.join(preset_names())})")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                   help="override a config value (TOML syntax, e.g. optim.lr=5e-4); repeatable")
    p.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last.pt")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="same as --set run.device=...")
    p.set_defaults(func=_run_train)


SUBCOMMANDS = [_add_train]


def register(sub: argparse._SubParsersAction) -> None:
    for add in SUBCOMMANDS:
        add(sub)
