"""Inverse Darcy: adjoint gradients against finite differences, recovery of a representable coefficient,
bounds, the surrogate's descent, metrics, the reference noise protocol, and `petrov invert` end to end.

Mathematics in float64 on tiny grids (9-17 nodes). The end-to-end tests share two 1-epoch runs on a
21-point Darcy file (an inverse galerkin2d_inverse 21 -> 6 and a forward fno2d).
"""
import json

import h5py
import numpy as np
import pytest
import torch

from petrov.datasets import PointwiseGaussianNormalizer, average_pool, generate_dataset, solve_darcy
from petrov.datasets.darcy import darcy_matrix
from petrov.datasets.darcy_adjoint import coefficient_gradient, darcy_residual, misfit_and_gradient
from petrov.operators import build_model
from petrov.inverse import invert
from petrov.train import NormalizedOperator
from petrov.cli import main as cli_main
from petrov.train.config import config_from_dict
from petrov.inverse import Observations, add_observation_noise, inversion_metrics, phase_accuracy
from petrov.inverse.config import inversion_config
from petrov.inverse.learned import invert_learned
from petrov.inverse.parametrization import prolong, snap_to_phases, total_variation
from petrov.inverse.pde import objective, output_coefficient
from petrov.inverse.surrogate import invert_surrogate
from petrov.train.trainer import train

AVERAGINGS = ["arithmetic", "harmonic"]


def central_differences(fun, x, eps=1e-6):
    grad = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = eps
        grad.flat[k] = (fun(x + e) - fun(x - e)) / (2 * eps)
    return grad


def smooth_coarse(n):
    """A smooth coefficient in (3, 12) on an n x n node grid."""
    x, y = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    return 7.5 + 3.5 * np.sin(2.5 * x + 0.5) * np.cos(2.0 * y - 0.3)


# --- solver side ----------------------------------------------------------------------------------

@pytest.mark.parametrize("averaging", AVERAGINGS)
def test_adjoint_gradient_equals_central_differences(averaging):
    rng = np.random.default_rng(1)
    a = rng.uniform(3, 12, size=(9, 9))
    u_obs = 0.02 * rng.standard_normal((5, 5))  # observed on the stride-2 sub-grid
    misfit, grad, _ = misfit_and_gradient(a, u_obs, averaging=averaging)
    fd = central_differences(lambda z: misfit_and_gradient(z, u_obs, averaging=averaging)[0], a)
    assert misfit > 0
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())


@pytest.mark.parametrize("averaging", AVERAGINGS)
def test_coefficient_gradient_is_the_derivative_of_the_bilinear_form(averaging):
    rng = np.random.default_rng(2)
    a, u, lam = rng.uniform(3, 12, (7, 7)), rng.standard_normal((7, 7)), rng.standard_normal((7, 7))
    for z in (u, lam):
        z[[0, -1], :] = z[:, [0, -1]] = 0.0
    form = lambda z: lam[1:-1, 1:-1].ravel() @ darcy_matrix(z, averaging) @ u[1:-1, 1:-1].ravel()  # noqa: E731
    np.testing.assert_allclose(coefficient_gradient(a, u, lam, averaging), central_differences(form, a),
                               rtol=1e-6, atol=1e-6)


def test_residual_vanishes_at_the_solution_only():
    a = np.random.default_rng(3).uniform(3, 12, (1, 11, 11))
    u = solve_darcy(a, 1.0)[0]
    assert np.abs(darcy_residual(a[0], u)).max() < 1e-10
    assert np.abs(darcy_residual(a[0], 1.01 * u)).max() > 1e-3


def test_misfit_gradient_rejects_bad_input():
    with pytest.raises(ValueError, match="sub-grid"):
        misfit_and_gradient(np.full((9, 9), 5.0), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="NaN"):
        misfit_and_gradient(np.full((9, 9), np.nan), np.zeros((5, 5)))
    with pytest.raises(ValueError, match="positive"):
        misfit_and_gradient(np.zeros((9, 9)), np.zeros((5, 5)))


# --- optimization ---------------------------------------------------------------------------------

