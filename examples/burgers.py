"""The demo: learn the Burgers solution operator at one resolution, evaluate it at six.

    python examples/burgers.py --out runs/demo-burgers          # `make demo`
    python examples/burgers.py --quick                          # a smoke run in under a minute
    python examples/burgers.py --out runs/demo-record --record  # `make demo-record`: also its record

1. Data: 1200 Burgers samples (nu = 0.1, u(.,0) -> u(.,1)) on the native 8192-point grid, generated
   into OUT-data/ if missing (seconds; see petrov.datasets).
2. Training: the Galerkin hybrid with the shipped `burgers-quick` preset, at ONE resolution (the
   preset's data.train_resolution), on CPU in minutes.
3. Evaluation: the best checkpoint on the held-out test split at 256, 512, ..., 8192 points; a table
   of relative L2 (printed, and OUT/eval/metrics.csv/.json) and plots (OUT/eval/*.png).

Interrupted? Run the same command again: it resumes training from OUT/last.pt.
The same with the CLI: `petrov train burgers-quick --out OUT`, then `petrov evaluate OUT`.

``--record`` also writes the figure this command measured, the test relative L2 per resolution, as the
result record benchmarks/results/demo-burgers.json (with the command, commit, CPU and versions; see
benchmarks/records.py), from which the docs' demo table is rendered.  It is a flag, off by default, so
that a user's `make demo` leaves their checkout as it was; `make demo-record` passes it.  A run that was
already finished measures nothing new, so ``--record`` asks for a fresh one.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, example_data, out_dir, run_example, run_script, run_state  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RECORD = "demo-burgers"

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
    p.add_argument("--record", action="store_true", help=f"write the test relative L2 per resolution to "
                   f"benchmarks/results/{RECORD}.json (`make demo-record`)")
    args = p.parse_args(argv)
    out = out_dir(args, "runs/demo-burgers")
    if args.record and (args.quick or run_state(out) == "finished"):
        raise SystemExit("--record writes the figure this command measures: "
                         + ("not with --quick (its numbers are meaningless)" if args.quick else
                            f"{out} holds a finished run; pass another --out, or delete {out}"))
    samples = 96 if args.quick else args.samples
    data = example_data(args, out, f"burgers-8192-n{samples}.h5")
    resolutions = [int(r) for r in args.resolutions.split(",")]
    overrides = [f"data.generate.n_samples={samples}", "data.generate.resolution=8192",
                 f"data.eval_resolutions={resolutions}", *(QUICK if args.quick else [])]
    rows = run_example(args, "burgers-quick", out, data, overrides, resolutions,
                       target=None if args.quick else TARGET)
    if args.record:
        write_demo_record(out, rows, args, overrides)
    return rows


def write_demo_record(out: Path, rows: list[dict], args, overrides: list[str]) -> None:
    """benchmarks/results/demo-burgers.json: the test relative L2 (mean over the test samples) per
    resolution, one row for the run's model under its seed, with its size and epochs as facts."""
    import json

    from petrov.evaluate.plots import read_epoch_log
    from petrov.train import load_operator

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from records import write_record

    config = json.loads((out / "config.json").read_text())
    seed = config["run"]["seed"]
    model = config["model"]["name"]
    facts = {"parameters": sum(p.numel() for p in load_operator(out).model.parameters()),
             "epochs": len(read_epoch_log(out)), "train_resolution": config["data"]["train_resolution"],
             "n_train": config["data"]["n_train"], "n_test": rows[0]["n"]}
    settings = {"preset": "burgers-quick", "samples": args.samples, "overrides": [*overrides, *args.set],
                "config": config}
    path = write_record(RECORD, {model: {r["resolution"]: {seed: r["mean"]} for r in rows}}, facts={model: facts},
                        settings=settings, metric="test relative L2, mean over the test samples",
                        device=args.device)
    print(f"wrote the record {path}")


if __name__ == "__main__":
    sys.exit(run_script(main))
