"""Draw the gallery's figures: run each example, copy its figures into docs/gallery/NAME/.

    python docs/gallery.py             # quick mode (PETROV_QUICK=1: toy runs, the figures' layout only)
    python docs/gallery.py --full      # the examples as documented (tens of CPU minutes in all)

An example whose figures are already in docs/gallery/NAME/ is not run again (``--force`` redraws).
The runs go to build/gallery/; ``make docs`` calls this before building the site.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "docs" / "gallery"
RUNS = ROOT / "build" / "gallery"
PY = sys.executable
PETROV = [PY, "-m", "petrov"]

# name -> (commands, in the run folder; the folder holding the figures, relative to it; figure names)
EXAMPLES = {
    "burgers": ([[PY, str(ROOT / "examples/burgers.py"), "--out", "run"]], "run/eval",
                ["predictions", "error_vs_resolution", "training_curves"]),
    "darcy": ([[PY, str(ROOT / "examples/darcy.py"), "--out", "run"]], "run/eval",
              ["predictions", "error_vs_resolution", "training_curves"]),
    "darcy-inverse": ([[PY, str(ROOT / "examples/darcy_inverse.py"), "--out", "run"]], "run/eval",
                      ["predictions", "error_vs_resolution"]),
    "marching": ([PETROV + ["train", "burgers-marching", "--out", "run"], PETROV + ["evaluate", "run"]], "run/eval",
                 ["spacetime", "error_vs_time", "error_vs_resolution"]),
    "inversion": ([PETROV + ["train", "darcy-inverse-quick", "--out", "run"],
                   PETROV + ["invert", "data/darcy-141.h5", "--method", "pde", "--resolution", "141",
                             "--indices=-4:", "--noise", "0.01", "--noise-stats", "run", "--out", "inv"]],
                  "inv", ["inversion"]),
    "mixers": ([[PY, str(ROOT / "examples/compare_mixers.py"), "--out", "run"]], "run", ["mixers"]),
}


def draw(name: str, full: bool, force: bool) -> None:
    commands, where, figures = EXAMPLES[name]
    target = GALLERY / name
    if not force and all((target / f"{f}.png").is_file() for f in figures):
        return
    work = RUNS / ("full" if full else "quick") / name
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PETROV_QUICK="0" if full else "1", MPLBACKEND="Agg")
    for command in commands:
        print(f"gallery {name}: {' '.join(map(str, command[1:]))}", flush=True)
        subprocess.run(command, cwd=work, env=env, check=True, stdin=subprocess.DEVNULL)
    target.mkdir(parents=True, exist_ok=True)
    for figure in figures:
        for suffix in (".png", ".pdf"):
            shutil.copyfile(work / where / f"{figure}{suffix}", target / f"{figure}{suffix}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="run the examples as documented, not in quick mode")
    p.add_argument("--force", action="store_true", help="redraw figures that exist")
    p.add_argument("names", nargs="*", metavar="NAME", help=f"only these examples ({', '.join(EXAMPLES)})")
    args = p.parse_args(argv)
    unknown = sorted(set(args.names) - set(EXAMPLES))
    if unknown:
        p.error(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(EXAMPLES)}")
    for name in args.names or EXAMPLES:
        draw(name, args.full, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