@pytest.mark.parametrize("parametrization", ["box", "level-set"])
def test_full_objective_gradient_through_prolongation_and_tv(parametrization):
    cfg = inversion_config(grid=5, parametrization=parametrization, reg_weight=1e-3, averaging="harmonic")
    rng = np.random.default_rng(4)
    u_obs = solve_darcy(rng.uniform(3, 12, (1, 9, 9)))[0]
    theta = rng.uniform(4, 11, 25) if parametrization == "box" else rng.standard_normal(25)
    value, grad = objective(theta, u_obs, 9, cfg)
    fd = central_differences(lambda t: objective(t, u_obs, 9, cfg)[0], theta)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())


def test_total_variation_of_a_ramp_is_its_slope_times_the_area():
    ramp = torch.linspace(0, 2, 9, dtype=torch.float64)[:, None].expand(9, 9)[None]
    # |grad a| = 2 everywhere, delta -> 0: the cells cover [0, 1 - h]^2 ... each of area h^2
    h = 1 / 8
    assert total_variation(ramp, 1e-12).item() == pytest.approx(2 * (8 * h) ** 2)


@pytest.mark.filterwarnings("ignore:.*no two-valued cell")  # a smooth truth has no phases
def test_pde_inversion_recovers_a_smooth_coefficient_within_bounds():
    a_c = smooth_coarse(5)
    a_f = prolong(torch.from_numpy(a_c)[None], 17)
    u = solve_darcy(a_f.numpy())
    obs = Observations(u=u, sample_ids=np.array([0]), u_clean=u, a_true=a_f.numpy(), source="test")
    result = invert(obs, "pde", settings={"grid": 5, "reg_weight": 0.0, "max_iter": 300})
    assert result.a.shape == (1, 5, 5)
    assert np.abs(result.a[0] - a_c).max() / np.abs(a_c).max() < 1e-2
    assert result.metrics["misfit_clean"][0] < 1e-4


@pytest.mark.filterwarnings("ignore:.*no two-valued cell")
def test_pde_grid_recovers_on_the_solve_grid_and_pools_to_the_output_grid():
    a_f = prolong(torch.from_numpy(smooth_coarse(5))[None], 17).numpy()
    u = solve_darcy(a_f)
    obs = Observations(u=u, sample_ids=np.array([0]), u_clean=u, a_true=a_f, source="test")
    result = invert(obs, "pde", settings={"grid": 5, "pde_grid": 17, "reg_weight": 0.0, "max_iter": 400})
    assert result.a.shape == (1, 5, 5)
    # the unknown lives on the 17-point solve grid; the output is its 4 x 4 block average, as the truth's
    # (clean data identify the interior; the boundary nodes, where u = 0, only weakly)
    assert np.linalg.norm(result.a - average_pool(a_f, 5)) / np.linalg.norm(average_pool(a_f, 5)) < 1e-2
    np.testing.assert_allclose(result.a_true, average_pool(a_f, 5))
    for bad, match in ((3, "must lie between the output grid"), (33, "must lie between the output grid")):
        with pytest.raises(ValueError, match=match):
            invert(obs, "pde", settings={"grid": 5, "pde_grid": bad, "max_iter": 1})
    with pytest.raises(ValueError, match="cannot be pooled to the output grid"):
        invert(Observations(u=u, sample_ids=np.array([0]), source="test"), "pde",
               settings={"grid": 6, "pde_grid": 17, "max_iter": 1})


def test_snap_sets_values_near_a_phase_to_it_and_keeps_the_interfaces():
    a = torch.tensor([3.0, 4.9, 5.1, 7.5, 9.9, 10.1, 12.0], dtype=torch.float64)
    assert snap_to_phases(a, 3.0, 12.0, 2.0).tolist() == [3.0, 3.0, 5.1, 7.5, 9.9, 12.0, 12.0]
    assert a[1] == 4.9  # not in place
    assert snap_to_phases(a, 3.0, 12.0, 4.5).tolist() == [3.0, 3.0, 3.0, 12.0, 12.0, 12.0, 12.0]


