"""Navier–Stokes end to end: the shipped presets validate and build, a window of generated vorticity
trajectories trains each 2-D marching model through the trainer, and ``petrov evaluate`` reports the
error per predicted state and over the space-time block, and draws the states and the rollout."""
from __future__ import annotations

import json

import pytest
import torch

from petrov.cli import main as cli_main
from petrov.datasets import generate_dataset, open_dataset
from petrov.datasets.windows import Window
from petrov.operators import build_model
from petrov.train.config import config_from_dict, load_config
from petrov.train.trainer import train

TINY = {
    "marching2d": dict(d_model=8, n_layers=1, n_heads=2, latent_size=8, fine_width=4, latent_modes=2,
                       decoder_width=4, modes=3),
    "arfno2d": dict(width=4, modes=3, n_layers=2, proj_hidden=8),
    "fno3d": dict(width=4, modes=3, time_modes=2, n_layers=2, proj_hidden=8, padding=2),
    "artransolver2d": dict(d_model=8, n_layers=1, n_heads=2, n_slices=3, unified_pos=3),
}
HISTORY, STEPS = 2, 2  # states 1, 2 in; 3, 4 out (the window starts after w0, as FNO's benchmark)


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def vorticity_file(tmp_path_factory):
    """10 trajectories of the recipe at nu = 1e-3 on 32 x 32: w0 and the states at t = 0.5, 1, 1.5, 2."""
    path = tmp_path_factory.mktemp("ns") / "ns.h5"
    return generate_dataset("navier-stokes", path, 10, 32, seed=0, progress=False, nu=1e-3, t=2.0, time_steps=4)


def ns_config(path, name, mode="pushforward", **loss):
    return config_from_dict({
        "data": {"path": str(path), "train_resolution": 16, "eval_resolutions": [16, 32], "n_train": 6,
                 "n_val": 2, "n_test": 2, "normalizer": "global", "first_state": 1, "history": HISTORY},
        "model": {"name": name, "options": {**TINY[name], "history": HISTORY, "time_steps": STEPS}},
        "optim": {"epochs": 1, "batch_size": 3, "lr": 1e-3},
        "loss": {"mode": mode, "trajectory_metric": "space_time", **loss},
        "run": {"device": "cpu", "progress": False, "threads": 1},
    })


@pytest.mark.parametrize("name", ["navier-stokes-1e5", "navier-stokes-1e3", "navier-stokes-quick", "navier-stokes-gpu"])
def test_the_navier_stokes_presets_validate_and_their_model_fits_their_window(name):
    cfg = load_config(name)
    d = cfg.data
    assert cfg.data.generate.kind == "navier-stokes" and d.normalizer == "global"
    assert cfg.loss.trajectory_metric == "space_time"
    steps = cfg.data.generate.options["time_steps"] + 1 - d.first_state - d.history  # the states after the given
    assert cfg.model.options["history"] == d.history and cfg.model.options["time_steps"] == steps
    assert d.n_train + d.n_val + d.n_test <= cfg.data.generate.n_samples
    model = build_model(cfg.model.name, **cfg.model.options)
    x = torch.zeros(1, d.train_resolution, d.train_resolution, d.history)
    with torch.no_grad():
        assert model(x).shape == (1, d.train_resolution, d.train_resolution, d.history + steps)


def test_the_window_of_a_generated_file_is_states_one_to_four(vorticity_file):
    whole = open_dataset(vorticity_file, resolution=16)
    data = open_dataset(vorticity_file, resolution=16, window=Window(HISTORY, 1, None))
    x, y = data[0]
    assert x.shape == (16, 16, HISTORY) and y.shape == (16, 16, HISTORY + STEPS)
    torch.testing.assert_close(y, whole[0][1][..., 1:])
    torch.testing.assert_close(x, whole[0][1][..., 1:1 + HISTORY])


@pytest.mark.parametrize("name, mode", [("marching2d", "pushforward"), ("arfno2d", "pushforward"),
                                        ("fno3d", "rollout"), ("artransolver2d", "teacher_forcing")])
def test_each_2d_marching_model_trains_on_a_window_of_navier_stokes(tmp_path, vorticity_file, name, mode):
    result = train(ns_config(vorticity_file, name, mode), tmp_path / "run")
    assert result.epochs_completed == 1
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    rows = metrics["rows"]
    assert [r["resolution"] for r in rows] == [16, 32]
    for r in rows:
        assert r["history"] == HISTORY and len(r["per_time_mean"]) == HISTORY + STEPS
        assert r["per_time_mean"][:HISTORY] == pytest.approx([0.0] * HISTORY, abs=1e-6)  # given, not predicted
        assert 0 < r["mean"] < 10


def test_petrov_evaluate_reports_each_predicted_state_and_draws_the_rollout(tmp_path, vorticity_file, capsys):
    train(ns_config(vorticity_file, "marching2d"), tmp_path / "run")
    assert cli_main(["evaluate", str(tmp_path / "run"), "--out", str(tmp_path / "eval")]) == 0
    out = capsys.readouterr().out
    assert "rollout relative L2 of the predicted space-time block on the test samples" in out
    per_state = out[out.index("of each predicted state"):].splitlines()
    assert per_state[1].split() == ["resolution", "k=2", "k=3"] and per_state[3].split()[0] == "32"
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert "space-time" in saved["metric"]
    trained = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert trained["metric"] == saved["metric"]  # the run's test rows and evaluate's are one quantity
    for t, e in zip(trained["rows"], saved["rows"]):
        assert t["mean"] == pytest.approx(e["mean"], rel=1e-5) and len(e["per_time_mean"]) == HISTORY + STEPS
    assert {"states.png", "rollout.gif", "error_vs_time.png"} <= {p.name for p in (tmp_path / "eval").iterdir()}
