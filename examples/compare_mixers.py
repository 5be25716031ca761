"""The same Burgers model with each attention mixer, under one training budget: one table.

    python examples/compare_mixers.py                      # runs/mixers (tens of minutes on 2 cores)
    python examples/compare_mixers.py --quick              # a smoke run
    python examples/compare_mixers.py --mixers galerkin,fourier --epochs 10

Every mixer registered in petrov.operators (list_mixers(): galerkin, fourier, softmax, linear,
performer, cosformer) is plugged into the `burgers-quick` Galerkin hybrid (same width, depth,
decoder, optimiser, seed, data) and trained for the same number of epochs at one resolution. The
table (OUT/mixers.csv, .json, printed) gives the test relative L2 at the training resolution and at
the finest evaluated one, the parameter count and the mean seconds per epoch (wall clock: compare
them on an otherwise idle machine).  Each mixer's run is OUT/MIXER/ and resumes if interrupted.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import base_parser, example_data, out_dir, run_example, run_script  # noqa: E402

from petrov.operators import list_mixers  # noqa: E402
from petrov.evaluate.plots import plot_comparison, read_epoch_log  # noqa: E402
from petrov.common.files import atomic_write  # noqa: E402
from petrov.train import load_operator  # noqa: E402

FIELDS = ["mixer", "params", "seconds_per_epoch", "epochs", "train_resolution", "rel_l2_train_res",
          "eval_resolution", "rel_l2_eval_res"]
QUICK = [
    "data.train_resolution=256", "data.n_train=32", "data.n_val=8", "data.n_test=8",
    "model.options.d_model=16", "model.options.n_layers=1", "model.options.decoder_width=16",
    "model.options.modes=8", "optim.batch_size=8",
]


def summarize_run(run_dir: Path, mixer: str, rows: list[dict], train_res: int) -> dict:
    log = read_epoch_log(run_dir)
    params = sum(p.numel() for p in load_operator(run_dir).model.parameters())
    at = {r["resolution"]: r["mean"] for r in rows}
    finest = max(at)
    return {"mixer": mixer, "params": params, "seconds_per_epoch": sum(r["seconds"] for r in log) / len(log),
            "epochs": len(log), "train_resolution": train_res, "rel_l2_train_res": at[train_res],
            "eval_resolution": finest, "rel_l2_eval_res": at[finest]}


def write_table(table: list[dict], out: Path) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(table)
    for name, text in (("mixers.csv", buf.getvalue()), ("mixers.json", json.dumps(table, indent=2) + "\n")):
        atomic_write(out / name, text)


def main(argv=None):
    p = base_parser(__doc__.splitlines()[0], "runs/mixers")
    p.add_argument("--mixers", default=",".join(list_mixers()), help="comma-separated (default: all)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per mixer (default 8; 1 with --quick)")
    p.add_argument("--train-resolution", type=int, default=512)
    p.add_argument("--eval-resolution", type=int, default=8192, help="also evaluate here (default 8192)")
    p.add_argument("--samples", type=int, default=700, help="samples to generate (default %(default)s)")
    args = p.parse_args(argv)
    mixers = [m.strip() for m in args.mixers.split(",") if m.strip()]
    unknown = sorted(set(mixers) - set(list_mixers()))
    if unknown:
        p.error(f"unknown mixer(s) {', '.join(unknown)}; registered: {', '.join(list_mixers())}")
    out = out_dir(args, "runs/mixers")
    samples = 48 if args.quick else args.samples
    epochs = args.epochs or (1 if args.quick else 8)
    train_res = 256 if args.quick else args.train_resolution
    data = example_data(args, out, f"burgers-8192-n{samples}.h5")
    resolutions = sorted({train_res, args.eval_resolution})
    table = []
    for mixer in mixers:
        print(f"\n=== mixer {mixer} ===", flush=True)
        overrides = [f"data.generate.n_samples={samples}", "data.generate.resolution=8192",
                     # the trainer tests at the training resolution only; all resolutions are evaluated
                     # once, afterwards, with a small batch (fourier and softmax hold batch * n^2
                     # numbers per layer: 2 GB at n = 8192 with batch 8)
                     f"data.train_resolution={train_res}", f"data.eval_resolutions=[{train_res}]",
                     "run.eval_batch_size=2",
                     f'model.options.mixer="{mixer}"', f"optim.epochs={epochs}", *(QUICK if args.quick else [])]
        run_example(args, "burgers-quick", out / mixer, data, overrides, resolutions, plots=not args.quick)
        rows = json.loads((out / mixer / "eval" / "metrics.json").read_text())["rows"]
        table.append(summarize_run(out / mixer, mixer, rows, train_res))
    write_table(table, out)
    plot_comparison([r["mixer"] for r in table], [r["rel_l2_eval_res"] for r in table], out / "mixers.png",
              title=f"Burgers, trained at {train_res}, test at {args.eval_resolution}, "
                    f"{epochs} epoch{'s' if epochs != 1 else ''}")
    print(f"\n{'mixer':>10} {'params':>8} {'s/epoch':>8} {'relL2@' + str(train_res):>12} "
          f"{'relL2@' + str(args.eval_resolution):>12}")
    for r in table:
        print(f"{r['mixer']:>10} {r['params']:>8} {r['seconds_per_epoch']:>8.1f} {r['rel_l2_train_res']:>12.3e} "
              f"{r['rel_l2_eval_res']:>12.3e}")
    print(f"saved {out / 'mixers.csv'}, {out / 'mixers.json'} and {out / 'mixers.png'}")
    return table


if __name__ == "__main__":
    sys.exit(run_script(main))
