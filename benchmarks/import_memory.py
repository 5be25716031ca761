"""Peak memory of `petrov import` of a time series larger than a chunk: streamed, not loaded whole.

    python benchmarks/import_memory.py                       # a 4 GB source: 2-D, 128 x 128, 21 states, 4 fields
    python benchmarks/import_memory.py --size-gb 1           # smaller
    python benchmarks/import_memory.py --size-gb 0.2 --keep  # keep the files (printed paths)

A source HDF5 file of ``--size-gb`` of float32 values ``u (N, T, X, Y, C)`` (PDEBench's order) is written a
chunk of samples at a time (never whole in memory), then imported by ``petrov import --series FILE:u --axes
NTXYC`` in a fresh process. That process records its resident set just before the import starts (the
baseline: the interpreter, torch, h5py and petrov imported) and its high-water mark when it ends
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``); the figure is

    (peak - baseline) / (bytes of one chunk of samples of the stored y, float32)

with the chunk petrov chose (about 4M values; ``--chunk-size`` to set it). Target: under 2, i.e. the import
holds about one chunk of states and a slice of the source at a time, whatever the file's size. The stored
file is checked to hold the source's first and last samples.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cpu_model  # noqa: E402

WORKER = r"""
import json, resource, sys, time
from pathlib import Path
from petrov.datasets.time_series import import_time_series
spec = json.loads(sys.argv[1])
def rss():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096
baseline = rss()
start = time.perf_counter()
import_time_series(spec["output"], spec["source"], axes="NTXYC", grid="periodic", chunk_size=spec["chunk"],
                   overwrite=True)
print(json.dumps({"baseline": baseline, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "seconds": time.perf_counter() - start}))
"""


def write_source(path: Path, n: int, sample: tuple[int, ...], block: int) -> None:
    """``u (n, *sample)`` float32, written ``block`` samples at a time from a seeded generator."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as h5:
        ds = h5.create_dataset("u", shape=(n, *sample), dtype="float32")  # contiguous, like PDEBench's arrays
        for lo in range(0, n, block):
            hi = min(lo + block, n)
            ds[lo:hi] = rng.standard_normal((hi - lo, *sample), dtype=np.float32)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size-gb", type=float, default=4.0, help="size of the source's values in GB (1e9 bytes)")
    p.add_argument("--grid", type=int, nargs=2, default=[128, 128], metavar=("NX", "NY"))
    p.add_argument("--states", type=int, default=21)
    p.add_argument("--fields", type=int, default=4)
    p.add_argument("--chunk-size", type=int, default=None, help="samples per chunk (default: petrov's choice)")
    p.add_argument("--dir", default=None, help="where the files go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    args = p.parse_args(argv)
    from petrov.datasets.grid_files import default_chunk_size

    sample = (args.states, *args.grid, args.fields)
    values = math.prod(sample)
    n = max(2, int(args.size_gb * 1e9 // (4 * values)))
    chunk = args.chunk_size or default_chunk_size(values)
    chunk_bytes = 4 * values * chunk
    print(f"cpu: {cpu_model()}")
    print(f"source: {n} samples of (T, X, Y, C) = {sample} float32, {4 * values * n / 1e9:.2f} GB; "
          f"a chunk: {chunk} samples = {chunk_bytes / 2**20:.1f} MiB of stored y")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(args.dir) if args.keep and args.dir else Path(tmp)
        src, out = folder / "source.h5", folder / "imported.h5"
        t0 = time.perf_counter()
        write_source(src, n, sample, chunk)
        print(f"wrote the source in {time.perf_counter() - t0:.1f} s")
        spec = json.dumps({"source": f"{src}:u", "output": str(out), "chunk": chunk})
        done = subprocess.run([sys.executable, "-c", WORKER, spec], capture_output=True, text=True, check=False)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return 1
        result = json.loads(done.stdout.strip().splitlines()[-1])
        with h5py.File(src, "r") as a, h5py.File(out, "r") as b:
            for i in (0, n - 1):
                assert np.array_equal(np.moveaxis(a["u"][i], 0, 2), b["y"][i]), f"sample {i} differs"
        above = result["peak"] - result["baseline"]
        print(f"import: {result['seconds']:.1f} s ({4 * values * n / 1e9 / result['seconds']:.2f} GB/s); baseline RSS "
              f"{result['baseline'] / 2**20:.0f} MiB, peak {result['peak'] / 2**20:.0f} MiB")
        print(f"peak - baseline = {above / 2**20:.1f} MiB = {above / chunk_bytes:.2f} x one chunk "
              f"(target < 2: {'met' if above < 2 * chunk_bytes else 'NOT met'})")
        if args.keep:
            print(f"kept {src} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
