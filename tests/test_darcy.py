"""Darcy solver: 2nd-order convergence, SPD matrix equal to a plainly built one, solver agreement, errors."""
import numpy as np
import pytest
import scipy.sparse as sp

from petrov.common.worker_pool import worker_pool, worker_thread_settings
from petrov.datasets.darcy import darcy_matrix, solve_darcy
from petrov.datasets.grf import darcy_coefficient, neumann_grf_2d

SOLVERS = ["auto", "superlu", "amg", "amg-sa", "spsolve"]


def manufactured(n):
    """a = 1 + x^2 + y, u = sin(pi x) sin(pi y), f = -div(a grad u) (axis 1 is x, axis 2 is y)."""
    x, y = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    a = 1 + x**2 + y
    u = np.sin(np.pi * x) * np.sin(np.pi * y)
    u_x = np.pi * np.cos(np.pi * x) * np.sin(np.pi * y)
    u_y = np.pi * np.sin(np.pi * x) * np.cos(np.pi * y)
    f = -(2 * x * u_x + 1.0 * u_y) + 2 * np.pi**2 * a * u
    return a[None], f[None], u[None]


@pytest.mark.parametrize("averaging", ["arithmetic", "harmonic"])
def test_second_order_convergence(averaging):
    errors = []
    for n in (17, 33, 65):
        a, f, u = manufactured(n)
        errors.append(np.abs(solve_darcy(a, f, averaging=averaging) - u).max())
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all((orders > 1.85) & (orders < 2.15)), (errors, orders)


def plain_matrix(a, averaging):
    """Dense matrix of the 5-point scheme, built node by node."""
    n = a.shape[0]
    m = n - 2
    mean = (lambda p, q: (p + q) / 2) if averaging == "arithmetic" else (lambda p, q: 2 * p * q / (p + q))
    mat = np.zeros((m * m, m * m))
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            row = (i - 1) * m + (j - 1)
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                face = mean(a[i, j], a[i + di, j + dj]) * (n - 1) ** 2
                mat[row, row] += face
                if 1 <= i + di <= n - 2 and 1 <= j + dj <= n - 2:
                    mat[row, (i + di - 1) * m + (j + dj - 1)] -= face
    return mat


@pytest.mark.parametrize("averaging", ["arithmetic", "harmonic"])
def test_matrix_equals_plain_construction_and_is_spd(averaging):
    a = np.random.default_rng(0).uniform(0.5, 12.0, size=(7, 7))
    mat = darcy_matrix(a, averaging)
    assert sp.issparse(mat) and mat.shape == (25, 25)
    np.testing.assert_allclose(mat.toarray(), plain_matrix(a, averaging), rtol=1e-14, atol=0)
    assert (mat != mat.T).nnz == 0  # exactly symmetric
    assert np.linalg.eigvalsh(mat.toarray()).min() > 0


def test_harmonic_and_arithmetic_differ_only_across_jumps():
    np.testing.assert_allclose(
        darcy_matrix(np.full((6, 6), 3.0), "harmonic").toarray(), darcy_matrix(np.full((6, 6), 3.0)).toarray()
    )
    a = darcy_coefficient(neumann_grf_2d(9, seed=0, indices=[0]))[0]
    assert abs(darcy_matrix(a, "harmonic") - darcy_matrix(a)).max() > 1.0


def test_all_solvers_agree_and_boundary_is_zero():
    a = darcy_coefficient(neumann_grf_2d(33, seed=1, indices=[0, 1]))
    ref = solve_darcy(a, solver="superlu")
    assert np.all(ref[:, [0, -1], :] == 0) and np.all(ref[:, :, [0, -1]] == 0)
    assert ref[:, 1:-1, 1:-1].min() > 0  # maximum principle with f = 1 > 0
    for solver in SOLVERS:
        u = solve_darcy(a, solver=solver)
        assert u.shape == a.shape and u.dtype == np.float64
        assert np.all(u[:, [0, -1], :] == 0) and np.all(u[:, :, [0, -1]] == 0)
        np.testing.assert_allclose(u, ref, rtol=0, atol=1e-8 * np.abs(ref).max(), err_msg=solver)


