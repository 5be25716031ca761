"""Memory of a two-node training run on a data file of at least 2 GB: each rank reads its own samples, lazily.

Usage (from the repository root):

    python benchmarks/multinode.py --quick     # a 4 MB file and a short run: checks the script (a minute)
    python benchmarks/multinode.py             # the measurement: Burgers at 8192, 33,000 samples (2.17 GB)

The script generates the data file once (``--data``, default ``data/multinode-burgers-8192.h5``; reused
when it exists; ``petrov generate burgers``, a few minutes on 2 cores), then starts two torchrun launchers
on this machine as two nodes would start them (``--nnodes 2``, one worker each, c10d rendezvous on
127.0.0.1, gloo), training ``fno1d`` for one epoch at the file's native resolution on all but 400 of its
samples (200 validation, 200 test).  Each worker is this script (``--worker``), which runs ``petrov
train`` and then records its peak resident memory (``getrusage``'s ``ru_maxrss``: the high-water mark
over the whole process, the imported libraries included).

Printed: the CPU model, the file's size, every rank's peak RSS and its ratio to the file's size (target:
below 0.25 per rank).  For scale: the peak RSS of a process that only imports torch and petrov, and of the
same two-node run on a small file of the same kind (64 samples; ``--no-reference`` leaves it out): their
difference is what the file's size costs a rank.  One process reading the training split into memory at
this resolution would need the split's size (about the file's) on top of the small run's peak.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import cpu_model, machine_info, print_machine, verdict, write_json

TARGET = 0.25  # peak RSS per rank / file size
FULL = {"samples": 33_000, "resolution": 8192, "val": 200, "test": 200, "batch": 8}
QUICK = {"samples": 64, "resolution": 8192, "val": 8, "test": 8, "batch": 8}


def worker(argv: list[str]) -> int:
    """A torchrun worker: ``petrov train ARGV``, then this rank's peak RSS into ``$PEAK_DIR/rank<R>.json``."""
    from petrov.cli.main import main

    code = main(argv)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    rank = os.environ.get("RANK", "0")
    Path(os.environ["PEAK_DIR"], f"rank{rank}.json").write_text(json.dumps({"rank": int(rank), "peak_rss": peak}))
    return code


def import_rss() -> int:
    """Peak RSS of a process that imports torch and petrov's trainer and does nothing else."""
    code = "import resource, petrov.train.trainer; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout) * 1024


def ensure_data(path: Path, size: dict) -> None:
    if path.exists():
        print(f"data: reusing {path}")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"data: generating {size['samples']} Burgers samples at {size['resolution']} into {path} ...", flush=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "petrov", "generate", "burgers", "--n-samples", str(size["samples"]),
                    "--resolution", str(size["resolution"]), "--no-progress", "-o", str(path)], check=True)
    print(f"data: {time.perf_counter() - start:.0f} s")


def config(path: Path, size: dict, n_samples: int) -> str:
    n_train = n_samples - size["val"] - size["test"]
    return f"""
[data]
path = "{path.resolve()}"
n_train = {n_train}
n_val = {size["val"]}
n_test = {size["test"]}
[model]
name = "fno1d"
[model.options]
width = 8
modes = 16
n_layers = 1
proj_hidden = 16
[optim]
epochs = 1
batch_size = {size["batch"]}
[run]
progress = false
device = "cpu"
threads = 1
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(folder: Path, toml: Path, timeout: float) -> float:
    """Run the two launchers; the seconds they took (an error if either failed)."""
    port, procs = free_port(), []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PEAK_DIR": str(folder)}
    start = time.perf_counter()
    for node in range(2):
        cmd = [str(Path(sys.executable).parent / "torchrun"), "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
               str(Path(__file__).resolve()), "--worker", "train", str(toml), "--out", str(folder / "run")]
        log = open(folder / f"node{node}.log", "w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True))
    for node, proc in enumerate(procs):
        if proc.wait(timeout=timeout) != 0:
            raise SystemExit(f"node {node} failed: see {folder / f'node{node}.log'}\n"
                             + (folder / f"node{node}.log").read_text()[-3000:])
    return time.perf_counter() - start


def measure(data: Path, size: dict, timeout: float) -> tuple[list[dict], float]:
    """Every rank's ``{"rank", "peak_rss"}`` of the two-node run on ``data``, and the seconds it took."""
    with tempfile.TemporaryDirectory(prefix="petrov-multinode-") as tmp:
        folder = Path(tmp)
        toml = folder / "run.toml"
        toml.write_text(config(data, size, samples_in(data)))
        seconds = two_nodes(folder, toml, timeout)
        peaks = sorted((json.loads(p.read_text()) for p in folder.glob("rank*.json")), key=lambda r: r["rank"])
    return peaks, seconds


def samples_in(path: Path) -> int:
    from petrov.datasets import dataset_info

    return int(dataset_info(path)["n_complete"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 4 MB file and a short run (checks the script)")
    parser.add_argument("--data", type=Path, help="the data file (generated if missing; default by mode)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds the run may take")
    parser.add_argument("--out", default="bench-results/multinode.json", help="JSON results file")
    parser.add_argument("--no-reference", action="store_true", help="skip the run on a small file")
    args = parser.parse_args(argv)
    size = QUICK if args.quick else FULL
    data = args.data or Path("data") / ("multinode-quick.h5" if args.quick else "multinode-burgers-8192.h5")
    info = machine_info(threads=1)
    print_machine(info)
    ensure_data(data, size)
    n_samples, file_bytes = samples_in(data), data.stat().st_size
    if not args.quick and file_bytes < 2e9:
        print(f"WARNING: {data} holds {file_bytes / 1e9:.2f} GB, less than the 2 GB the measurement asks for")
    reference = None
    if not args.no_reference:
        small = data.with_name(f"{data.stem}-reference.h5")
        ensure_data(small, {**size, "samples": QUICK["samples"]})
        reference, _ = measure(small, {**size, **{k: QUICK[k] for k in ("val", "test")}}, args.timeout)
    peaks, seconds = measure(data, size, args.timeout)
    base = import_rss()
    print(f"\nCPU: {cpu_model()}")
    print(f"data file: {data} ({n_samples} samples at {size['resolution']}), {file_bytes / 1e9:.3f} GB")
    print(f"two nodes x 1 worker, one epoch at the native resolution, batch {size['batch']}: {seconds:.0f} s")
    print(f"a process that only imports torch and petrov: peak RSS {base / 1e6:.0f} MB")
    if reference:
        print("the same run on a 64-sample file: peak RSS " + ", ".join(
            f"rank {r['rank']} {r['peak_rss'] / 1e6:.0f} MB" for r in reference))
    rows = []
    for r in peaks:
        ratio = r["peak_rss"] / file_bytes
        met = ratio < TARGET
        extra = f"; {(r['peak_rss'] - reference[r['rank']]['peak_rss']) / 1e6:+.0f} MB over the small file" \
            if reference else ""
        rows.append({**r, "ratio": ratio, "met": met})
        print(f"rank {r['rank']}: peak RSS {r['peak_rss'] / 1e6:.0f} MB = {ratio:.3f} of the file{extra} "
              f"(target < {TARGET}: {verdict(met) if not args.quick else 'quick run, not a measurement'})")
    write_json(args.out, {"machine": info, "data": str(data), "file_bytes": file_bytes, "samples": n_samples,
                          "seconds": seconds, "import_rss": base, "ranks": rows, "reference": reference,
                          "quick": args.quick})


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2:]))
    main()
