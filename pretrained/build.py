"""Train, evaluate and pack the shipped operators: ``make pretrained`` (``python -m petrov.pretrained.build``).

    python -m petrov.pretrained.build --dest pretrained    # every recipe, into the checkout's pretrained/NAME/
    python -m petrov.pretrained.build --dest pretrained --only burgers-1024   # one of them
    python -m petrov.pretrained.build --quick              # toy sizes (PETROV_QUICK=1), into a temporary folder

For each [`petrov.pretrained.recipes.Recipe`][], in the working folder (``--work``, default the current
one; the presets' data files are generated under its ``data/`` on first use):

1. ``petrov train PRESET --out runs/pretrained/NAME --set ...`` (the recipe's exact overrides; the
   time it takes, wall-clock and CPU, is kept in ``runs/pretrained/NAME-build.json``; an interrupted
   build continues the run with ``--resume``, which ends with the weights of an uninterrupted run);
2. ``petrov evaluate runs/pretrained/NAME --no-plots``: the per-sample errors on the run's test split
   at every resolution of its config;
3. ``best.pt`` and ``config.json`` copied to ``DEST/NAME/`` and the card written last, with the measured
   figures, the machine, the time and the files' SHA-256 (``card.json``).

A built operator (its card in ``DEST``) is not built again unless ``--force``. ``--quick`` runs every
command with ``PETROV_QUICK=1`` (a few samples, one epoch) in a fresh temporary folder unless
``--work`` names one (the quick data files must not take the real ones' names in the real working
folder), writes cards marked ``quick`` and refuses to write into the package's own folder: quick
weights are never shipped.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from ..common.files import atomic_path, write_json
from ..common.machine import cpu_model
from ..common.shipped import CARD, CONFIG, SHIPPED_DIR, WEIGHTS, sha256_file
from ..common.version import petrov_version
from ..train.checkpoint import load_operator, load_run_checkpoint
from .cards import CARD_FORMAT, LICENSE, Card, card_from_dict, card_to_dict
from .recipes import SHIPPED, Recipe, shipped_recipe

RUNS = "runs/pretrained"  # where the runs are trained, relative to the working folder


def machine() -> dict:
    """Where the build runs: CPU, logical CPUs, torch's threads, the device ``run.device = "auto"`` picks, versions."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {"cpu": cpu_model(), "logical_cpus": cpus, "torch_threads": torch.get_num_threads(), "device": device,
            "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "petrov": petrov_version()}


def shown(args: list[str], quick: bool) -> str:
    """A petrov command line as a user types it."""
    return ("PETROV_QUICK=1 " if quick else "") + "petrov " + shlex.join(args)


def clock() -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds of the finished child processes) now."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), children.ru_utime + children.ru_stime


def run_petrov(args: list[str], work: Path, quick: bool) -> None:
    """``petrov ARGS`` in ``work``, in its own process as a user types it (a RuntimeError naming the command
    if it fails). On Ctrl-C, which the command receives too, it is left to stop where it is and save that
    (``petrov train`` keeps its position for ``--resume``) before the interruption goes on."""
    env = {**os.environ, "PETROV_QUICK": "1" if quick else "0"}
    print(f"[{datetime.datetime.now():%H:%M:%S}] {shown(args, quick)}", flush=True)
    process = subprocess.Popen([sys.executable, "-m", "petrov", *args], cwd=work, env=env)
    try:
        code = process.wait()
    except KeyboardInterrupt:
        process.wait()
        raise
    if code != 0:
        raise RuntimeError(f"`{shown(args, quick)}` failed (exit status {code}) in {work}")


def train(recipe: Recipe, work: Path, quick: bool) -> dict:
    """Train ``recipe``'s run in ``work`` (continued with ``--resume`` if a build was interrupted); the
    time every invocation took, interrupted ones included, summed: ``{"wall_seconds", "cpu_seconds",
    "invocations"}``."""
    run = f"{RUNS}/{recipe.name}"
    timing_file = work / f"{run}-build.json"
    timing = json.loads(timing_file.read_text()) if timing_file.is_file() else \
        {"wall_seconds": 0.0, "cpu_seconds": 0.0, "invocations": 0}
    if (work / run / "metrics.json").is_file() and timing["invocations"]:
        return timing  # trained by an earlier build
    resume = ["--resume"] if (work / run / "last.pt").is_file() else []
    wall0, cpu0 = clock()
    try:
        run_petrov(recipe.train_args(run) + resume, work, quick)
    finally:
        wall1, cpu1 = clock()
        timing = {"wall_seconds": timing["wall_seconds"] + wall1 - wall0,
                  "cpu_seconds": timing["cpu_seconds"] + cpu1 - cpu0, "invocations": timing["invocations"] + 1}
        write_json(timing_file, timing)
    return timing


def evaluate(recipe: Recipe, work: Path, quick: bool) -> tuple[str, list[dict]]:
    """``petrov evaluate`` of the run at its resolutions: (the command, the rows of its metrics.json)."""
    run = f"{RUNS}/{recipe.name}"
    args = ["evaluate", run, "--no-plots"]
    run_petrov(args, work, quick)
    rows = json.loads((work / run / "eval" / "metrics.json").read_text())["rows"]
    keep = ("resolution", "n", "mean", "std", "median", "max")
    return shown(args, quick), [{k: r[k] for k in keep} for r in rows]


def parameters(run_dir: Path) -> int:
    """The number of parameters of the run's model (its ``best.pt``)."""
    return sum(p.numel() for p in load_operator(run_dir).model.parameters())


