"""Burgers trajectories: snapshots from one time stepping, the ``burgers-trajectory`` recipe, storage,
resuming, strided loading, the CLI."""
import json

import h5py
import numpy as np
import pytest

from petrov.datasets import fit_normalizer, generate_dataset, open_dataset, periodic_grf_1d, solve_burgers
from petrov.datasets.burgers import snapshot_schedule, solve_burgers_trajectory, time_schedule
from petrov.datasets.hdf5_files import partial_path
from petrov.cli import main

N = 64  # tiny native grid
T = 4  # snapshot intervals in the stored files


def rel_l2(a, b):
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.mark.parametrize("times", [[0.25, 0.5, 1.0], list(np.linspace(0, 1, 21)), list(np.linspace(0, 0.1, 31))])
@pytest.mark.parametrize("dt", [0.02, 0.005])
def test_snapshot_schedule_is_the_single_schedule_cut_at_the_snapshots(times, dt):
    intervals = snapshot_schedule(times, dt)
    ends = np.cumsum([sum(step * count for step, count in interval) for interval in intervals])
    np.testing.assert_allclose(ends, times, rtol=0, atol=1e-12)
    # no step is longer than the single solve's, and the graded start is kept
    single = time_schedule(times[-1], dt)
    longest = max(step for step, _ in single)
    assert all(step <= longest * (1 + 1e-12) for interval in intervals for step, _ in interval)
    first = next(interval for interval in intervals if interval)
    assert first[0][0] == single[0][0]


def test_snapshots_are_the_solutions_at_their_times():
    u0 = periodic_grf_1d(N, 3, range(3))
    times = [0.0, 0.2, 0.35, 1.0]
    traj = solve_burgers_trajectory(u0, 0.1, times)
    assert traj.shape == (3, 4, N) and traj.dtype == u0.dtype
    np.testing.assert_array_equal(traj[:, 0], u0)  # t = 0 is u0 itself
    for k, t in enumerate(times[1:], start=1):
        assert rel_l2(traj[:, k], solve_burgers(u0, 0.1, t)).max() < 1e-6


@pytest.mark.parametrize("times, match", [([], "non-empty"), ([0.5, 0.2], "strictly increasing"),
                                          ([-0.1, 1.0], "strictly increasing"), ([0.0, np.inf], "final time")])
def test_bad_times_raise(times, match):
    with pytest.raises(ValueError, match=match):
        solve_burgers_trajectory(periodic_grf_1d(N, 0, [0]), 0.1, times)


def test_file_holds_the_snapshots_and_its_last_is_the_burgers_recipe(tmp_path):
    path = generate_dataset("burgers-trajectory", tmp_path / "t.h5", 3, N, seed=5, chunk_size=2,
                            progress=False, time_steps=T)
    plain = generate_dataset("burgers", tmp_path / "b.h5", 3, N, seed=5, progress=False)
    with h5py.File(path, "r") as h5, h5py.File(plain, "r") as ref:
        x, y, attrs = h5["x"][...], h5["y"][...], dict(h5.attrs)
        assert x.shape == (3, N) and y.shape == (3, N, T + 1) and h5["y"].chunks == (1, N, T + 1)
        np.testing.assert_array_equal(x, ref["x"][...])  # same initial conditions
        np.testing.assert_array_equal(y[..., 0], x)
        assert rel_l2(y[..., T], ref["y"][...]).max() < 1e-6  # same solution at t = 1, to solver tolerance
    assert attrs["kind"] == "burgers-trajectory" and attrs["nu"] == 0.1 and attrs["time_steps"] == T
    assert json.loads(attrs["solver_settings"])["times"] == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_interrupted_generation_resumes_to_identical_file(tmp_path):
    ref = generate_dataset("burgers-trajectory", tmp_path / "ref.h5", 5, N, seed=2, chunk_size=2,
                           progress=False, time_steps=T)
    out = tmp_path / "run.h5"

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_dataset("burgers-trajectory", out, 5, N, seed=2, chunk_size=2, progress=False,
                         time_steps=T, callback=interrupt)
    with h5py.File(partial_path(out), "r") as h5:
        assert h5.attrs["n_complete"] == 2 and np.isnan(h5["y"][2:]).all()
    generate_dataset("burgers-trajectory", out, 5, N, seed=2, progress=False, time_steps=T)
    with h5py.File(ref, "r") as a, h5py.File(out, "r") as b:
        for name in ("x", "y"):
            np.testing.assert_array_equal(b[name][...], a[name][...])


def test_strided_loading_puts_snapshots_in_channels(tmp_path):
    path = generate_dataset("burgers-trajectory", tmp_path / "t.h5", 3, N, seed=1, progress=False, time_steps=T)
    with h5py.File(path, "r") as h5:
        y_full = h5["y"][...]
    data = open_dataset(path, resolution=N // 4, indices=[2, 0])
    assert data.x.shape == (2, N // 4, 1) and data.y.shape == (2, N // 4, T + 1)
    np.testing.assert_array_equal(data.y.numpy(), y_full[[2, 0]][:, ::4])
    np.testing.assert_array_equal(data.y[..., 0], data.x[..., 0])
    normalizer = fit_normalizer(path, "y")
    assert tuple(normalizer.mean.shape) == (N, T + 1)


def test_cli_generates_a_trajectory_and_rejects_bad_time_steps(tmp_path, capsys):
    out = tmp_path / "t.h5"
    args = ["generate", "burgers-trajectory", "--n-samples", "2", "--resolution", str(N), "-o", str(out),
            "--no-progress"]
    assert main(args + ["--time-steps", "3"]) == 0
    with h5py.File(out, "r") as h5:
        assert h5["y"].shape == (2, N, 4)
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    assert "(2, 64), (2, 64, 4)" in capsys.readouterr().out
    assert main(args + ["--time-steps", "0", "--overwrite"]) == 1
    assert "time_steps must be an integer >= 1" in capsys.readouterr().err
