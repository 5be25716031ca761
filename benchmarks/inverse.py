"""Inverse Darcy: method x noise table of coefficient error, phase accuracy, data misfit and cost.

    python benchmarks/inverse.py --quick          # ~1 min: 29-point grid, tiny models, 4 samples (numbers rough)
    python benchmarks/inverse.py                  # 141-point grid -> 36, 400 training samples, 20 held out
    python benchmarks/inverse.py --methods learned,pde --noises 0,0.1   # no forward model to train

For each noise level (0, 0.01, 0.1 by default) the same held-out samples (the file's last ``n_test``)
are observed once per the reference protocol (u normalised point-wise with the learned inverse run's
statistics, plus ``noise * N(0, 1)`` fixed per sample) and inverted by

- ``learned``: a latent2d_inverse (the ``darcy-inverse-quick`` preset's architecture) trained at that
  noise level (an amortized inverse, as the reference's);
- ``surrogate``: Adam on the coefficient through an fno2d forward operator (trained once, on clean
  data), started from the learned inverse's output;
- ``pde``: L-BFGS-B with adjoint gradients on petrov's finite-difference solver (no training), the
  unknown on the observation grid (``pde_grid``), its values within ``PDE_SNAP`` of 3 or 12 set to
  that value (``snap``) and the result average-pooled to the output grid.

Columns: relative L2 of a on the coarse grid, phase accuracy, data misfit (solve with the recovered a;
relative L2 against the clean and the noisy u), CPU seconds per sample (inversion only; the surrogate's
includes its learned start), training CPU minutes the method needs (learned: its inverse model;
surrogate: the forward model plus the inverse model of its start). The regularization weight is the
default of ``InversionConfig`` (surrogate) or ``pde_reg_weight(noise)`` (pde), chosen, like ``PDE_SNAP``,
on samples outside the held-out set. One thread.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import format_table, machine_info, print_machine, write_json  # noqa: E402

from petrov.datasets import generate_dataset  # noqa: E402
from petrov.train.config import config_from_dict  # noqa: E402
from petrov.inverse import invert  # noqa: E402
from petrov.evaluate.plots import read_epoch_log  # noqa: E402
from petrov.train.trainer import train  # noqa: E402

SIZES = {
    "quick": dict(native=29, coarse=8, n_train=64, n_val=8, n_test=4, epochs=12, d_model=16, fine_width=8, width=8, modes=4,
                  max_iter=40, steps=60, pde_max_iter=40),
    "full": dict(native=141, coarse=36, n_train=400, n_val=50, n_test=20, epochs=40, d_model=64, fine_width=32, width=20,
                 modes=8, max_iter=200, steps=300, pde_max_iter=1000),
}
# pde: the unknown on the observation grid, pooled to the output grid. TV weight chosen on the validation
# samples 400-402 of the full file (the held-out ones are 450-469), mean relL2(a): at 1% noise 2.82e-2
# (1e-7), 2.08e-2 (3e-8), 2.36e-2 (1e-8); at 10% noise 1.25e-1 (3e-8), 8.75e-2 (1.5e-7), 6.99e-2 (3e-7),
# 6.72e-2 (5e-7), 7.55e-2 (1e-6), 1.01e-1 (3e-6). More noise wants more regularization.


# snap (fine values within it of 3 or 12 set to that value before pooling), chosen on the validation
# samples 400-409 with the weights above, mean relL2(a) without / with snap 1.5, 2.0, 2.5: clean
# 1.36e-2 / 1.31e-2, 1.33e-2, 1.34e-2; at 1% noise 1.67e-2 / 1.53e-2, 1.53e-2, 1.54e-2; at 10% 5.97e-2 /
# 5.66e-2, 5.55e-2, 5.66e-2 (rounding every value to its phase, 4.5: 1.80e-2 and 6.25e-2 at 1 and 10%).
PDE_SNAP = 2.0


def pde_reg_weight(noise: float) -> float:
    """The TV weight of the pde method at this noise level (chosen at 0.01 and 0.1, above)."""
    return 3e-8 if noise <= 0.01 else 5e-7


METHODS = ["learned", "surrogate", "pde"]


def _timed_train(cfg: dict, run_dir: Path) -> float:
    """Train (or reuse a finished run in ``run_dir``) and return the training CPU minutes (of a reused
    run: the sum of its epochs' seconds from its ``log.jsonl``, one thread, so CPU ~ wall-clock)."""
    if (run_dir / "best.pt").exists():
        return sum(row["seconds"] for row in read_epoch_log(run_dir)) / 60.0
    t0 = time.process_time()
    train(config_from_dict(cfg), run_dir)
    return (time.process_time() - t0) / 60.0


def _configs(s: dict, data: Path, noise: float) -> tuple[dict, dict]:
    split = {"path": str(data), "n_train": s["n_train"], "n_val": s["n_val"], "n_test": s["n_test"]}
    common = {"optim": {"epochs": s["epochs"], "batch_size": 8, "min_warmup_steps": 0},
              "run": {"device": "cpu", "progress": False}}
    inverse = {"data": {**split, "kind": "darcy-inverse", "coarse_resolution": s["coarse"], "noise": noise},
               "model": {"name": "latent2d_inverse",
                         "options": {"coarse_size": s["coarse"], "latent_size": s["coarse"], "latent_kernel": 3,
                                     "d_model": s["d_model"], "fine_width": s["fine_width"], "n_layers": 2,
                                     "n_heads": 4, "norm": "layer"}}, **common}
    forward = {"data": {**split, "kind": "darcy"},
               "model": {"name": "fno2d", "options": {"width": s["width"], "modes": s["modes"]}}, **common}
    return inverse, forward


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, ~1 minute")
    p.add_argument("--noises", default="0,0.01,0.1", help="comma-separated noise levels")
    p.add_argument("--work", default=None, help="data and run directory (default bench-results/inverse[-quick])")
    p.add_argument("--out", default=None, help="JSON results (default bench-results/inverse[-quick].json)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated subset of " + ", ".join(METHODS) + " (the forward model is trained "
                        "only for surrogate)")
    args = p.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        p.error(f"--methods: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(METHODS)}")
    torch.set_num_threads(1)
    mode = "quick" if args.quick else "full"
    s = SIZES[mode]
    suffix = "-quick" if args.quick else ""
    work = Path(args.work or f"bench-results/inverse{suffix}")
    out = Path(args.out or f"bench-results/inverse{suffix}.json")
    noises = [float(x) for x in args.noises.split(",")]
    info = machine_info(1)
    print_machine(info)
    print(f"mode {mode}: grid {s['native']} -> {s['coarse']}, {s['n_train']} training samples, "
          f"held-out samples: the last {s['n_test']}, training {s['epochs']} epochs")

    data = work / f"darcy-{s['native']}.h5"
    n_total = s["n_train"] + s["n_val"] + s["n_test"]
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        generate_dataset("darcy", data, n_total, resolution=s["native"], seed=0, progress=False)
    held_out = slice(n_total - s["n_test"], n_total)
    settings = {"grid": s["coarse"], "max_iter": s["max_iter"], "steps": s["steps"]}
    pde_settings = {"pde_grid": s["native"], "max_iter": s["pde_max_iter"], "snap": PDE_SNAP}

    forward_minutes = _timed_train(_configs(s, data, 0.0)[1], work / "forward") if "surrogate" in methods else 0.0
    rows, records = [], []
    for noise in noises:
        inverse_cfg = _configs(s, data, noise)[0]
        inverse_dir = work / f"inverse-noise{noise:g}"
        inverse_minutes = _timed_train(inverse_cfg, inverse_dir)
        minutes = {"learned": inverse_minutes, "surrogate": forward_minutes + inverse_minutes, "pde": 0.0}
        for method in methods:
            result = invert(data, method, indices=held_out, noise=noise, noise_seed=0, inverse_run=inverse_dir,
                            forward_run=work / "forward" if method == "surrogate" else None,
                            start="learned" if method == "surrogate" else "midpoint",
                            settings={**settings, **pde_settings, "reg_weight": pde_reg_weight(noise)}
                            if method == "pde" else settings)
            m = result.summary()
            record = {"method": method, "noise": noise, **m, "training_cpu_minutes": minutes[method]}
            records.append(record)
            rows.append([method, f"{noise:g}", f"{m['rel_l2_a']:.3e}", f"{m['phase_accuracy']:.3f}",
                         f"{m['misfit_clean']:.2e}", f"{m['misfit_noisy']:.2e}", f"{m['cpu_seconds']:.2f}",
                         f"{minutes[method]:.2f}"])
            print(f"  {method:9s} noise {noise:<5g} relL2(a) {m['rel_l2_a']:.3e}  ({m['cpu_seconds']:.2f} CPU s/sample)",
                  flush=True)
    print()
    print(f"inverse Darcy, {s['native']} -> {s['coarse']}, {s['n_test']} held-out samples, CPU: {info['cpu']}")
    print(format_table(["method", "noise", "relL2 a", "phase acc", "misfit clean", "misfit noisy",
                        "CPU s/sample", "train CPU min"], rows))
    print("published (Galerkin Transformer README, 141 -> 36, learned; not rerun): 1.5-2e-2 clean, "
          "2.5e-2 at 0.01, 7-8e-2 at 0.1")
    write_json(out, {"machine": info, "mode": mode, "sizes": s, "noises": noises, "results": records})
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