def test_snap_removes_phase_noise_before_pooling_to_the_output_grid():
    rng = np.random.default_rng(2)
    truth = np.where(rng.standard_normal((1, 17, 17)) > 0, 12.0, 3.0)
    recovered = torch.from_numpy(np.clip(truth + rng.uniform(-1.5, 1.5, truth.shape), 3.0, 12.0))
    pooled = average_pool(truth, 5)[0]
    np.testing.assert_allclose(output_coefficient(recovered, 17, inversion_config(grid=5, snap=2.0)), pooled)
    assert np.abs(output_coefficient(recovered, 17, inversion_config(grid=5)) - pooled).max() > 0.05
    # on the output grid itself the unknown is snapped and returned as it is
    np.testing.assert_allclose(output_coefficient(recovered[:, ::4, ::4], 17, inversion_config(grid=5, snap=2.0)),
                               truth[0, ::4, ::4])
    for bad in (-0.1, 4.6, float("nan")):
        with pytest.raises(ValueError, match="snap must lie in"):
            inversion_config(grid=5, snap=bad)


def test_pde_inversion_keeps_the_bounds_on_noisy_data():
    a = np.where(np.random.default_rng(5).standard_normal((1, 13, 13)) > 0, 12.0, 3.0)
    u = solve_darcy(a)
    noisy = u + 0.05 * np.abs(u).max() * np.random.default_rng(6).standard_normal(u.shape)
    obs = Observations(u=noisy, sample_ids=np.array([0]), a_true=a, source="test")
    result = invert(obs, "pde", settings={"grid": 13, "max_iter": 60})
    assert result.a.min() >= 3.0 and result.a.max() <= 12.0
    assert 0.0 <= result.metrics["phase_accuracy"][0] <= 1.0


@pytest.mark.parametrize("parametrization", ["box", "level-set"])
def test_surrogate_objective_decreases_and_shapes_are_right(parametrization):
    torch.manual_seed(0)
    model = build_model("fno2d", width=6, modes=3, n_layers=1, proj_hidden=8)
    op = NormalizedOperator(model)
    u_obs = np.random.default_rng(7).uniform(0.0, 0.05, (3, 9, 9))
    cfg = inversion_config(grid=5, parametrization=parametrization, steps=15, lr=0.1, batch_size=2)
    a, info = invert_surrogate(op, u_obs, cfg)
    assert a.shape == (3, 5, 5) and len(info) == 3
    assert all(i["objective"] < i["objective_start"] for i in info)
    assert a.min() >= 3.0 and a.max() <= 12.0
    assert all(p.requires_grad for p in op.parameters())  # the operator is left as it was


# --- metrics and noise ----------------------------------------------------------------------------

def test_phase_accuracy_counts_only_two_valued_cells():
    truth = np.array([[[3.0, 12.0], [7.0, 12.0]]])  # 7.0: an interface cell, left out
    rec = np.array([[[4.0, 5.0], [3.0, 11.0]]])  # right, wrong, (ignored), right
    assert phase_accuracy(rec, truth)[0] == pytest.approx(2 / 3)


def test_metrics_of_the_truth_are_exact():
    a = np.where(np.random.default_rng(8).standard_normal((2, 9, 9)) > 0, 12.0, 3.0)
    u = solve_darcy(a)
    m = inversion_metrics(a, u, a_true=a, u_clean=u)
    assert np.all(m["rel_l2_a"] == 0) and np.all(m["phase_accuracy"] == 1)
    assert np.all(m["misfit_clean"] < 1e-12) and np.all(m["misfit_noisy"] < 1e-12)


