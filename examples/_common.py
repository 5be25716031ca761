"""What the example scripts share: make the data, train or resume a run, evaluate it and report.

A run directory written by an example goes through these states; re-running the example continues
from wherever it stopped:

    new      -> train from scratch
    started  (config.json but no completed epoch)  -> start again from scratch (the trainer does)
    partial  (last.pt, training unfinished)        -> resume training
    trained  (metrics.json, no eval/)              -> evaluate and plot only
    finished (eval/metrics.json)                   -> nothing to do: print the saved table
A run directory holding a run with another config is never touched.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from petrov.common.quick import quick_mode
from petrov.train.config import config_differences, load_config, load_config_json
from petrov.cli.console import console_logging
from petrov.evaluate import format_table, read_metrics, run_evaluation
from petrov.train.trainer import train


def run_script(main) -> int:
    """Run an example's ``main()``; Ctrl-C ends it with one line (and status 130), not a traceback:
    the run resumes where it stopped when the same command is given again."""
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume where it stopped", file=sys.stderr)
        return 130
    return 0


def example_data(args: argparse.Namespace, out: Path, name: str) -> Path:
    """The dataset file: ``--data``, else ``name`` in a folder beside the run directory (``OUT-data/``;
    inside it, the run directory would hold a file the training did not write)."""
    return Path(args.data) if args.data else out.parent / f"{out.name}-data" / name


def base_parser(description: str, out: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default=None, help=f"output/run directory (default: {out}, or {out}-quick with --quick)")
    p.add_argument("--data", default=None, help="dataset file (default: OUT-data/...; generated if missing, "
                   "by the trainer, from the config's [data.generate])")
    p.add_argument("--quick", action="store_true", default=quick_mode(),
                   help="tiny settings: a smoke run in well under a minute (the default when PETROV_QUICK=1)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, as `petrov train --set` (repeatable)")
    return p


def out_dir(args: argparse.Namespace, default: str) -> Path:
    return Path(args.out or (default + "-quick" if args.quick else default))


def run_state(run_dir: Path) -> str:
    if (run_dir / "eval" / "metrics.json").is_file():
        return "finished"
    if (run_dir / "metrics.json").is_file():
        return "trained"
    if (run_dir / "last.pt").is_file():
        return "partial"
    if (run_dir / "config.json").is_file():
        return "started"
    return "new"


def train_or_resume(config, run_dir: Path) -> str:
    """Bring ``run_dir`` to a trained state with ``config`` (see the module docstring); returns the
    state found.  A run with a different config is a SystemExit naming the differing keys."""
    state = run_state(run_dir)
    if state != "new":
        saved = load_config_json(run_dir / "config.json", check_model=False)
        changed = config_differences(saved, config)
        if changed:
            raise SystemExit(f"{run_dir} holds a run with another config (differs in {', '.join(changed)}); "
                             f"choose another --out, or delete it")
    if state in ("new", "started", "partial"):
        resume = state == "partial"
        print(("resuming" if resume else "training") + f" {config.model.name} "
              f"(mixer {config.model.options.get('mixer', '-')}) at resolution {config.data.train_resolution} "
              f"into {run_dir}", flush=True)
        t0 = time.monotonic()
        result = train(config, run_dir, resume=resume)
        print(f"training {result.stopped} after {result.epochs_completed:.4g} epochs in "
              f"{time.monotonic() - t0:.0f} s; best val relL2 {result.best_val_rel_l2:.3e} "
              f"(epoch {result.best_epoch})", flush=True)
    return state


def report_finished(run_dir: Path) -> None:
    rows = read_metrics(run_dir / "eval")
    train_res = load_config_json(run_dir / "config.json", check_model=False).data.train_resolution
    print(format_table(rows, train_res))
    print(f"\n{run_dir} already holds a finished run: the table above is {run_dir / 'eval' / 'metrics.csv'}, "
          f"plots in {run_dir / 'eval'}.\nNothing to do. To run again, delete {run_dir} or pass another --out.")


def evaluate(run_dir: Path, data: Path, resolutions: list[int], device: str, target: float | None = None,
             **options):
    """``petrov evaluate`` on the run: table printed, CSV/JSON and plots in ``run_dir/eval``."""
    rows = run_evaluation(run_dir, data, resolutions, device=device, **options)
    if target is not None:
        worst = max(r["mean"] for r in rows)
        verdict = "below" if worst < target else "NOT below"
        print(f"mean relative L2 is {verdict} {target:g} at every resolution (worst {worst:.3e})")
    return rows


def run_example(args: argparse.Namespace, preset: str, out: Path, data: Path, overrides: list[str],
                resolutions: list[int] | None = None, target: float | None = None, **eval_options):
    """The whole example: config = preset + overrides (+ the user's --set), then train or resume
    into ``out`` (the data file is generated by the trainer if missing), evaluate and plot.
    ``eval_options`` go to ``run_evaluation`` (``batch_size``, ``plots``).
    Returns the evaluation rows (None if ``out`` already held a finished run). petrov's log lines
    (epochs, generation, the evaluation table) are shown as the ``petrov`` command shows them."""
    if run_state(out) == "finished":
        report_finished(out)
        return None
    config = load_config(preset, [f'data.path="{data.as_posix()}"', f'run.device="{args.device}"',
                                  *overrides, *args.set])
    with console_logging():
        train_or_resume(config, out)
        return evaluate(out, data, resolutions or config.data.eval_resolutions, args.device, target,
                        **eval_options)
