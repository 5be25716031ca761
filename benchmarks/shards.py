"""Sharded generation: N shards as N concurrent processes on N cores vs one process, the same samples.

    python benchmarks/shards.py                                   # darcy 421, 64 samples, 2 shards
    python benchmarks/shards.py --shards 4 --n-samples 128        # on 4 idle cores
    python benchmarks/shards.py --quick                           # smoke run (tiny: the ratio means little)

First one process generates all ``n`` samples, pinned to the first usable core; then N processes generate
shard k/N each (``petrov generate ... --shard k/N``), process k pinned to the k-th usable core
(``os.sched_setaffinity``), all started together; BLAS/OpenMP threads are 1 everywhere. Each process is
a fresh ``petrov generate`` command started and timed the same way, so interpreter start-up counts in
both. Printed: wall(1 process), wall(N shards) (first start to last exit), the merge time, and the
ratio wall(N shards) / (wall(1 process) / N), 1.0 for perfect scaling (target <= 1.15); the merged
file's content hash is checked against the one-process file's. Needs N idle cores: on a busy machine
the processes share cores and the ratio says little.
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

from _common import machine_info, print_machine

TARGET_RATIO = 1.15
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


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
    parser.add_argument("--n-samples", type=int, default=64, help="samples in all (default 64)")
    parser.add_argument("--shards", type=int, default=2, help="N: shards, processes and cores (default 2)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: darcy 65, 8 samples")
    args = parser.parse_args(argv)
    if args.quick:
        args.resolution, args.n_samples = 65, 8
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < args.shards:
        raise SystemExit(f"{args.shards} shards need {args.shards} usable cores, this process may use {len(cores)}")
    print_machine(machine_info(threads=1))
    recipe = [args.kind, "--n-samples", str(args.n_samples), "--resolution", str(args.resolution), "--seed", "0",
              "--no-progress"]
    with tempfile.TemporaryDirectory(prefix="petrov-shards-") as tmp:
        root = Path(tmp)
        whole = root / "whole.h5"
        one = run_all([petrov("generate", *recipe, "-o", str(whole))], cores[:1])
        parts = [root / f"part-{k}.h5" for k in range(args.shards)]
        sharded = run_all([petrov("generate", *recipe, "--shard", f"{k}/{args.shards}", "-o", str(part))
                           for k, part in enumerate(parts)], cores[: args.shards])
        merged = root / "merged.h5"
        merge = run_all([petrov("merge", *map(str, parts), "-o", str(merged), "--no-progress")], cores[:1])
        same = content_hash(merged) == content_hash(whole)
    ratio = sharded / (one / args.shards)
    print(f"{args.kind} at {args.resolution}, {args.n_samples} samples, BLAS threads 1, one core per process")
    print(f"  1 process:             {one:8.2f} s wall ({one / args.n_samples:.3f} s per sample)")
    print(f"  {args.shards} shards on {args.shards} cores: {sharded:8.2f} s wall")
    print(f"  merge:                 {merge:8.2f} s wall (checks the shards' hashes, then copies)")
    print(f"  ratio wall({args.shards} shards) / (wall(1 process) / {args.shards}) = {ratio:.3f} "
          f"(target <= {TARGET_RATIO}: {'met' if ratio <= TARGET_RATIO else 'not met'}); with the merge "
          f"{(sharded + merge) / (one / args.shards):.3f}")
    print(f"  merged content hash {'equals' if same else 'DIFFERS FROM'} the one-process file's")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