def test_noise_follows_the_reference_protocol():
    rng = np.random.default_rng(9)
    u = rng.uniform(0.0, 0.05, (3, 9, 9))
    norm = PointwiseGaussianNormalizer(torch.full((9, 9, 1), 0.01), torch.full((9, 9, 1), 0.02))
    obs = Observations(u=u, sample_ids=np.array([4, 7, 11]), u_clean=u, source="test")
    noisy = add_observation_noise(obs, 0.1, norm, seed=5)
    xi = np.stack([np.random.default_rng([5, 3, i]).standard_normal((9, 9, 1)) for i in (4, 7, 11)])[..., 0]
    np.testing.assert_allclose(noisy.u, u + 0.1 * (0.02 + 1e-5) * xi, rtol=1e-6, atol=1e-9)
    # fixed per sample: the same draw whatever the batch
    one = add_observation_noise(Observations(u=u[1:2], sample_ids=np.array([7]), source="t"), 0.1, norm, 5)
    np.testing.assert_allclose(one.u[0], noisy.u[1])
    with pytest.raises(ValueError, match="noise"):
        add_observation_noise(obs, -0.1, norm)


# --- API and CLI end to end -------------------------------------------------------------------------

N_TOTAL = 24


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("inverse")
    data = root / "darcy-21.h5"
    generate_dataset("darcy-inverse", data, N_TOTAL, resolution=21, seed=2, progress=False, coarse_resolution=6)
    common = {"optim": {"epochs": 1, "batch_size": 4, "min_warmup_steps": 0},
              "run": {"device": "cpu", "progress": False}}
    split = {"path": str(data), "n_train": 12, "n_val": 4, "n_test": 8}
    inverse = config_from_dict({
        "data": {**split, "kind": "darcy-inverse", "coarse_resolution": 6, "noise": 0.01},
        "model": {"name": "galerkin2d_inverse", "options": {"coarse_size": 6, "d_model": 8, "n_layers": 1}},
        **common})
    forward = config_from_dict({
        "data": {**split, "kind": "darcy"},
        "model": {"name": "fno2d", "options": {"width": 6, "modes": 3, "n_layers": 1, "proj_hidden": 8}},
        **common})
    train(inverse, root / "inverse")
    train(forward, root / "forward")
    return root, data


def test_cli_pde_writes_coefficients_metrics_and_plots(runs, tmp_path, capsys):
    root, data = runs
    out = tmp_path / "pde"
    code = cli_main(["invert", str(data), "--method", "pde", "--indices", "20:22", "--grid", "6",
                     "--noise", "0.01", "--noise-stats", str(root / "inverse"), "--out", str(out),
                     "--set", "max_iter=20"])
    assert code == 0 and "pde: 2 sample(s)" in capsys.readouterr().out
    with h5py.File(out / "coefficients.h5") as h5:
        assert h5["a"].shape == (2, 6, 6) and h5["a_true"].shape == (2, 6, 6)
        assert h5["u_observed"].shape == (2, 21, 21) and list(h5["sample_ids"][:]) == [20, 21]
        assert h5.attrs["method"] == "pde" and h5.attrs["noise"] == 0.01
    saved = json.loads((out / "metrics.json").read_text())
    assert [s["sample"] for s in saved["samples"]] == [20, 21]
    for key in ("rel_l2_a", "phase_accuracy", "misfit_clean", "misfit_noisy", "cpu_seconds"):
        assert np.isfinite(saved["mean"][key])
    assert (out / "metrics.csv").read_text().splitlines()[0].startswith("sample,rel_l2_a,phase_accuracy")
    assert (out / "inversion.png").stat().st_size > 0
    assert not list(out.glob(".*tmp"))


def test_learned_and_surrogate_methods_see_the_same_observations(runs, tmp_path):
    root, data = runs
    common = dict(indices=slice(16, 20), noise=0.1, noise_seed=3, inverse_run=root / "inverse")
    learned = invert(data, "learned", out_dir=tmp_path / "learned", plots=False, **common)
    surrogate = invert(data, "surrogate", forward_run=root / "forward", start="learned",
                       settings={"steps": 5}, out_dir=tmp_path / "surrogate", plots=False, **common)
    assert learned.config.grid == 6 == surrogate.config.grid  # the inverse model's output grid
    np.testing.assert_array_equal(learned.observations.u, surrogate.observations.u)
    assert learned.a.shape == surrogate.a.shape == (4, 6, 6)
    # the learned method is the trained model on the protocol's noisy input
    from petrov.grids.layout import grid_coordinates
    from petrov.train import load_operator
    from petrov.datasets.noise import add_noise as add_input_noise

    inv = load_operator(root / "inverse")
    ds_u = torch.from_numpy(learned.observations.u_clean).float()[..., None]
    pos = grid_coordinates((21, 21)).expand(4, 21, 21, 2)
    with torch.no_grad():
        direct = inv.decode(inv.model(add_input_noise(inv.encode(ds_u), 0.1, 3, np.arange(16, 20)), pos))
    np.testing.assert_allclose(learned.a, direct[..., 0].double().numpy(), rtol=1e-4, atol=1e-4)


