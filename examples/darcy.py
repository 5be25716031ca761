"""Darcy flow, forward: learn a -> u at a coarse resolution, evaluate at finer ones.

    python examples/darcy.py                  # runs/darcy (minutes on 2 CPU cores)
    python examples/darcy.py --quick          # a smoke run in under a minute
    python examples/darcy.py --model fno2d    # the FNO instead of the Darcy hybrid

-div(a grad u) = 1 on (0,1)^2, u = 0 on the boundary, a piecewise constant (12 / 3) from a Gaussian
random field (the FNO paper's recipe). The `darcy-quick` preset generates 500 samples on a 141-point node
grid, trains the Galerkin hybrid (galerkin2d) at 36 points per axis and evaluates the best checkpoint
on the test split at 36, 71 and 141: table and plots (input, truth, prediction, error maps) in OUT/eval.
Re-running continues an interrupted run.

What to expect (one run each, 30 epochs, measured on a shared 2-core CPU): test relative L2
2.5e-2 / 4.2e-2 / 5.9e-2 at 36 / 71 / 141 for the hybrid, 2.5e-2 / 2.6e-2 / 2.7e-2 for `--model fno2d`.
The hybrid's convolutional down-sampler acts on grid cells, so it is less resolution-invariant than the
FNO when evaluated finer than it was trained (the reference trains it at the fine grid, e.g. 211 -> 61).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, out_dir, run_example  # noqa: E402

# --quick: 48 samples on a 41-point grid, trained at 21, 2 epochs of a tiny model
QUICK = [
    "data.generate.n_samples=48", "data.generate.resolution=41", "data.train_resolution=21",
    "data.eval_resolutions=[11, 21, 41]", "data.n_train=32", "data.n_val=8", "data.n_test=8",
    "optim.epochs=2", "optim.min_warmup_steps=0",
]
QUICK_MODEL = {
    "galerkin2d": ["model.options.d_model=16", "model.options.n_layers=1", "model.options.coarse_size=8",
                   "model.options.modes=4", "model.options.decoder_width=8"],
    "fno2d": ["model.options.width=8", "model.options.modes=4", "model.options.n_layers=2"],
}
# The FNO: a small version of the FNO paper's Darcy model
FNO = ['model.name="fno2d"', "model.options={width = 20, modes = 8, n_layers = 4}", "loss.h1_weight=0.0"]


def main(argv=None):
    p = base_parser(__doc__.splitlines()[0], "runs/darcy")
    p.add_argument("--model", default="galerkin2d", choices=["galerkin2d", "fno2d"])
    args = p.parse_args(argv)
    out = out_dir(args, "runs/darcy" + ("" if args.model == "galerkin2d" else "-fno"))
    data = Path(args.data) if args.data else out / "data" / ("darcy-41.h5" if args.quick else "darcy-141.h5")
    overrides = (FNO if args.model == "fno2d" else []) + (QUICK + QUICK_MODEL[args.model] if args.quick else [])
    return run_example(args, "darcy-quick", out, data, overrides)


if __name__ == "__main__":
    main()