def test_scalar_and_array_forcing_agree():
    a = darcy_coefficient(neumann_grf_2d(9, seed=2, indices=[0, 1]))
    np.testing.assert_allclose(solve_darcy(a, 2.0), solve_darcy(a, np.full(a.shape, 2.0)))
    np.testing.assert_allclose(solve_darcy(a, 2.0), 2 * solve_darcy(a, 1.0))


def test_worker_processes_are_single_threaded_and_give_the_same_result():
    a = darcy_coefficient(neumann_grf_2d(17, seed=3, indices=range(5)))
    parent = worker_thread_settings()
    with worker_pool(2) as pool:
        for settings in (pool.submit(worker_thread_settings).result() for _ in range(4)):
            assert settings["OMP_NUM_THREADS"] == "1" and settings["OPENBLAS_NUM_THREADS"] == "1"
        np.testing.assert_array_equal(solve_darcy(a, workers=pool), solve_darcy(a, workers=0))
    assert worker_thread_settings() == parent  # the parent's environment is restored


def test_a_worker_pool_left_by_an_exception_kills_its_workers_instead_of_waiting():
    """Ctrl-C or SIGTERM in the parent: the pool's workers end now, their running task unfinished (the
    pool would otherwise wait the ten minutes of this one)."""
    import time

    with pytest.raises(KeyboardInterrupt):
        with worker_pool(1) as pool:
            running = pool.submit(time.sleep, 600)
            workers = list(pool._processes.values())
            raise KeyboardInterrupt
    assert workers and not any(w.is_alive() for w in workers)
    assert not running.done() or running.cancelled() or running.exception(timeout=0) is not None


INTERRUPTED_WHILE_SENDING = """
import sys
import numpy as np
from petrov.common.worker_pool import worker_pool

if __name__ == "__main__":
    for _ in range(3):  # one try hung five times in six before the fix
        try:
            with worker_pool(2) as pool:
                results = [pool.submit(np.full, 421 * 421 * 16, 1.0) for _ in range(50)]  # 23 MB each
                results[0].result()
                raise KeyboardInterrupt  # while the workers are sending the next ones
        except KeyboardInterrupt:
            print("stopped")
"""


def test_a_worker_pool_interrupted_while_its_workers_send_large_results_stops(tmp_path):
    """A worker killed in the middle of sending a result larger than a pipe holds (a 421 x 421 solution)
    left the pool's manager thread waiting for the rest of the message: ``petrov generate`` and ``petrov
    train`` hung on SIGTERM instead of stopping."""
    import subprocess
    import sys

    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED_WHILE_SENDING)
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the interrupted pool did not stop within 60 s")
    assert done.returncode == 0 and done.stdout.split() == ["stopped"] * 3, done.stderr
    assert "leaked" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "a, kwargs",
    [
        (np.ones((5, 5)), {}),  # missing batch axis
        (np.ones((1, 5, 6)), {}),  # not square
        (np.ones((1, 2, 2)), {}),  # no interior node
        (np.full((1, 5, 5), np.nan), {}),
        (np.full((1, 5, 5), np.inf), {}),
        (np.zeros((1, 5, 5)), {}),
        (-np.ones((1, 5, 5)), {}),
        (np.ones((1, 5, 5)), {"f": np.ones((1, 4, 4))}),
        (np.ones((1, 5, 5)), {"f": np.nan}),
        (np.ones((1, 5, 5)), {"workers": -1}),
        (np.ones((1, 5, 5)), {"tol": 0.0}),
    ],
)
def test_bad_input_raises_value_error(a, kwargs):
    with pytest.raises(ValueError):
        solve_darcy(a, **kwargs)


@pytest.mark.parametrize("kwargs", [{"solver": "cholesky"}, {"averaging": "geometric"}])
def test_unknown_names_raise_key_error(kwargs):
    with pytest.raises(KeyError):
        solve_darcy(np.ones((1, 5, 5)), **kwargs)


def test_one_interior_node_is_solved_exactly():
    # n = 3: the centre node only, 4 a u / h^2 = f with h = 1/2, so u = f / (16 a)
    u = solve_darcy(np.full((2, 3, 3), 5.0), f=1.0)
    np.testing.assert_allclose(u[:, 1, 1], 1.0 / 80.0, rtol=1e-12)
    assert np.count_nonzero(u[:, [0, 2], :]) == 0 and np.count_nonzero(u[:, :, [0, 2]]) == 0
