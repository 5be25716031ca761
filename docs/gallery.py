"""Train the gallery's runs and keep their figures and facts: docs/gallery/NAME/*.png|pdf and
docs/gallery/facts.json (committed; the gallery page's captions are written from the facts when the
site is built, by docs/hooks/gallery_page.py).

    python docs/gallery.py --train                 # every example, as documented (trained runs)
    python docs/gallery.py --train burgers darcy   # only these
    python docs/gallery.py --redraw                # the figures again from the trained runs (no training)
    python docs/gallery.py --check                 # every figure the facts name is there (make docs)

The runs live in runs/gallery/NAME/ (ignored by git); an example whose run is finished is not trained
again (the examples resume an interrupted run), so ``--train`` after an interruption continues. Run it
single-threaded on a quiet machine: ``OMP_NUM_THREADS=1 nice -n 10 python docs/gallery.py --train``.
The facts of each example record the command, the run's config and metrics, the CPU time the commands
took, the CPU model and the versions: the captions say what was drawn, never what was meant to be.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "docs" / "gallery"
FACTS = GALLERY / "facts.json"
RUNS = ROOT / "runs" / "gallery"
PY = sys.executable
PETROV = [PY, "-m", "petrov"]
DARCY_FILE = "../darcy-inverse/run-data/darcy-141.h5"  # the inverse example's data (141 x 141, 500 samples)

# name -> the commands (run in RUNS/NAME, as a user types them), the training run they make (relative
# to RUNS/NAME), the folder that holds the figures, the figure names, what depends on another example
EXAMPLES = {
    "burgers": {"commands": [[PY, "examples/burgers.py", "--out", "run"]], "run": "run", "figures_in": "run/eval",
                "figures": ["predictions", "error_vs_resolution", "training_curves"]},
    "darcy": {"commands": [[PY, "examples/darcy.py", "--out", "run"]], "run": "run", "figures_in": "run/eval",
              "figures": ["predictions", "error_vs_resolution", "training_curves"]},
    "darcy-inverse": {"commands": [[PY, "examples/darcy_inverse.py", "--out", "run"]], "run": "run",
                      "figures_in": "run/eval", "figures": ["predictions", "error_vs_resolution", "training_curves"]},
    "inversion": {"commands": [PETROV + ["invert", DARCY_FILE, "--method", "refined", "--inverse-run",
                                         "../darcy-inverse/run", "--indices=-4:", "--noise", "0.01",
                                         "--set", "pde_grid=141", "--set", "snap=2", "--set", "optimizer=gauss-newton",
                                         "--set", "max_iter=20", "--uncertainty", "--calibrate=-24:-4", "--out", "inv"]],
                  "run": "../darcy-inverse/run", "figures_in": "inv", "figures": ["inversion"],
                  "after": "darcy-inverse"},
    "marching": {"commands": [PETROV + ["train", "burgers-marching", "--out", "run"], PETROV + ["evaluate", "run"]],
                 "run": "run", "figures_in": "run/eval", "figures": ["spacetime", "error_vs_time", "error_vs_resolution"]},
    "mixers": {"commands": [[PY, "examples/compare_mixers.py", "--out", "run"]], "run": None, "figures_in": "run",
               "figures": ["mixers"]},
}


def shown(command: list[str]) -> str:
    """A command as a user types it (``python ...``, ``petrov ...``)."""
    if command[:3] == PETROV:
        return " ".join(["petrov", *command[3:]])
    return " ".join(["python", *command[1:]])


def run_facts(run: Path) -> dict:
    """What a training run was and reached: its config, epochs, best validation error, test rows."""
    from petrov.evaluate import read_metrics
    from petrov.evaluate.plots import read_epoch_log
    from petrov.train import load_operator

    config = json.loads((run / "config.json").read_text())
    log = read_epoch_log(run)
    best = min(log, key=lambda r: r["val_rel_l2"])
    parameters = sum(p.numel() for p in load_operator(run).model.parameters())
    rows = [{k: r[k] for k in ("resolution", "n", "mean", "median", "max") if k in r} for r in read_metrics(run / "eval")]
    return {"model": config["model"]["name"], "options": config["model"]["options"], "parameters": parameters,
            "data": {k: config["data"][k] for k in ("train_resolution", "n_train", "n_val", "n_test", "noise",
                                                      "coarse_resolution", "kind")},
            "generated": config["data"].get("generate"), "epochs": len(log), "planned_epochs": config["optim"]["epochs"],
            "best_epoch": int(best["epoch"]), "best_val_rel_l2": best["val_rel_l2"],
            "training_seconds": round(sum(r.get("seconds", 0.0) for r in log), 1), "test": rows}


def machine() -> dict:
    """Where the figures were drawn: CPU model, threads, versions, date."""
    import torch

    import petrov
    from petrov.common.machine import cpu_model

    return {"cpu": cpu_model(), "threads": os.environ.get("OMP_NUM_THREADS", "default"),
            "python": platform.python_version(), "torch": torch.__version__, "petrov": petrov.__version__,
            "date": datetime.date.today().isoformat()}


def example_facts(name: str, work: Path, cpu_seconds: float | None, previous: dict | None) -> dict:
    """The facts of example ``name``; ``cpu_seconds`` None: the commands did not train (a finished run,
    or ``--redraw``), so the CPU time and machine of the training recorded before are kept."""
    spec = EXAMPLES[name]
    previous = previous or {}
    facts = {"commands": [shown(c) for c in spec["commands"]], "figures": spec["figures"]}
    if cpu_seconds is None:
        facts["cpu_minutes"], facts["trained_on"] = previous.get("cpu_minutes"), previous.get("trained_on")
    else:
        facts["cpu_minutes"], facts["trained_on"] = round(cpu_seconds / 60, 1), machine()
    facts["drawn_on"] = machine()
    if spec["run"]:
        facts["run"] = run_facts((work / spec["run"]).resolve())
    if name == "inversion":
        metrics = json.loads((work / "inv" / "metrics.json").read_text())
        facts["inversion"] = {"mean": metrics["mean"], "noise": metrics["noise"], "grid": metrics["grid"],
                              "interval": metrics["interval"], "observation_resolution": metrics["observation_resolution"]}
    if name == "mixers":
        facts["mixers"] = json.loads((work / "run" / "mixers.json").read_text())
    return facts


def run_commands(name: str, work: Path, commands: list[list[str]] | None = None) -> float:
    """Run ``name``'s commands in ``work`` (the examples resume an interrupted run); their CPU seconds."""
    env = dict(os.environ, MPLBACKEND="Agg", PETROV_QUICK="0")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for command in commands or EXAMPLES[name]["commands"]:
        command = [str(ROOT / c) if c.startswith("examples/") else c for c in command]
        print(f"gallery {name}: {shown(command)}", flush=True)
        subprocess.run(command, cwd=work, env=env, check=True, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def redraw(name: str, work: Path) -> None:
    """The figures of a trained run drawn again by the current code (its evaluation repeated)."""
    spec = EXAMPLES[name]
    if spec["figures_in"].endswith("eval") or name == "inversion":
        shutil.rmtree(work / spec["figures_in"], ignore_errors=True)
    # the marching run is trained by `petrov train` and drawn by `petrov evaluate`; the examples
    # evaluate a trained run again when its eval/ is gone
    run_commands(name, work, spec["commands"][-1:] if name == "marching" else None)


def keep(name: str, work: Path) -> None:
    """Copy the figures (PNG for the page, PDF for papers) into docs/gallery/NAME/."""
    spec = EXAMPLES[name]
    target = GALLERY / name
    target.mkdir(parents=True, exist_ok=True)
    for figure in spec["figures"]:
        for suffix in (".png", ".pdf"):
            shutil.copyfile(work / spec["figures_in"] / f"{figure}{suffix}", target / f"{figure}{suffix}")


def read_facts() -> dict:
    return json.loads(FACTS.read_text()) if FACTS.is_file() else {"examples": {}}


def check(facts: dict) -> list[str]:
    """The figures the facts name that are missing from docs/gallery/."""
    return [f"docs/gallery/{name}/{figure}.png" for name, f in facts["examples"].items() for figure in f["figures"]
            if not (GALLERY / name / f"{figure}.png").is_file()]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--train", action="store_true", help="train (or finish) the runs, keep figures and facts")
    mode.add_argument("--redraw", action="store_true", help="draw the figures again from the trained runs")
    mode.add_argument("--check", action="store_true", help="every figure named in facts.json is in docs/gallery/")
    p.add_argument("names", nargs="*", metavar="NAME", help=f"only these examples ({', '.join(EXAMPLES)})")
    args = p.parse_args(argv)
    unknown = sorted(set(args.names) - set(EXAMPLES))
    if unknown:
        p.error(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(EXAMPLES)}")
    facts = read_facts()
    if args.check:
        missing = check(facts)
        if missing:
            print(f"gallery: missing {', '.join(missing)}; run python docs/gallery.py --redraw", file=sys.stderr)
            return 1
        print(f"gallery: {len(facts['examples'])} examples' figures and facts in {GALLERY.relative_to(ROOT)}")
        return 0
    names = args.names or list(EXAMPLES)
    for name in names:
        after = EXAMPLES[name].get("after")
        if after and not (RUNS / after / "run" / "metrics.json").is_file():
            p.error(f"{name} needs the trained {after} run first: python docs/gallery.py --train {after}")
        work = RUNS / name
        work.mkdir(parents=True, exist_ok=True)
        spec = EXAMPLES[name]
        if args.train:  # a finished example is not run again (its recorded training cost is kept)
            finished = (work / spec["figures_in"] / f"{spec['figures'][0]}.png").is_file()
            cpu = None if finished else run_commands(name, work)
        else:
            redraw(name, work)
            cpu = None
        keep(name, work)
        facts["examples"][name] = example_facts(name, work, cpu, facts["examples"].get(name))
        GALLERY.mkdir(parents=True, exist_ok=True)
        FACTS.write_text(json.dumps(facts, indent=1) + "\n")
        print(f"gallery {name}: figures in docs/gallery/{name}/, facts in {FACTS.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
