"""Darcy flow -div(a grad u) = f on (0,1)^2, u = 0 on the boundary: 5-point finite differences, sparse solvers.

Grid: the n x n node grid x_i = i h, h = 1/(n-1) (array axis 1 is x, axis 2 is y); the unknowns are the
(n-2)^2 interior nodes, ordered row-major. For an interior node p = (i, j):

    (1/h^2) [ a_{i+1/2,j} (u_p - u_{i+1,j}) + a_{i-1/2,j} (u_p - u_{i-1,j})
            + a_{i,j+1/2} (u_p - u_{i,j+1}) + a_{i,j-1/2} (u_p - u_{i,j-1}) ] = f_p

with face coefficients a_{i+1/2,j} = (a_ij + a_{i+1,j})/2 (arithmetic, the FNO reference) or
2 a_ij a_{i+1,j} / (a_ij + a_{i+1,j}) (harmonic); boundary values are 0, so the matrix is symmetric positive
definite. Solvers (one per sample; the matrices differ):

- "superlu": scipy's SuperLU with the MMD_AT_PLUS_A ordering (suits the symmetric pattern; much less fill
  than the default COLAMD), best for small and medium grids;
- "amg": conjugate gradients (rtol = tol) preconditioned by one V-cycle of pyamg's classical Ruge-Stuben AMG;
  "amg-sa": the same with smoothed aggregation (slower for these coefficients);
- "spsolve": the default scipy.sparse.linalg.spsolve (the baseline);
- "auto": superlu up to AUTO_SUPERLU_MAX_N, amg above (the crossover of their single-threaded CPU
  time per sample; the timings are in benchmarks/README.md, ``benchmarks/data_generation.py``).

Worker processes (workers > 0) come from ``petrov.common.worker_pool``: single-threaded spawn workers,
two of which beat one process whose sparse solve cannot use threads.
"""
from __future__ import annotations

import math
from concurrent.futures import Executor

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..common.registry import Registry
from ..common.worker_pool import worker_pool

SOLVERS: Registry = Registry("darcy solver")
AVERAGING: Registry = Registry("face averaging")

AUTO_SUPERLU_MAX_N = 160  # "auto": SuperLU for n <= this, AMG + CG above (the crossover lies in 141..211)


