"""Accuracy of the Navier-Stokes data (``petrov generate navier-stokes``): stored states against refined solves.

    python benchmarks/navier_stokes_accuracy.py                  # both parts, 2 samples each
    python benchmarks/navier_stokes_accuracy.py --part viscous   # nu = 1e-3 to T = 50 only
    python benchmarks/navier_stokes_accuracy.py --quick          # a smoke run (32^2, short times)

Each part solves the same w0 (the recipe's, in its solve grid's band) with the recipe's settings (stored grid 128,
its solve grid, cfl and precision), in the other precision, on half the grid, and the reference: refined
2x in space and time (256^2, cfl / 2; ``--reference time``: the recipe's grid in float64 at cfl / 4). The
states at t = 1, 2, ..., T are rounded to float32 as stored and compared by relative L2 (max over samples).

viscous: nu = 1e-3 to T = 50 (FNO's setting); target <= 1e-3 for the recipe's stored states.

chaotic: nu = 1e-5 to T = 20 (``--chaotic-t`` for longer): when the solves part ways (relative L2 over
0.1; float32 against float64 on one grid is two correct solves apart by rounding only), and their energy
and enstrophy spectra at T, shell by shell (E(k): the sum over k - 1/2 <= |k| < k + 1/2 of
(|u_k|^2 + |v_k|^2) / 2; Z(k): the same of |w_k|^2), which is what is left to compare once they part.
"""
from __future__ import annotations

import argparse
import datetime
import time

import numpy as np
import torch

from petrov.datasets.grf import periodic_grf_2d
from petrov.datasets.navier_stokes import NavierStokesParams, band, one_thread, solve_grid_of, solve_navier_stokes

from _common import cpu_model

N = 128  # the recipe's stored grid
BANDS = [(1, 4), (5, 10), (11, 21), (22, 42), (43, 64)]  # |k| shells (those below n/2 are shown)