def make_card(recipe: Recipe, run_dir: Path, timing: dict, evaluation: tuple[str, list[dict]], quick: bool,
              files: dict) -> Card:
    """The card of ``recipe``'s finished run in ``run_dir`` (``files``: name -> sha256 and bytes)."""
    state = load_run_checkpoint(run_dir / WEIGHTS)
    config = json.loads((run_dir / CONFIG).read_text())
    data, generate = config["data"], config["data"].get("generate") or {}
    log = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines() if line.strip()]
    command, rows = evaluation
    resolutions = [r["resolution"] for r in rows]
    trained_at = data.get("level") or data.get("train_resolution") or resolutions[0]
    raw = {
        "card_format": CARD_FORMAT, "name": recipe.name, "summary": recipe.summary, "quick": quick,
        "maps": {"input": recipe.input, "output": recipe.output, "domain": recipe.domain, "trained_at": trained_at,
                 "evaluated_at": resolutions},
        "model": {"name": state["model_name"], "parameters": parameters(run_dir)},
        "data": {"preset": recipe.preset, "path": data["path"], "generate": generate,
                 "kind": data.get("kind") or generate.get("kind", "unknown"), "seed": int(generate.get("seed", 0)),
                 "identity": state.get("data_identity") or {}, "n_train": data["n_train"], "n_val": data["n_val"],
                 "n_test": data["n_test"], "noise": float(state.get("noise", {}).get("level", 0.0))},
        "training": {"command": shown(recipe.train_args(f"{RUNS}/{recipe.name}"), quick),
                     "wall_seconds": round(timing["wall_seconds"], 1), "cpu_seconds": round(timing["cpu_seconds"], 1),
                     "epochs": len(log), "best_epoch": int(state["best_epoch"]),
                     "best_val_rel_l2": float(state["best_metric"]), "date": datetime.date.today().isoformat(),
                     "machine": machine()},
        "evaluation": {"command": command, "metric": "relative L2 per sample, raw units",
                       "samples": f"the run's test split (the last {data['n_test']} samples of its training file, "
                                  f"used neither in training nor in model selection)", "rows": rows},
        "not_for": list(recipe.not_for), "license": LICENSE, "files": files,
    }
    return card_from_dict(raw, f"card {recipe.name}")


def copy_file(source: Path, target: Path) -> dict:
    """``source`` copied to ``target`` atomically; its SHA-256 and size."""
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
    return {"sha256": sha256_file(target), "bytes": target.stat().st_size}


def pack(recipe: Recipe, run_dir: Path, dest: Path, timing: dict, evaluation: tuple[str, list[dict]],
         quick: bool) -> Card:
    """``DEST/NAME/``: the run's ``best.pt`` and ``config.json``, then its card (written last, so a folder
    whose card is there is complete)."""
    target = dest / recipe.name
    (target / CARD).unlink(missing_ok=True)  # an older card never describes the new files
    files = {name: copy_file(run_dir / name, target / name) for name in (WEIGHTS, CONFIG)}
    card = make_card(recipe, run_dir, timing, evaluation, quick, files)
    write_json(target / CARD, card_to_dict(card))
    return card


def build(recipe: Recipe, work: Path, dest: Path, quick: bool = False) -> Card:
    """``recipe`` trained, evaluated and packed into ``dest`` (see the module docstring)."""
    print(f"{recipe.name}: expected from the preset's measurements: {recipe.expected}", flush=True)
    timing = train(recipe, work, quick)
    evaluation = evaluate(recipe, work, quick)
    card = pack(recipe, work / RUNS / recipe.name, dest, timing, evaluation, quick)
    rows = ", ".join(f"{r.mean:.3e} at {r.resolution}" for r in card.evaluation.rows)
    print(f"{recipe.name}: {card.training.epochs} epochs in {card.training.wall_seconds / 60:.1f} minutes; test "
          f"relative L2 {rows}; packed into {dest / recipe.name}", flush=True)
    return card


def is_package_folder(path: Path) -> bool:
    """Whether ``path`` is petrov.pretrained's folder, installed or in a checkout (where weights ship)."""
    return path.resolve() == SHIPPED_DIR or (path / "registry.py").is_file()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m petrov.pretrained.build", description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", metavar="NAME", help=f"these ({', '.join(r.name for r in SHIPPED)})")
    p.add_argument("--work", type=Path, help="working folder (default: the current one; --quick: a new temporary one)")
    p.add_argument("--dest", type=Path, help="where the operators go: the checkout's pretrained/ folder (make "
                   "pretrained gives it); --quick: another folder (default WORK/shipped)")
    p.add_argument("--quick", action="store_true", help="toy sizes (PETROV_QUICK=1): checks the path, ships nothing")
    p.add_argument("--force", action="store_true", help="build again operators already in DEST")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        recipes = [shipped_recipe(n) for n in args.only] if args.only else list(SHIPPED)
    except KeyError as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    if args.dest is None and not args.quick:
        print("error: give --dest, the checkout's pretrained/ folder (make pretrained does)", file=sys.stderr)
        return 2
    work = args.work or (Path(tempfile.mkdtemp(prefix="petrov-pretrained-quick-")) if args.quick else Path.cwd())
    dest = args.dest or work / "shipped"
    if args.quick and is_package_folder(dest):
        print(f"error: --quick builds toy weights, never shipped: give a --dest other than {dest}", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    print(f"building {', '.join(r.name for r in recipes)} in {work.resolve()} into {dest.resolve()} "
          f"({cpu_model()}{', quick' if args.quick else ''})", flush=True)
    for recipe in recipes:
        if (dest / recipe.name / CARD).is_file() and not args.force:
            print(f"{recipe.name}: already in {dest} (--force builds it again)")
            continue
        build(recipe, work.resolve(), dest.resolve(), args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
