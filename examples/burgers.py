"""The demo: learn the Burgers solution operator at one resolution, evaluate it at six.

    python examples/burgers.py --out runs/demo-burgers          # `make demo`
    python examples/burgers.py --quick                          # a smoke run in under a minute

1. Data: 1200 Burgers samples (nu = 0.1, u(.,0) -> u(.,1)) on the native 8192-point grid, generated
   into OUT-data/ if missing (seconds; see petrov.datasets).
2. Training: the Galerkin hybrid with the shipped `burgers-quick` preset, at ONE resolution (the
   preset's data.train_resolution), on CPU in minutes.
3. Evaluation: the best checkpoint on the held-out test split at 256, 512, ..., 8192 points; a table
   of relative L2 (printed, and OUT/eval/metrics.csv/.json) and plots (OUT/eval/*.png).

Interrupted? Run the same command again: it resumes training from OUT/last.pt.
The same with the CLI: `petrov train burgers-quick --out OUT`, then `petrov evaluate OUT`.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, example_data, out_dir, run_example, run_script  # noqa: E402

RESOLUTIONS = "256,512,1024,2048,4096,8192"
TARGET = 1e-2  # the relative L2 the demo aims below at every resolution

# --quick: a tiny model on 96 samples for 2 epochs (checks the pipeline, not the accuracy)
QUICK = [
    "data.train_resolution=256", "data.n_train=64", "data.n_val=16", "data.n_test=16",
    "model.options.d_model=16", "model.options.n_layers=1", "model.options.decoder_width=16",
    "model.options.modes=8", "optim.epochs=2", "optim.batch_size=8",
]


def main(argv=None):
    p = base_parser(__doc__.splitlines()[0], "runs/demo-burgers")
    p.add_argument("--samples", type=int, default=1200, help="samples to generate (default %(default)s)")
    p.add_argument("--resolutions", default=RESOLUTIONS, help="evaluation resolutions (default %(default)s)")
    args = p.parse_args(argv)
    out = out_dir(args, "runs/demo-burgers")
    samples = 96 if args.quick else args.samples
    data = example_data(args, out, f"burgers-8192-n{samples}.h5")
    resolutions = [int(r) for r in args.resolutions.split(",")]
    overrides = [f"data.generate.n_samples={samples}", "data.generate.resolution=8192",
                 f"data.eval_resolutions={resolutions}", *(QUICK if args.quick else [])]
    return run_example(args, "burgers-quick", out, data, overrides, resolutions,
                       target=None if args.quick else TARGET)


if __name__ == "__main__":
    sys.exit(run_script(main))