def rel_l2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Relative L2 over the grid (last two axes)."""
    return np.sqrt(np.sum((a - b) ** 2, axis=(-2, -1)) / np.sum(b**2, axis=(-2, -1)))


def spectra(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shell sums (index |k| rounded) of the energy |u_k|^2 + |v_k|^2 over 2 and the enstrophy |w_k|^2 of
    fields ``w (b, n, n)``, averaged over the batch: two arrays (n // 2 + 1,)."""
    n = w.shape[-1]
    c = np.fft.fft2(w) / n**2
    k = np.fft.fftfreq(n, 1 / n)
    kk = k[:, None] ** 2 + k[None, :] ** 2
    shell = np.rint(np.sqrt(kk)).astype(int)
    energy = np.abs(c) ** 2 / np.where(kk > 0, 4 * np.pi**2 * kk, np.inf) / 2
    keep = shell <= n // 2
    z = np.array([np.bincount(shell[keep], (np.abs(ci) ** 2)[keep], n // 2 + 1) for ci in c]).mean(0)
    e = np.array([np.bincount(shell[keep], ei[keep], n // 2 + 1) for ei in energy]).mean(0)
    return e, z


def solve(w0: np.ndarray, nu: float, t: float, **options) -> tuple[np.ndarray, float]:
    """The states at t = 0, 1, ..., t (float32-rounded, as stored) and the seconds the solve took."""
    times = np.arange(0.0, t + 0.5)
    start = time.perf_counter()
    with one_thread():
        out = solve_navier_stokes(w0, nu, times, **options)
    return out.astype(np.float32).astype(np.float64), time.perf_counter() - start


def solves(p: NavierStokesParams, n: int, samples: int, refined: bool, seed: int = 0) -> tuple[dict, str]:
    """The recipe's solve, the other precision, a solve on half the grid, and the reference (the last): 2x
    refined in space and time (``refined``) or the recipe's grid in float64 at cfl / 4."""
    m = solve_grid_of(p, n)
    other = "float64" if p.precision == "float32" else "float32"
    runs = {f"recipe {m}^2 {p.precision}": dict(solve_grid=m, dtype=getattr(torch, p.precision)),
            f"{m}^2 {other}": dict(solve_grid=m, dtype=getattr(torch, other)),
            f"{m // 2}^2 float64": dict(solve_grid=m // 2)}
    reference = (f"refined {2 * m}^2 cfl {p.cfl / 2:g}", dict(solve_grid=2 * m, cfl=p.cfl / 2)) if refined else (
        f"{m}^2 float64 cfl {p.cfl / 4:g}", dict(solve_grid=m, cfl=p.cfl / 4))
    runs[reference[0]] = reference[1]
    w0 = periodic_grf_2d(n, seed, range(samples), modes=band(m))  # the recipe's (the half grid drops its top modes)
    out = {}
    for name, options in runs.items():
        out[name], seconds = solve(w0, p.nu, p.t, cfl=p.cfl, **options) if "cfl" not in options else solve(
            w0, p.nu, p.t, **options)
        print(f"  solved {name}: {seconds:.0f} s", flush=True)
    return out, reference[0]


def errors_over_time(out: dict, reference: str, t: float) -> None:
    """Relative L2 (max over samples) of every run against the reference, and float32 against float64."""
    times = np.arange(0.0, t + 0.5)
    shown = [k for k in range(len(times)) if k % max(1, len(times) // 10) == 0 or k == len(times) - 1]
    print(f"  relative L2 (max over samples) against {reference}:")
    print("  t:" + " " * 27 + "".join(f"{times[k]:9.0f}" for k in shown))
    names = list(out)[:-1]
    pairs = [(name, out[name], out[reference]) for name in names] + [
        (f"{names[1].split()[-1]} vs {names[0].split()[-1]} (two solves)", out[names[1]], out[names[0]])]
    for name, a, b in pairs:
        err = rel_l2(a, b).max(axis=0)
        apart = np.flatnonzero(err > 0.1)
        when = f"apart (> 0.1) from t = {times[apart[0]]:g}" if apart.size else "not apart (> 0.1)"
        print(f"  {name[:30]:30s}" + "".join(f"{err[k]:9.1e}" for k in shown) + f"   {when}")


def viscous(samples: int, n: int, t: float, refined: bool) -> None:
    p = NavierStokesParams(nu=1e-3, t=t, time_steps=int(t))
    print(f"viscous nu=1e-3 to T={t:g}, stored {n}^2, {samples} samples:")
    out, reference = solves(p, n, samples, refined)
    errors_over_time(out, reference, t)
    worst = rel_l2(out[list(out)[0]][:, 1:], out[reference][:, 1:]).max()
    print(f"  target: the recipe's stored states within 1e-3 of {reference}: {worst:.2e}, "
          f"{'met' if worst <= 1e-3 else 'not met'}")


def chaotic(samples: int, n: int, t: float, refined: bool) -> None:
    p = NavierStokesParams(t=t, time_steps=int(t))
    print(f"chaotic nu=1e-5 to T={t:g}, stored {n}^2, {samples} samples:")
    out, reference = solves(p, n, samples, refined)
    errors_over_time(out, reference, t)
    print(f"  spectra at T = {t:g}, shell sums over |k| bands, ratio to {reference} (energy / enstrophy):")
    e_ref, z_ref = spectra(out[reference][:, -1])
    bands = [(lo, hi) for lo, hi in BANDS if hi <= n // 2]
    print("  bands:" + "".join(f"{f'{lo}-{hi}':>16s}" for lo, hi in bands))
    for name in list(out)[:-1]:
        e, z = spectra(out[name][:, -1])
        ratio = [(e[lo : hi + 1].sum() / e_ref[lo : hi + 1].sum(), z[lo : hi + 1].sum() / z_ref[lo : hi + 1].sum())
                 for lo, hi in bands]
        cells = [f"{re:7.3f}/{rz:<7.3f}" for re, rz in ratio]
        print(f"  {name[:6]:6s}" + "".join(f"{c:>16s}" for c in cells) + f"   ({name})")
    share = [z_ref[lo : hi + 1].sum() / z_ref.sum() for lo, hi in bands]
    print("  enstrophy share of each band in the reference: " + ", ".join(f"{s:.1e}" for s in share))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["viscous", "chaotic", "all"], default="all")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 32^2, T = 4 (numbers are rough)")
    parser.add_argument("--viscous-t", type=float, default=50.0, help="final time of the nu = 1e-3 part")
    parser.add_argument("--chaotic-t", type=float, default=20.0, help="final time of the nu = 1e-5 part")
    parser.add_argument("--reference", choices=["refined", "time"], default="refined",
                        help="refined: 2x in space and time (default); time: the recipe's grid at cfl / 4 (cheaper)")
    args = parser.parse_args(argv)
    n = 32 if args.quick else N
    refined = args.reference == "refined"
    print(f"{cpu_model()}, torch {torch.__version__}, one thread, {datetime.date.today()}")
    if args.part in ("viscous", "all"):
        viscous(args.samples, n, 4.0 if args.quick else args.viscous_t, refined)
    if args.part in ("chaotic", "all"):
        chaotic(args.samples, n, 4.0 if args.quick else args.chaotic_t, refined)


if __name__ == "__main__":
    main()