def test_the_noise_statistics_of_u_are_a_forward_runs_targets_or_an_inverse_runs_inputs(runs, tmp_path):
    # both runs fitted the point-wise statistics of u on the same training samples: one noise
    root, data = runs
    common = dict(indices=slice(20, 22), noise=0.05, noise_seed=4, inverse_run=root / "inverse", plots=False)
    by_inverse = invert(data, "learned", noise_stats=root / "inverse", out_dir=tmp_path / "i", **common)
    by_forward = invert(data, "learned", noise_stats=root / "forward", out_dir=tmp_path / "f", **common)
    np.testing.assert_allclose(by_forward.observations.u, by_inverse.observations.u, rtol=1e-6, atol=1e-9)
    assert not np.allclose(by_forward.observations.u, by_forward.observations.u_clean)


def test_array_input_and_observed_noise(runs, tmp_path):
    root, data = runs
    u = solve_darcy(np.full((2, 21, 21), 5.0))
    np.savez(tmp_path / "obs.npz", u=u)
    result = invert(tmp_path / "obs.npz", "learned", inverse_run=root / "inverse", noise="observed",
                    out_dir=tmp_path / "out", plots=True)
    assert result.a.shape == (2, 6, 6) and set(result.metrics) == {"misfit_noisy"}
    with h5py.File(tmp_path / "out" / "coefficients.h5") as h5:
        assert h5.attrs["noise"] == "observed" and "a_true" not in h5


def _cli_error(argv, capsys):
    code = cli_main(argv)
    assert code == 1  # a runtime failure: one-line message, exit status 1
    return capsys.readouterr().err


@pytest.mark.parametrize("bad, message", [
    (np.full((2, 21, 21), np.nan), "NaN"),
    (np.zeros((2, 21, 20)), "shape"),
])
def test_bad_arrays_are_clear_errors_and_write_nothing(runs, tmp_path, capsys, bad, message):
    root, _ = runs
    np.save(tmp_path / "bad.npy", bad)
    err = _cli_error(["invert", str(tmp_path / "bad.npy"), "--method", "learned", "--inverse-run",
                      str(root / "inverse"), "--out", str(tmp_path / "out")], capsys)
    assert message in err
    assert not (tmp_path / "out").exists()


def test_invalid_requests_are_clear_errors(runs, tmp_path, capsys):
    root, data = runs
    base = ["invert", str(data), "--indices", "20:21", "--out", str(tmp_path / "out")]
    assert "noise" in _cli_error(base + ["--method", "pde", "--noise", "-0.1"], capsys)
    assert "forward" in _cli_error(base + ["--method", "surrogate"], capsys)
    assert "unknown key" in _cli_error(base + ["--method", "pde", "--set", "reg_wieght=1"], capsys)
    assert "pooled" in _cli_error(base + ["--method", "pde", "--grid", "7"], capsys)
    np.save(tmp_path / "u2.npy", np.ones((1, 2, 2)))
    err = _cli_error(["invert", str(tmp_path / "u2.npy"), "--method", "learned", "--inverse-run",
                      str(root / "inverse"), "--out", str(tmp_path / "out")], capsys)
    assert "m >= 3" in err
    assert not (tmp_path / "out").exists()
    (tmp_path / "file").write_text("not a directory")
    err = _cli_error(["invert", str(data), "--indices", "20:21", "--method", "pde", "--grid", "6",
                      "--out", str(tmp_path / "file" / "out")], capsys)
    assert f"{tmp_path / 'file'}' is a file, not a folder; choose a writable location with --out" in err


