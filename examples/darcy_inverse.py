"""Inverse Darcy: recover the coefficient a (average-pooled to a coarse grid) from a noisy solution u.

    python examples/darcy_inverse.py --noise 0.01     # runs/darcy-inverse-noise0.01
    python examples/darcy_inverse.py --noise 0.1 --quick

The `darcy-inverse-quick` preset: input u on a 71-point grid, normalised point-wise, plus
noise * N(0, 1) (the same noise for a sample in every epoch and in evaluation, fixed by its index);
target a average-pooled to 36 x 36; the resolution-invariant inverse attention operator
(latent2d_inverse: attention and a 3x3 convolution on a 36 x 36 latent grid fixed in physical space,
which is also the output grid, reached through a 3x3 convolution on a 71 x 71 stencil grid). The best
checkpoint is evaluated at input resolutions 71 and 141 (the target grid stays 36 x 36).
Re-running continues an interrupted run.

What to expect (measured on one AMD EPYC core, 1% noise, the preset's 40 epochs, 12 minutes): test
relative L2 7.3e-2 at 71 and 7.0e-2 at 141; without the stencil grid 9.3e-2 and 8.9e-2; the reference
hybrid galerkin2d_inverse reached 7.9e-2 at 71 but 1.7e-1 at 141 (a frame of error along the boundary).
The reference's 2.5e-2 takes far longer training (the darcy-inverse-gpu preset).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, example_data, out_dir, run_example, run_script  # noqa: E402

# --quick: 48 samples on a 41-point grid; input at 21 (and 41), target pooled to 11; 2 epochs
QUICK = [
    "data.generate.n_samples=48", "data.generate.resolution=41", "data.train_resolution=21",
    "data.eval_resolutions=[21, 41]", "data.coarse_resolution=11", "data.n_train=32", "data.n_val=8",
    "data.n_test=8", "model.options.coarse_size=11", "model.options.latent_size=8", "model.options.d_model=16",
    "model.options.n_layers=1", "model.options.fine_width=8", "model.options.stencil_size=21",
    "optim.epochs=2", "optim.min_warmup_steps=0",
]


def main(argv=None):
    p = base_parser(__doc__.splitlines()[0], "runs/darcy-inverse")
    p.add_argument("--noise", type=float, default=0.01, help="input noise level (default %(default)s; "
                   "the reference uses 0, 0.01, 0.1)")
    args = p.parse_args(argv)
    if not args.noise >= 0:
        p.error(f"--noise must be >= 0, got {args.noise}")
    out = out_dir(args, f"runs/darcy-inverse-noise{args.noise:g}")
    data = example_data(args, out, ("darcy-41.h5" if args.quick else "darcy-141.h5"))
    overrides = [f"data.noise={args.noise!r}", *(QUICK if args.quick else [])]
    return run_example(args, "darcy-inverse-quick", out, data, overrides)


if __name__ == "__main__":
    sys.exit(run_script(main))
