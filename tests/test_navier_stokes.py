"""2-D Navier-Stokes on the torus: the solver against exact solutions, a direct nonlinear term and refined
solves; the ``navier-stokes`` recipe's files (layout, shards, resume, loading, the CLI) and its refusals."""
import math

import h5py
import numpy as np
import pytest
import torch

from petrov.cli import main
from petrov.datasets import fit_normalizer, generate_dataset, merge_shards, open_dataset
from petrov.datasets.grf import periodic_grf_2d, periodic_grf_2d_std
from petrov.datasets.hdf5_files import partial_path
from petrov.datasets.navier_stokes import (
    _Grid,
    band,
    estimate_steps,
    forcing_field,
    from_solve_grid,
    one_thread,
    solve_navier_stokes,
    solve_samples,
    to_solve_grid,
)

N = 16  # tiny stored grid of the files
SMALL = dict(nu=1e-3, t=1.0, time_steps=2)


def grid(n):
    x = np.arange(n) / n
    return x[:, None], x[None, :]


def rel_l2(a, b):
    axes = tuple(range(-2, 0))
    return np.sqrt(np.sum((a - b) ** 2, axis=axes) / np.sum(b**2, axis=axes))


# --- the random field ------------------------------------------------------------------------------


def test_grf_is_per_index_zero_mean_band_limited_with_the_stated_variance():
    n = 32
    batch = periodic_grf_2d(n, 7, [3, 1, 2])
    np.testing.assert_array_equal(batch[1], periodic_grf_2d(n, 7, [1])[0])  # sample i depends on (seed, i)
    assert np.abs(batch.mean(axis=(1, 2))).max() < 1e-15
    spec = np.fft.fft2(batch)
    assert np.abs(spec[:, n // 2, :]).max() < 1e-12 and np.abs(spec[:, :, n // 2]).max() < 1e-12
    # pointwise variance: sum_k std_k^2 / 2 (the cos and sin coefficients of a pair +-k have std std_k)
    many = periodic_grf_2d(n, 0, range(400))
    expected = np.sum(periodic_grf_2d_std(n) ** 2) / 2
    assert abs(many.var() / expected - 1) < 0.05
    # FNO's default amplitude: sigma = tau^(alpha - 1) = 7^1.5
    np.testing.assert_allclose(periodic_grf_2d_std(8)[1, 0], math.sqrt(2) * 7**1.5 * (4 * math.pi**2 + 49) ** -1.25)


# --- the nonlinear term and the grids ----------------------------------------------------------------


def test_nonlinear_term_is_the_dealiased_advection_computed_directly():
    """Basdevant's form against u.grad(w) formed from psi on a 3x padded grid (the exact product), truncated."""
    m = 24
    g = _Grid(m, 0.0, torch.device("cpu"), torch.float64)
    w = to_solve_grid(torch.as_tensor(periodic_grf_2d(m, 1, [0, 1]) * 5), m, g.keep, g.cdtype)
    k1 = np.fft.fftfreq(m, 1 / m)[:, None]
    k2 = np.arange(band(m) + 1)[None, :]  # the solver holds k2 = 0..K (its band)
    kk = 4 * np.pi**2 * (k1**2 + k2**2)
    kk[0, 0] = np.inf
    big = 3 * m

    def on_big_grid(spec):  # spec (b, m, K+1) -> values on the big grid (exact trigonometric evaluation)
        full = np.zeros((spec.shape[0], big, big // 2 + 1), complex)
        full[:, : m // 2, : spec.shape[-1]] = spec[:, : m // 2]
        full[:, big - m // 2 :, : spec.shape[-1]] = spec[:, m // 2 :]
        return np.fft.irfft2(full, s=(big, big), norm="forward")

    ws = w.numpy()
    psi = ws / kk
    u, v = on_big_grid(2j * np.pi * k2 * psi), on_big_grid(-2j * np.pi * k1 * psi)
    wx, wy = on_big_grid(2j * np.pi * k1 * ws), on_big_grid(2j * np.pi * k2 * ws)
    adv = np.fft.rfft2(u * wx + v * wy, norm="forward")
    expected = np.zeros_like(ws)
    K = band(m)
    expected[:, : K + 1, : K + 1] = adv[:, : K + 1, : K + 1]
    expected[:, m - K :, : K + 1] = adv[:, big - K :, : K + 1]
    got = -g.nonlinear(w, torch.zeros_like(w)).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("n, m", [(16, 32), (16, 64), (32, 16), (16, 16), (32, 48), (32, 24)])
def test_grid_transfer_is_exact_for_band_limited_fields(n, m):
    x, y = grid(n)
    k = min(band(m), (n - 1) // 2)  # a field the solve grid's band holds
    field = np.cos(2 * np.pi * (k * x + 1 * y)) + 0.5 * np.sin(2 * np.pi * (2 * x - k * y)) + 0.25
    w = torch.as_tensor(field - field.mean())[None]
    g = _Grid(m, 1e-3, torch.device("cpu"), torch.float64)
    back = from_solve_grid(to_solve_grid(w, m, g.keep, g.cdtype), m, n)
    np.testing.assert_allclose(back.numpy(), w.numpy(), atol=1e-13)


# --- exact solutions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_one_shell_of_modes_decays_exactly(dtype, tol):
    """w0 in one shell |k|^2 = 25 ((3, 4), (5, 0), (0, 5), (4, -3)) is an eigenfunction of the Laplacian: u.grad(w)
    = 0 although u and grad w are not, and without forcing w(t) = w0 exp(-4 pi^2 25 nu t)."""
    n, nu = 32, 2e-3
    x, y = grid(n)
    w0 = (np.cos(2 * np.pi * (3 * x + 4 * y)) + 0.7 * np.sin(2 * np.pi * 5 * y) - 0.4 * np.cos(2 * np.pi * 5 * x)
          + 0.3 * np.sin(2 * np.pi * (4 * x - 3 * y)))[None]
    times = [0.1, 0.5, 1.0]
    got = solve_navier_stokes(torch.as_tensor(w0, dtype=dtype), nu, times, forcing=0.0, dtype=dtype).double().numpy()
    for k, t in enumerate(times):
        np.testing.assert_allclose(got[0, k], w0[0] * math.exp(-4 * math.pi**2 * 25 * nu * t), atol=tol)


def test_the_forced_mode_approaches_its_steady_state_exactly():
    """f = A (sin + cos)(2 pi (x + y)) and w0 = c f: w stays a function of x + y (u.grad(w) = 0), and
    w(t) = f / (8 pi^2 nu) + (w0 - f / (8 pi^2 nu)) exp(-8 pi^2 nu t)."""
    n, nu, amplitude = 16, 1e-2, 0.1
    f = forcing_field(n, amplitude)
    w0 = 3.0 * f[None]
    times = np.array([0.5, 2.0, 10.0])
    got = solve_navier_stokes(w0, nu, times, forcing=amplitude)
    steady = f / (8 * math.pi**2 * nu)
    for k, t in enumerate(times):
        np.testing.assert_allclose(got[0, k], steady + (w0[0] - steady) * math.exp(-8 * math.pi**2 * nu * t),
                                   atol=1e-12)


# --- refined solves --------------------------------------------------------------------------------


def test_error_against_a_solve_refined_in_space_and_time_is_small():
    """nu = 1e-3 to t = 4 on 32^2 (the stored grid's own solve, cfl 1) against 64^2 at cfl 1/4: under 2e-4
    relative (measured 7e-5 at t = 1, the error of the 2/3 band's 10 modes, falling to 1.4e-6 at t = 4); and the
    step is fourth order: halving cfl divides the time error by about 16."""
    n, nu = 32, 1e-3
    w0 = periodic_grf_2d(n, 3, range(2), modes=band(n))  # as the recipe draws it: in the solver's band
    times = [1.0, 2.0, 4.0]
    default = solve_navier_stokes(w0, nu, times)
    refined = solve_navier_stokes(w0, nu, times, solve_grid=2 * n, cfl=0.25)
    assert rel_l2(default, refined).max() < 2e-4
    fine_time = solve_navier_stokes(w0, nu, times, cfl=0.125, dt_max=1e-3)
    errors = [rel_l2(solve_navier_stokes(w0, nu, times, cfl=c, dt_max=1.0), fine_time).max() for c in (2.0, 1.0)]
    assert errors[0] / errors[1] > 8


def test_snapshots_are_at_their_times():
    """Solving to 0.3 and on from that snapshot to 1.0 gives the snapshot at 1.0 of one solve (same steps)."""
    w0 = periodic_grf_2d(N, 2, [0])
    one = solve_navier_stokes(w0, 1e-3, [0.0, 0.3, 1.0])
    np.testing.assert_array_equal(one[:, 0], w0)
    restarted = solve_navier_stokes(one[:, 1], 1e-3, [0.7])
    np.testing.assert_allclose(restarted[:, 0], one[:, 2], atol=1e-12)


def test_a_samples_result_does_not_depend_on_its_batch_bit_for_bit():
    w0 = periodic_grf_2d(N, 1, range(5)) * np.array([1, 3, 0.5, 2, 1.5])[:, None, None]  # different step counts
    times = [0.5, 1.5]
    with one_thread():
        whole = solve_navier_stokes(w0, 1e-3, times, batch_size=5)
        alone = np.concatenate([solve_navier_stokes(w0[i : i + 1], 1e-3, times) for i in range(5)])
        pairs = solve_navier_stokes(w0, 1e-3, times, batch_size=2)
    np.testing.assert_array_equal(whole, alone)
    np.testing.assert_array_equal(whole, pairs)


def test_worker_processes_give_the_same_samples():
    from petrov.common.worker_pool import worker_pool

    w0 = periodic_grf_2d(N, 4, range(4))
    here = solve_samples(w0, 1e-3, [0.0, 0.5])
    with worker_pool(2) as pool:
        there = solve_samples(w0, 1e-3, [0.0, 0.5], pool=pool)
    np.testing.assert_array_equal(here, there)


def test_cuda_solve_matches_the_cpu(device):
    w0 = torch.as_tensor(periodic_grf_2d(N, 5, range(2)))
    cpu = solve_navier_stokes(w0, 1e-3, [0.5, 1.0])
    got = solve_navier_stokes(w0.to(device), 1e-3, [0.5, 1.0])
    assert got.device.type == device.type
    torch.testing.assert_close(got.cpu(), cpu, rtol=0, atol=1e-10)


@pytest.mark.parametrize("kwargs, match", [
    (dict(nu=0.0), "viscosity nu must be positive"), (dict(nu=float("nan")), "viscosity nu"),
    (dict(nu=1e300), "at most 1e"), (dict(times=[1.0, 0.5]), "strictly increasing"),
    (dict(times=[np.inf]), "finite"), (dict(solve_grid=40), "solve_grid must be a multiple"),
])
def test_bad_solver_input_is_refused(kwargs, match):
    args = dict(nu=1e-3, times=[1.0]) | kwargs
    with pytest.raises(ValueError, match=match):
        solve_navier_stokes(periodic_grf_2d(N, 0, [0]), args.pop("nu"), args.pop("times"), **args)
    with pytest.raises(ValueError, match="NaN"):
        solve_navier_stokes(np.full((1, N, N), np.nan), 1e-3, [1.0])


# --- the recipe's files ----------------------------------------------------------------------------


def test_file_layout_and_strided_loading(tmp_path):
    path = generate_dataset("navier-stokes", tmp_path / "ns.h5", 3, N, seed=5, progress=False, **SMALL)
    with h5py.File(path, "r") as h5:
        x, y = h5["x"][...], h5["y"][...]
        assert x.shape == (3, N, N) and y.shape == (3, N, N, 3) and h5["y"].chunks == (1, N, N, 3)
        assert h5.attrs["kind"] == "navier-stokes" and h5.attrs["nu"] == 1e-3
    w0 = periodic_grf_2d(N, 5, range(3), modes=band(N))  # in the solver's band
    np.testing.assert_array_equal(x, w0.astype(np.float32))
    np.testing.assert_array_equal(y[..., 0], x)
    expected = solve_navier_stokes(w0, 1e-3, [0.5, 1.0])
    np.testing.assert_allclose(np.moveaxis(y[..., 1:], -1, 1), expected, rtol=0, atol=1e-6)
    data = open_dataset(path, resolution=N // 2, indices=[2, 0])
    assert data.x.shape == (2, N // 2, N // 2, 1) and data.y.shape == (2, N // 2, N // 2, 3)
    np.testing.assert_array_equal(data.y.numpy(), y[[2, 0], ::2, ::2])
    assert tuple(fit_normalizer(path, "y").mean.shape) == (N, N, 3)


def test_a_window_of_the_states_reads_as_fnos_benchmark_does(tmp_path):
    """FNO's nu = 1e-5 benchmark takes the states after w0: Window(history, first=1) on a 2-D trajectory file."""
    from petrov.datasets.windows import Window

    path = generate_dataset("navier-stokes", tmp_path / "ns.h5", 2, N, seed=3, progress=False, nu=1e-3, t=2.0,
                            time_steps=4)
    with h5py.File(path, "r") as h5:
        y = h5["y"][...]
    data = open_dataset(path, resolution=N // 2, window=Window(history=2, first=1))
    assert data.x.shape == (2, N // 2, N // 2, 2) and data.y.shape == (2, N // 2, N // 2, 4)
    np.testing.assert_array_equal(data.y.numpy(), y[:, ::2, ::2, 1:])
    np.testing.assert_array_equal(data.x.numpy(), y[:, ::2, ::2, 1:3])


def test_shards_merge_into_the_file_of_one_run_and_a_killed_run_resumes(tmp_path):
    whole = generate_dataset("navier-stokes", tmp_path / "whole.h5", 5, N, seed=1, progress=False, **SMALL)
    shards = [generate_dataset("navier-stokes", tmp_path / f"s{k}.h5", 5, N, seed=1, shard=(k, 2), chunk_size=1,
                               progress=False, **SMALL) for k in range(2)]
    merged = merge_shards(shards, tmp_path / "merged.h5", progress=False)

    def interrupt(done, total):
        raise KeyboardInterrupt

    resumed = tmp_path / "resumed.h5"
    with pytest.raises(KeyboardInterrupt):
        generate_dataset("navier-stokes", resumed, 5, N, seed=1, chunk_size=2, progress=False, callback=interrupt,
                         **SMALL)
    with h5py.File(partial_path(resumed), "r") as h5:
        assert h5.attrs["n_complete"] == 2
    generate_dataset("navier-stokes", resumed, 5, N, seed=1, progress=False, **SMALL)
    with h5py.File(whole, "r") as a:
        for other in (merged, resumed):
            with h5py.File(other, "r") as b:
                assert b.attrs["content_hash"] == a.attrs["content_hash"]
                np.testing.assert_array_equal(b["y"][...], a["y"][...])


def test_cli_generates_and_shows_the_file(tmp_path, capsys):
    out = tmp_path / "ns.h5"
    assert main(["generate", "navier-stokes", "--n-samples", "2", "--resolution", str(N), "--nu", "1e-3", "--t", "1",
                 "--time-steps", "2", "--precision", "float32", "-o", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    assert f"(2, {N}, {N}), (2, {N}, {N}, 3)" in capsys.readouterr().out


@pytest.mark.parametrize("option, value, named", [
    ("--nu", "0", "nu must be a finite positive number"), ("--nu", "nan", "nu must be a finite positive"),
    ("--nu", "1e200", "beyond the solver's largest"), ("--t", "-1", "t must be a finite positive"),
    ("--t", "1e6", r"takes about .* time steps per sample .* hours per sample"),
    ("--time-steps", "2000000", r"takes about 2e\+06 time steps"), ("--time-steps", "0", "time_steps must be"),
    ("--resolution", "6", "resolution must be at least 8"), ("--solve-grid", "40", "solve_grid must be a multiple"),
    ("--cfl", "3", "beyond the time stepping's stability"), ("--alpha", "1", "alpha must be > 1"),
    ("--sigma", "1e40", "overflows"), ("--forcing", "inf", "forcing must be finite"),
])
def test_bad_parameters_are_refused_in_one_line_before_any_work(tmp_path, capsys, option, value, named):
    out = tmp_path / "ns.h5"
    args = ["generate", "navier-stokes", "--n-samples", "2", "--resolution", str(N), "-o", str(out), "--no-progress"]
    assert main(args + [option, value]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert pytest.importorskip("re").search(named, err), err
    assert not out.exists() and not partial_path(out).exists()


def test_the_step_estimate_is_of_the_order_of_the_steps_taken():
    from petrov.datasets.navier_stokes import _solve_batch, speed_scale

    n, nu, t = 32, 1e-4, 5.0
    w0 = periodic_grf_2d(n, 0, range(2))
    g = _Grid(n, nu, torch.device("cpu"), torch.float64)
    f = to_solve_grid(torch.as_tensor(forcing_field(n))[None], n, g.keep, g.cdtype)
    _, taken = _solve_batch(g, to_solve_grid(torch.as_tensor(w0), n, g.keep, g.cdtype), f, [t], n, 1.0, 0.05)
    estimate = estimate_steps(t, 1, nu, speed_scale(n, 2.5, 7.0, 7.0**1.5), n, cfl=1.0)
    assert 0.5 < estimate / taken < 3