def test_learned_inversion_takes_a_grid_off_its_training_data_strides(runs, tmp_path, capsys):
    # trained on 21-point data; 13 points (12 does not divide 20) reach the model through
    # interpolated normalizer statistics: a finite coefficient on the model's coarse grid
    root, _ = runs
    np.save(tmp_path / "u13.npy", solve_darcy(np.full((1, 13, 13), 5.0)))
    code = cli_main(["invert", str(tmp_path / "u13.npy"), "--method", "learned", "--inverse-run",
                     str(root / "inverse"), "--out", str(tmp_path / "out"), "--no-plots"])
    assert code == 0
    with h5py.File(tmp_path / "out" / "coefficients.h5") as f:
        a = f["a"][()]
    assert a.shape == (1, 6, 6) and np.isfinite(a).all()


def test_learned_inversion_is_clipped_to_the_coefficient_bounds():
    # an "operator" whose output leaves [3, 12] on both sides: the learned answer is projected onto
    # the admissible set, so the data-misfit solve (which needs a > 0) always runs
    class Overshoot(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(1.0))

        def forward(self, x, pos=None):
            ramp = torch.linspace(-1.0, 20.0, x.shape[1], dtype=x.dtype)
            return (self.scale * ramp)[None, :, None, None].expand(x.shape[0], -1, x.shape[2], 1)

    u = np.zeros((2, 9, 9))
    a, _ = invert_learned(Overshoot(), u, grid=9, bounds=(3.0, 12.0))
    assert a.min() == 3.0 and a.max() == 12.0
    raw = np.linspace(-1.0, 20.0, 9)
    inside = (raw > 3.0) & (raw < 12.0)
    np.testing.assert_allclose(a[0, inside, 0], raw[inside], rtol=1e-6)


def test_cli_refined_with_uncertainty_writes_probabilities_and_intervals(runs, tmp_path, capsys):
    root, data = runs
    out = tmp_path / "refined"
    code = cli_main(["invert", str(data), "--method", "refined", "--inverse-run", str(root / "inverse"),
                     "--indices", "20:22", "--noise", "0.01", "--set", "pde_grid=21", "--set", "max_iter=30",
                     "--set", "posterior_rank=10", "--set", "posterior_samples=20", "--uncertainty",
                     "--out", str(out)])
    assert code == 0 and "refined: 2 sample(s)" in capsys.readouterr().out
    with h5py.File(out / "coefficients.h5") as h5:
        assert h5["phase_probability"].shape == (2, 6, 6) and h5["error_interval"].shape == (2, 2)
        assert h5.attrs["method"] == "refined"
    saved = json.loads((out / "metrics.json").read_text())
    assert {"coverage", "phase_ece", "uncertainty_cpu_seconds"} <= set(saved["mean"])
    assert saved["settings"]["stop"] == "discrepancy"  # refined stops at the noise level
    err = _cli_error(["invert", str(data), "--method", "learned", "--inverse-run", str(root / "inverse"),
                      "--indices", "20:21", "--uncertainty", "--out", str(tmp_path / "x")], capsys)
    assert "uncertainty is computed for the methods pde, refined" in err


def test_calibrate_scales_the_intervals_with_validation_samples(runs):
    from petrov.inverse.calibration import conformal_scale

    root, data = runs
    common = dict(noise=0.01, noise_stats=root / "inverse",
                  settings={"grid": 6, "pde_grid": 21, "max_iter": 15, "posterior_rank": 8, "posterior_samples": 20})
    cal = invert(data, "pde", indices=slice(0, 19), uncertainty=True, **common)
    result = invert(data, "pde", indices=slice(20, 22), calibrate=slice(0, 19), **common)
    scale = conformal_scale(cal.metrics["rel_l2_a"], cal.metrics["error_median"], 0.9)
    assert result.config.error_scale == pytest.approx(scale)
    np.testing.assert_allclose(result.error_interval, np.outer(result.metrics["error_median"], scale))
    with pytest.raises(ValueError, match="must differ"):
        invert(data, "pde", indices=slice(18, 20), calibrate=slice(0, 19), **common)
