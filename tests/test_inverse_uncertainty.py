"""Inverse Darcy, how sure and how fast: the linearized solve against finite differences, the low-rank
Laplace posterior against its dense formula, the calibration measures, the discrepancy stop, the
iterate trace, and many observations in resumable chunks on worker processes (killed and resumed).

float64 on tiny grids (7-33 nodes).
"""
import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch

from petrov.cli import main as cli_main
from petrov.datasets import average_pool, generate_dataset, solve_darcy
from petrov.datasets.darcy import darcy_matrix
from petrov.datasets.darcy_adjoint import coefficient_derivative
from petrov.inverse import Observations, expected_calibration_error, interval_coverage, invert, reliability
from petrov.inverse.calibration import conformal_scale
from petrov.inverse.config import inversion_config
from petrov.inverse.laplace import SmoothingPrior, linearize, low_rank_hessian, posterior_map, summarize
from petrov.inverse.methods import Operators
from petrov.inverse.pde import invert_pde, noise_norm
from petrov.inverse.runner import PARTIAL, run_chunks


def two_phase(n, seed):
    """A two-valued (3/12) coefficient on an n x n node grid, smooth enough to be recovered."""
    x, y = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    phase = np.random.default_rng(seed).uniform(0, 2 * np.pi, 2)
    return np.where(np.sin(4 * x + phase[0]) * np.cos(3 * y + phase[1]) > 0, 12.0, 3.0)


def noisy_observations(n, seeds, level=2e-3):
    a = np.stack([two_phase(n, s) for s in seeds])
    u = solve_darcy(a)
    sigma = level * np.abs(u).max()
    noise = sigma * np.random.default_rng(7).standard_normal(u.shape)
    noise[:, [0, -1], :] = noise[:, :, [0, -1]] = 0.0
    return Observations(u=u + noise, sample_ids=np.asarray(seeds), u_clean=u, a_true=a, source="test",
                        noise_std=np.full(u.shape[1:], sigma))


# --- the linearized solve and the Laplace posterior -------------------------------------------------

