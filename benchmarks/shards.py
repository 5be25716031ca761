"""Sharded generation: N shards as N concurrent processes on N cores vs one process, the same samples.

    python benchmarks/shards.py                                   # darcy 421, 128 samples, 2 shards, 2 repeats
    python benchmarks/shards.py --shards 4 --n-samples 256        # on 4 idle cores
    python benchmarks/shards.py --quick                           # smoke run (tiny: the ratio means little)

One process generates all ``n`` samples, pinned to the first usable core; N processes generate shard k/N
each (``petrov generate ... --shard k/N``), process k pinned to the k-th usable core
(``os.sched_setaffinity``), all started together; BLAS/OpenMP threads are 1 everywhere. Each process is
a fresh ``petrov generate`` command started and timed the same way, so interpreter start-up counts in
both. The two are run ``--repeats`` times in turn and the fastest of each kept (a shared machine slows
whole runs, never speeds them up). Printed: wall(1 process), wall(N shards) (first start to last exit),
the merge time, and the ratio wall(N shards) / (wall(1 process) / N), 1.0 for perfect scaling (target
<= 1.15); the merged file's content hash is checked against the one-process file's.

Beside it, what the machine itself allows: the same ratio for N copies of a CPU-bound Python loop that
touches no memory (the machine's ceiling: on virtual machines two "cores" may share one physical core
or the host's other tenants, and no program scales better than this loop), and the start-up of one
``petrov`` process (imports), the fixed part of every shard.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py

from _common import machine_info, print_machine, verdict, write_json

TARGET_RATIO = 1.15
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SPIN = [sys.executable, "-c", "x = 0\nfor i in range(40_000_000): x += i"]  # CPU-bound, no memory traffic


def petrov(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "petrov"), *args]


def start(args: list[str], core: int) -> subprocess.Popen:
    """``args`` in a new process pinned to ``core``, single-threaded BLAS."""
    env = {**os.environ, **{name: "1" for name in THREAD_VARS}}
    return subprocess.Popen(args, env=env, preexec_fn=lambda: os.sched_setaffinity(0, {core}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def run_all(commands: list[list[str]], cores: list[int]) -> float:
    """Wall seconds from starting every command (one per core) to the last one's exit."""
    begin = time.perf_counter()
    procs = [start(cmd, core) for cmd, core in zip(commands, cores)]
    for cmd, proc in zip(commands, procs):
        _, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()}")
    return time.perf_counter() - begin


def content_hash(path: Path) -> str:
    with h5py.File(path, "r") as h5:
        return h5.attrs["content_hash"].decode()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="darcy", help="dataset kind (default darcy)")
    parser.add_argument("--resolution", type=int, default=421, help="native resolution (default 421)")
    parser.add_argument("--n-samples", type=int, default=128, help="samples in all (default 128)")
    parser.add_argument("--shards", type=int, default=2, help="N: shards, processes and cores (default 2)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each, the fastest kept (default 2)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: darcy 65, 8 samples, once")
    parser.add_argument("--out", default="bench-results/shards.json", help="JSON results file")
    args = parser.parse_args(argv)
    if args.quick:
        args.resolution, args.n_samples, args.repeats = 65, 8, 1
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < args.shards:
        raise SystemExit(f"{args.shards} shards need {args.shards} usable cores, this process may use {len(cores)}")
    info = machine_info(threads=1)
    print_machine(info)
    n = args.shards
    recipe = [args.kind, "--n-samples", str(args.n_samples), "--resolution", str(args.resolution), "--seed", "0",
              "--no-progress"]
    ones, shardeds, merges = [], [], []
    with tempfile.TemporaryDirectory(prefix="petrov-shards-") as tmp:
        root = Path(tmp)
        whole, merged = root / "whole.h5", root / "merged.h5"
        parts = [root / f"part-{k}.h5" for k in range(n)]
        for _ in range(args.repeats):
            for path in (whole, merged, *parts):
                path.unlink(missing_ok=True)
            ones.append(run_all([petrov("generate", *recipe, "-o", str(whole))], cores[:1]))
            shardeds.append(run_all([petrov("generate", *recipe, "--shard", f"{k}/{n}", "-o", str(part))
                                     for k, part in enumerate(parts)], cores[:n]))
            merges.append(run_all([petrov("merge", *map(str, parts), "-o", str(merged), "--no-progress")],
                                  cores[:1]))
        same = content_hash(merged) == content_hash(whole)
    startup = min(run_all([petrov("--version")], cores[:1]) for _ in range(args.repeats))
    spin_one = min(run_all([SPIN], cores[:1]) for _ in range(args.repeats))
    spin_n = min(run_all([SPIN] * n, cores[:n]) for _ in range(args.repeats))
    one, sharded, merge = min(ones), min(shardeds), min(merges)
    ratio, ceiling = sharded / (one / n), spin_n / spin_one
    met = ratio <= TARGET_RATIO
    print(f"{args.kind} at {args.resolution}, {args.n_samples} samples, BLAS threads 1, one core per process, "
          f"fastest of {args.repeats}")
    print(f"  1 process:             {one:8.2f} s wall ({one / args.n_samples:.3f} s per sample; runs "
          + ", ".join(f"{t:.1f}" for t in ones) + ")")
    print(f"  {n} shards on {n} cores: {sharded:8.2f} s wall (runs " + ", ".join(f"{t:.1f}" for t in shardeds) + ")")
    print(f"  merge:                 {merge:8.2f} s wall (checks the shards' hashes, then copies)")
    print(f"  ratio wall({n} shards) / (wall(1 process) / {n}) = {ratio:.3f} "
          f"(target <= {TARGET_RATIO}: {verdict(met)}); with the merge {(sharded + merge) / (one / n):.3f}")
    print(f"  the machine's ceiling: {n} copies of a CPU-bound loop on {n} cores take {ceiling:.3f}x one copy's "
          f"wall ({spin_one:.1f} s alone)")
    print(f"  start-up of one petrov process (imports): {startup:.2f} s, {startup / (one / n):.1%} of a shard's "
          "share of the work")
    print(f"  merged content hash {'equals' if same else 'DIFFERS FROM'} the one-process file's")
    write_json(args.out, {"machine": info, "kind": args.kind, "resolution": args.resolution,
                          "n_samples": args.n_samples, "shards": n, "one_process_s": ones, "sharded_s": shardeds,
                          "merge_s": merges, "ratio": ratio, "target": TARGET_RATIO, "met": met,
                          "machine_ceiling": ceiling, "startup_s": startup, "same_hash": same,
                          "quick": args.quick})
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