@AVERAGING.register("arithmetic")
def _arithmetic(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return 0.5 * (left + right)


@AVERAGING.register("harmonic")
def _harmonic(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return 2.0 * left * right / (left + right)


def darcy_matrix(a: np.ndarray, averaging: str = "arithmetic") -> sp.csr_matrix:
    """Sparse (m^2, m^2) matrix of -div(a grad .) on the interior nodes, m = n - 2, for a 2-D (n, n) coefficient."""
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[0]
    m = n - 2
    mean = AVERAGING.get(averaging)
    ax = mean(a[:-1, :], a[1:, :])  # face (i+1/2, j), shape (n-1, n)
    ay = mean(a[:, :-1], a[:, 1:])  # face (i, j+1/2), shape (n, n-1)
    inv_h2 = float(n - 1) ** 2
    diag = ax[:-1, 1:-1] + ax[1:, 1:-1] + ay[1:-1, :-1] + ay[1:-1, 1:]  # (m, m)
    right_y = -ay[1:-1, 1:].copy()  # coupling (i, j) -> (i, j+1)
    right_y[:, -1] = 0.0  # the last interior column couples to the boundary, not to the next row
    down_x = -ax[1:-1, 1:-1]  # coupling (i, j) -> (i+1, j)
    y_off = right_y.ravel()[:-1]
    x_off = down_x.ravel()
    # one interior node (n = 3) has no neighbour couplings (and offsets +-1, +-m would coincide)
    diagonals, offsets = [diag.ravel()], [0]
    if m > 1:
        diagonals, offsets = diagonals + [y_off, y_off, x_off, x_off], offsets + [1, -1, m, -m]
    mat = sp.diags(diagonals, offsets, shape=(m * m, m * m), format="csr")
    return mat * inv_h2


def factorize(mat: sp.spmatrix) -> spla.SuperLU:
    """SuperLU factorization of a Darcy matrix with the MMD_AT_PLUS_A ordering (reuse it for several solves)."""
    return spla.splu(mat.tocsc(), permc_spec="MMD_AT_PLUS_A")


@SOLVERS.register("superlu")
def _solve_superlu(mat: sp.csr_matrix, rhs: np.ndarray, tol: float) -> np.ndarray:
    return factorize(mat).solve(rhs)


@SOLVERS.register("spsolve")
def _solve_spsolve(mat: sp.csr_matrix, rhs: np.ndarray, tol: float) -> np.ndarray:
    return spla.spsolve(mat.tocsc(), rhs)


def _pcg(mat: sp.csr_matrix, rhs: np.ndarray, tol: float, hierarchy) -> np.ndarray:
    sol, info = spla.cg(mat, rhs, rtol=tol, atol=0.0, M=hierarchy.aspreconditioner(cycle="V"), maxiter=500)
    if info != 0:
        raise RuntimeError(f"AMG-preconditioned CG did not reach rtol={tol} (info={info}); try solver='superlu'")
    return sol


@SOLVERS.register("amg")
def _solve_amg(mat: sp.csr_matrix, rhs: np.ndarray, tol: float) -> np.ndarray:
    """CG preconditioned by a V-cycle of classical (Ruge-Stuben) AMG: faster than smoothed aggregation
    ("amg-sa") for these piecewise-constant coefficients at the same iteration counts (~13)."""
    import pyamg  # here, not at import: ~0.4 s of every start-up, for the solves above n = 160 only

    return _pcg(mat, rhs, tol, pyamg.ruge_stuben_solver(mat))


@SOLVERS.register("amg-sa")
def _solve_amg_sa(mat: sp.csr_matrix, rhs: np.ndarray, tol: float) -> np.ndarray:
    """CG preconditioned by a V-cycle of smoothed-aggregation AMG (symmetric Gauss-Seidel smoothing)."""
    import pyamg

    gauss_seidel = ("gauss_seidel", {"sweep": "symmetric"})
    hierarchy = pyamg.smoothed_aggregation_solver(
        mat, symmetry="symmetric", presmoother=gauss_seidel, postsmoother=gauss_seidel, improve_candidates=None
    )
    return _pcg(mat, rhs, tol, hierarchy)


@SOLVERS.register("auto")
def _solve_auto(mat: sp.csr_matrix, rhs: np.ndarray, tol: float) -> np.ndarray:
    n = math.isqrt(mat.shape[0]) + 2
    return (_solve_superlu if n <= AUTO_SUPERLU_MAX_N else _solve_amg)(mat, rhs, tol)


def _solve_chunk(a: np.ndarray, f: np.ndarray, averaging: str, solver: str, tol: float) -> np.ndarray:
    """Solve each sample of a chunk: a (c, n, n), f (c, n, n) -> u (c, n, n) with zero boundary."""
    solve = SOLVERS.get(solver)
    u = np.zeros_like(a)
    for s in range(a.shape[0]):
        mat = darcy_matrix(a[s], averaging)
        u[s, 1:-1, 1:-1] = solve(mat, f[s, 1:-1, 1:-1].ravel(), tol).reshape(a.shape[1] - 2, -1)
    return u


def _check_inputs(a, f, averaging: str, solver: str, tol: float, workers: int):
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"a must have shape (batch, n, n), got {a.shape}")
    if a.shape[1] < 3:
        raise ValueError(f"the grid needs n >= 3 nodes per side (one interior node), got n={a.shape[1]}")
    if not np.issubdtype(a.dtype, np.number) or np.iscomplexobj(a):
        raise ValueError(f"a must be real, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False)
    if not np.isfinite(a).all():
        raise ValueError("a contains NaN or inf values")
    if (a <= 0).any():
        raise ValueError(f"a must be positive everywhere (elliptic problem); minimum is {a.min()}")
    f = np.asarray(f, dtype=np.float64)
    if f.ndim == 0:
        f = np.broadcast_to(f, a.shape)
    elif f.shape != a.shape:
        raise ValueError(f"f must be a scalar or have the shape of a {a.shape}, got {f.shape}")
    if not np.isfinite(f).all():
        raise ValueError("f contains NaN or inf values")
    AVERAGING.get(averaging)  # KeyError naming the choices
    SOLVERS.get(solver)
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol}")
    if not isinstance(workers, Executor) and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        raise ValueError(f"workers must be a non-negative integer or an Executor, got {workers!r}")
    return a, f


def solve_darcy(
    a,
    f=1.0,
    *,
    averaging: str = "arithmetic",
    solver: str = "auto",
    workers: int | Executor = 0,
    tol: float = 1e-10,
    chunks_per_worker: int = 4,
) -> np.ndarray:
    """Solve -div(a grad u) = f, u = 0 on the boundary, for each coefficient a[s] on the node grid of [0,1]^2.

    a: (b, n, n) positive coefficients; f: scalar or (b, n, n). Returns u: float64 (b, n, n), boundary exactly 0.
    averaging: "arithmetic" | "harmonic" face coefficients; solver: "auto" | "superlu" | "amg" | "amg-sa" | "spsolve";
    tol: relative residual for the iterative solver. workers: 0 solves in this process; k > 0 starts k
    single-threaded spawn workers for this call; an Executor (e.g. from ``worker_pool``) is used as is,
    which saves the start-up cost when generating a dataset chunk by chunk.
    """
    a, f = _check_inputs(a, f, averaging, solver, tol, workers)
    b = a.shape[0]
    if isinstance(workers, Executor):
        return _solve_in_pool(workers, a, f, averaging, solver, tol, chunks_per_worker, workers._max_workers
                              if hasattr(workers, "_max_workers") else 2)
    if workers == 0 or b <= 1:
        return _solve_chunk(a, f, averaging, solver, tol)
    with worker_pool(min(workers, b)) as pool:
        return _solve_in_pool(pool, a, f, averaging, solver, tol, chunks_per_worker, min(workers, b))


def _solve_in_pool(pool: Executor, a, f, averaging, solver, tol, chunks_per_worker: int, workers: int):
    """Split the batch into about workers * chunks_per_worker contiguous chunks (balances uneven solves)."""
    b = a.shape[0]
    n_chunks = max(1, min(b, workers * max(1, chunks_per_worker)))
    bounds = np.linspace(0, b, n_chunks + 1).astype(int)
    futures = [
        pool.submit(_solve_chunk, a[lo:hi], np.ascontiguousarray(f[lo:hi]), averaging, solver, tol)
        for lo, hi in zip(bounds[:-1], bounds[1:])
    ]
    return np.concatenate([fut.result() for fut in futures])