@pytest.mark.parametrize("averaging", ["arithmetic", "harmonic"])
def test_coefficient_derivative_is_the_matrix_derivative(averaging):
    rng = np.random.default_rng(0)
    a, u, v = rng.uniform(3, 12, (7, 7)), rng.standard_normal((7, 7)), rng.standard_normal((2, 7, 7))
    u[[0, -1], :] = u[:, [0, -1]] = 0.0
    eps = 1e-6
    for k in range(2):
        fd = ((darcy_matrix(a + eps * v[k], averaging) - darcy_matrix(a - eps * v[k], averaging))
              @ u[1:-1, 1:-1].ravel()) / (2 * eps)
        got = coefficient_derivative(a, v, u, averaging)[k]
        np.testing.assert_allclose(got[1:-1, 1:-1].ravel(), fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
        assert not got[[0, -1], :].any() and not got[:, [0, -1]].any()


def test_jacobian_products_match_finite_differences_and_are_adjoint():
    rng = np.random.default_rng(1)
    a = rng.uniform(3, 12, (9, 9))
    lin = linearize(a, np.ones((5, 5)), 1e-3, inversion_config(grid=5))
    v = rng.standard_normal((3, 9, 9))
    eps = 1e-6
    for k in range(3):
        fd = (solve_darcy((a + eps * v[k])[None]) - solve_darcy((a - eps * v[k])[None]))[0, ::2, ::2] / (2 * eps)
        np.testing.assert_allclose(lin.jvp(v[k:k + 1])[0], fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
    w = rng.standard_normal((3, 5, 5))
    w[:, [0, -1], :] = w[:, :, [0, -1]] = 0.0
    lhs = np.einsum("kij,kij->k", lin.jvp(v), w)
    rhs = np.einsum("kij,kij->k", v, lin.vjp(w))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


def test_smoothing_prior_is_the_inverse_of_the_shifted_neumann_laplacian():
    n, length = 9, 0.1
    prior = SmoothingPrior(n, length)
    dense = prior(np.eye(n * n).reshape(-1, n, n)).reshape(n * n, n * n)
    # plainly assembled: second differences with reflecting ends (a missing neighbour counts as the node)
    d2 = np.diag(np.full(n, -2.0)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    d2[0, 0] = d2[-1, -1] = -1.0
    lap = (np.kron(d2, np.eye(n)) + np.kron(np.eye(n), d2)) * (n - 1) ** 2
    np.testing.assert_allclose(dense, np.linalg.inv(np.eye(n * n) - length**2 * lap), atol=1e-12)
    np.testing.assert_allclose(dense, dense.T, atol=1e-12)
    np.testing.assert_allclose(prior(np.full((n, n), 2.5)), 2.5)  # the constant mode is not damped


def test_full_rank_posterior_is_the_dense_laplace_covariance():
    # with the rank at the number of unknowns the randomized eigendecomposition is exact, and the sample
    # map L (a = a* + L z) satisfies L L^T = (J^T Sigma^-1 J + G_pr^-1)^-1, G_pr = s^2 C^2
    rng = np.random.default_rng(2)
    n, s = 7, 2.0
    a = rng.uniform(3, 12, (n, n))
    cfg = inversion_config(grid=4, prior_length=0.15)
    lin = linearize(a, np.ones((4, 4)), 3e-3, cfg)
    prior = SmoothingPrior(n, cfg.prior_length)
    lam, vecs = low_rank_hessian(lin, prior, s, n * n, rng)
    sample_map = posterior_map(np.eye(n * n), lam, vecs, prior, s).reshape(n * n, n * n).T
    jac = lin.jvp(np.eye(n * n).reshape(-1, n, n)).reshape(n * n, -1).T  # (m^2, n^2)
    c = prior(np.eye(n * n).reshape(-1, n, n)).reshape(n * n, n * n)
    precision = jac.T @ (lin.weights.ravel()[:, None] * jac) + np.linalg.inv(s**2 * c @ c)
    np.testing.assert_allclose(sample_map @ sample_map.T, np.linalg.inv(precision), rtol=1e-6,
                               atol=1e-9 * np.abs(np.linalg.inv(precision)).max())
    assert lam[0] > lam[-1] >= 0


def test_summary_of_samples():
    cfg = inversion_config(grid=2, interval=0.5)
    answer = np.full((2, 2), 3.0)
    samples = np.stack([np.full((2, 2), v) for v in (3.0, 3.0, 12.0, 4.0)])  # cells above 7.5 in 1 of 4
    out = summarize(answer, samples, cfg)
    np.testing.assert_allclose(out["phase_probability"], 0.25)
    errors = np.sort([0.0, 0.0, 0.75, 0.25])
    np.testing.assert_allclose(out["error_interval"], np.quantile(errors, [0.25, 0.75]))
    np.testing.assert_array_equal(out["posterior_interval"], out["error_interval"])  # no calibration given
    assert out["error_median"] == pytest.approx(np.median(errors))


# --- calibration measures -------------------------------------------------------------------------

def test_expected_calibration_error_of_calibrated_and_overconfident_probabilities():
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1, 200_000)
    outcome = rng.uniform(0, 1, p.shape) < p
    assert expected_calibration_error(p, outcome) < 0.01
    sharp = np.where(p > 0.5, 1.0, 0.0)  # the same information, stated as certainty
    assert expected_calibration_error(sharp, outcome) == pytest.approx(0.25, abs=0.01)
    table = reliability(np.array([0.0, 0.05, 0.95, 1.0]), np.array([0, 1, 1, 1]), bins=10)
    assert table["count"].tolist() == [2, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert table["frequency"][0] == 0.5 and table["mean_p"][-1] == pytest.approx(0.975)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        expected_calibration_error(np.array([1.5]), np.array([1]))


def test_interval_coverage_counts_the_errors_inside():
    assert interval_coverage([0.1, 0.2, 0.5], [[0.0, 0.15], [0.2, 0.3], [0.1, 0.4]]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="shape"):
        interval_coverage([0.1], [0.0, 0.2])


def test_conformal_scale_covers_new_exchangeable_samples():
    rng = np.random.default_rng(6)
    predicted = rng.uniform(0.01, 0.1, 100_099)
    errors = predicted * rng.lognormal(0.0, 0.3, predicted.shape)  # the truth scatters around the prediction
    low, high = conformal_scale(errors[:99], predicted[:99], level=0.9)
    covered = interval_coverage(errors[99:], np.stack([low * predicted[99:], high * predicted[99:]], axis=1))
    assert 0.88 <= covered <= 0.95  # >= 0.9 in expectation over the calibration draw
    ratios = np.sort(errors[:99] / predicted[:99])
    assert (low, high) == (ratios[4], ratios[94])  # 10 of the 100 ranks outside: ranks 5 and 95
    ratios30 = np.sort(errors[:30] / predicted[:30])
    assert conformal_scale(errors[:30], predicted[:30]) == (ratios30[1], ratios30[29])  # 3 of 31 outside
    with pytest.raises(ValueError, match="at least 19"):
        conformal_scale(errors[:10], predicted[:10], level=0.9)
    cfg = inversion_config(grid=2, error_scale=(0.5, 2.0))
    out = summarize(np.full((2, 2), 3.0), np.stack([np.full((2, 2), v) for v in (3.3, 3.6, 3.9)]), cfg)
    np.testing.assert_allclose(out["error_interval"], [0.5 * out["error_median"], 2.0 * out["error_median"]])


# --- discrepancy principle and trace ---------------------------------------------------------------

def test_noise_norm_is_the_norm_of_the_protocol_noise():
    sigma = np.random.default_rng(4).uniform(0.5, 1.5, (65, 65))
    xi = np.random.default_rng(5).standard_normal((65, 65))
    realized = np.sqrt(((sigma * xi) ** 2).sum()) / 64
    assert noise_norm(sigma, 65) == pytest.approx(realized, rel=0.03)
    assert noise_norm(None, 65) == 0.0 and noise_norm(0.5, 3) == pytest.approx(0.5 * 3 / 2)


def test_discrepancy_stop_is_the_first_iterate_within_the_noise_level():
    obs = noisy_observations(17, [0])
    cfg = inversion_config(grid=5, pde_grid=17, reg_weight=1e-7, max_iter=300, stop="discrepancy",
                           discrepancy=1.5)
    _, info = invert_pde(obs.u, cfg, noise_std=obs.noise_std, progress=False)
    i = info[0]
    assert i["message"] == "discrepancy reached" and i["iterations"] < 300
    assert i["misfit_target"] == pytest.approx(1.5 * noise_norm(obs.noise_std, 17))
    assert i["misfit"] <= i["misfit_target"]
    # one iteration less (the same deterministic path) is still outside
    _, before = invert_pde(obs.u, inversion_config(cfg, stop="iterations", max_iter=i["iterations"] - 1),
                           noise_std=obs.noise_std, progress=False)
    assert before[0]["misfit"] > i["misfit_target"]


def test_trace_records_the_iterates_and_ends_at_the_answer():
    obs = noisy_observations(17, [1])
    cfg = inversion_config(grid=5, pde_grid=17, reg_weight=1e-7, max_iter=25, snap=2.0)
    a, info = invert_pde(obs.u, cfg, trace=True, progress=False)
    trace = info[0]["trace"]
    assert trace["iteration"][0] == 0 and trace["iteration"][-1] == info[0]["iterations"]
    assert trace["a"].shape == (len(trace["iteration"]), 5, 5)
    np.testing.assert_array_equal(trace["a"][-1], a[0])
    np.testing.assert_allclose(trace["a"][0], 7.5)  # the constant start
    assert np.all(np.diff(trace["cpu_seconds"]) >= 0) and trace["misfit"][-1] < trace["misfit"][0]


# --- the API: refined, uncertainty, chunks --------------------------------------------------------

@pytest.mark.filterwarnings("ignore:.*no two-valued cell")
def test_uncertainty_is_written_and_drawn(tmp_path):
    obs = noisy_observations(17, [2, 3])
    result = invert(obs, "pde", settings={"grid": 5, "pde_grid": 17, "max_iter": 40, "snap": 2.0,
                                          "posterior_rank": 20, "posterior_samples": 50},
                    uncertainty=True, out_dir=tmp_path / "out")
    assert result.phase_probability.shape == (2, 5, 5) and result.error_interval.shape == (2, 2)
    assert ((result.phase_probability >= 0) & (result.phase_probability <= 1)).all()
    assert (result.error_interval[:, 0] <= result.error_interval[:, 1]).all()
    summary = result.summary()
    assert 0 <= summary["coverage"] <= 1 and 0 <= summary["phase_ece"] <= 1
    with h5py.File(tmp_path / "out" / "coefficients.h5") as h5:
        np.testing.assert_array_equal(h5["phase_probability"][()], result.phase_probability)
        np.testing.assert_array_equal(h5["error_interval"][()], result.error_interval)
        assert h5.attrs["interval"] == 0.9
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert {"error_low", "error_high", "error_median"} <= set(saved["samples"][0])
    assert (tmp_path / "out" / "inversion.png").stat().st_size > 0
    assert not (tmp_path / "out" / PARTIAL).exists()  # the finished chunks are removed at the end
    # the same sample gives the same summary whatever its batch (seeded by its number)
    alone = invert(Observations(**{**obs.__dict__, "u": obs.u[1:], "sample_ids": obs.sample_ids[1:],
                                   "u_clean": obs.u_clean[1:], "a_true": obs.a_true[1:]}), "pde",
                   settings=result.config, uncertainty=True)
    np.testing.assert_array_equal(alone.phase_probability[0], result.phase_probability[1])


def test_uncertainty_requests_that_cannot_be_served_are_clear_errors():
    obs = noisy_observations(17, [2])
    with pytest.raises(ValueError, match=r"solve grid \(17 nodes per side; it is on 5\): set pde_grid=17 \(petrov"):
        invert(obs, "pde", settings={"grid": 5, "max_iter": 2}, uncertainty=True)
    with pytest.raises(ValueError, match="needs a trained inverse operator"):
        invert(obs, "refined", settings={"grid": 5})
    with pytest.raises(ValueError, match="interval"):
        inversion_config(interval=1.0)


class ConstantInverse(torch.nn.Module):
    """A stand-in inverse operator: the same coarse field for every input (plus a trainable zero)."""

    def __init__(self, field):
        super().__init__()
        self.field = torch.as_tensor(field, dtype=torch.float64)
        self.zero = torch.nn.Parameter(torch.zeros((), dtype=torch.float64))

    def forward(self, x, pos=None):
        return (self.field + self.zero).expand(x.shape[0], *self.field.shape)[..., None]


def test_refined_starts_from_the_learned_answer_and_stops_at_the_noise_level():
    obs = noisy_observations(17, [4])
    start = average_pool(obs.a_true, 5)[0]  # a learned answer that happens to be the pooled truth
    settings = {"grid": 5, "pde_grid": 17, "reg_weight": 1e-7, "max_iter": 300, "discrepancy": 1.5}
    refined = invert(obs, "refined", inverse_run=ConstantInverse(start), settings=settings)
    cold = invert(obs, "pde", settings={**settings, "stop": "discrepancy"})
    assert refined.info[0]["message"] == "discrepancy reached"
    assert refined.info[0]["iterations"] < cold.info[0]["iterations"]


def test_chunks_resume_only_the_same_request(tmp_path, monkeypatch):
    obs = noisy_observations(9, [5, 6, 7])
    cfg = inversion_config(grid=5, pde_grid=9, max_iter=10)
    args = ("pde", obs.u, obs.sample_ids, cfg, Operators())
    a, _ = run_chunks(*args, chunk_size=2, out_dir=tmp_path, progress=False)
    assert sorted(p.name for p in (tmp_path / PARTIAL).glob("chunk-*")) == ["chunk-000000.npz", "chunk-000001.npz"]
    import petrov.inverse.runner as runner

    def no_work(*_, **__):
        raise AssertionError("a finished chunk was computed again")

    monkeypatch.setattr(runner, "invert_samples", no_work)
    again, info = run_chunks(*args, chunk_size=2, out_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again, a)
    assert len(info) == 3
    with pytest.raises(ValueError, match="another request.*settings"):
        run_chunks("pde", obs.u, obs.sample_ids, inversion_config(cfg, max_iter=11), Operators(), chunk_size=2,
                   out_dir=tmp_path, progress=False)


def _chunks_done(out):
    return len(list((out / PARTIAL).glob("chunk-*.npz"))) if (out / PARTIAL).is_dir() else 0


@pytest.mark.slow  # three runs that each start two worker processes: ~30 s on an idle machine
def test_a_killed_run_resumes_to_the_answers_of_an_uninterrupted_one(tmp_path):
    data = tmp_path / "darcy-17.h5"
    generate_dataset("darcy", data, 12, resolution=17, seed=3, progress=False)
    base = [str(data), "--method", "pde", "--indices", "0:12", "--grid", "5", "--noise", "0.01",
            "--set", "pde_grid=17", "--set", "max_iter=60", "--set", "snap=2.0", "--set", "posterior_rank=10",
            "--set", "posterior_samples=20", "--uncertainty", "--workers", "2", "--chunk-size", "2",
            "--no-plots", "--no-progress"]
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "petrov", "invert", *base, "--out", str(killed)],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _chunks_done(killed) < 1:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "no chunk finished within 2 minutes"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = _chunks_done(killed)
    assert 1 <= done < 6 and not (killed / "coefficients.h5").exists()
    assert cli_main(["invert", *base, "--out", str(killed)]) == 0  # the same command continues
    whole = tmp_path / "whole"
    assert cli_main(["invert", *base, "--out", str(whole)]) == 0
    with h5py.File(killed / "coefficients.h5") as h1, h5py.File(whole / "coefficients.h5") as h2:
        for key in ("a", "phase_probability", "error_interval", "sample_ids"):
            np.testing.assert_array_equal(h1[key][()], h2[key][()])
    assert not (killed / PARTIAL).exists()
