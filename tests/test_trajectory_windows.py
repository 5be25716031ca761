"""Windows of stored trajectories (which states are given, which predicted), and the trajectory losses and
metrics that leave the given states out: the data path (open_dataset, fit_normalizer) and the scores
written plainly in the tests."""
import numpy as np
import pytest
import torch

from petrov.datasets import generate_dataset, open_dataset
from petrov.datasets.normalizers import fit_normalizer
from petrov.datasets.windows import Window
from petrov.train.config import config_from_dict
from petrov.train.losses import (space_time_relative_l2_per_sample, trajectory_loss_per_sample,
                                 trajectory_relative_l2_per_sample)
from petrov.train.rollout import trajectory_scores

T = 6


@pytest.fixture(scope="module")
def trajectory_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("traj") / "t.h5"
    return generate_dataset("burgers-trajectory", path, 6, 32, seed=0, progress=False, time_steps=T)


def test_a_window_gives_its_first_states_as_input_and_itself_as_target():
    y = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    x, target = Window(history=3, first=1, states=5).apply(y)
    np.testing.assert_array_equal(target, y[..., 1:6])
    np.testing.assert_array_equal(x, y[..., 1:4])
    x, target = Window(history=2, first=2).apply(y)  # to the last state
    np.testing.assert_array_equal(target, y[..., 2:])
    np.testing.assert_array_equal(x, y[..., 2:4])


@pytest.mark.parametrize("window, why", [(Window(history=4, first=5), "hold 8 states"),
                                         (Window(history=2, first=0, states=9), "does not fit")])
def test_a_window_that_does_not_fit_is_refused_naming_the_states(window, why):
    with pytest.raises(ValueError, match=why):
        window.apply(np.zeros((1, 4, 8), np.float32))


@pytest.mark.parametrize("kwargs", [dict(history=0), dict(first=-1), dict(history=3, states=3), dict(history=True)])
def test_impossible_windows_are_refused(kwargs):
    with pytest.raises(ValueError, match="window"):
        Window(**kwargs)


def test_open_dataset_reads_the_window_of_a_trajectory_file(trajectory_file):
    whole = open_dataset(trajectory_file, resolution=16)
    win = open_dataset(trajectory_file, resolution=16, window=Window(history=2, first=1, states=4))
    torch.testing.assert_close(win.y, whole.y[..., 1:5], rtol=0, atol=0)
    torch.testing.assert_close(win.x, whole.y[..., 1:3], rtol=0, atol=0)
    lazy = open_dataset(trajectory_file, resolution=16, window=Window(history=2, first=1, states=4), lazy=True)
    x, y = lazy[3]
    torch.testing.assert_close(y, win.y[3], rtol=0, atol=0)
    torch.testing.assert_close(x, win.x[3], rtol=0, atol=0)
    with pytest.raises(ValueError, match="does not fit"):
        open_dataset(trajectory_file, window=Window(history=6, first=2))


def test_a_window_of_a_file_without_trajectories_is_refused(tmp_path):
    path = generate_dataset("burgers", tmp_path / "b.h5", 3, 16, seed=0, progress=False)
    with pytest.raises(ValueError, match="not trajectories"):
        open_dataset(path, window=Window(history=1, first=1))


def test_normalizers_of_a_window_are_its_statistics(trajectory_file):
    window = Window(history=2, first=1, states=4)
    data = open_dataset(trajectory_file, indices=slice(0, 5), window=window)
    y = fit_normalizer(trajectory_file, "y", range(5), window=window)
    x = fit_normalizer(trajectory_file, "x", range(5), window=window)
    torch.testing.assert_close(y.mean, data.y.double().mean(0).float())
    torch.testing.assert_close(y.std, data.y.double().std(0).float())
    torch.testing.assert_close(x.mean, y.mean[..., :2])
    torch.testing.assert_close(y.first_channels(2).std, x.std)
    flat = fit_normalizer(trajectory_file, "y", range(5), window=window, pointwise=False)
    assert flat.mean.dim() == 0 and flat.first_channels(2) is flat
    torch.testing.assert_close(flat.mean.double(), data.y.double().mean(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(flat.std.double(), data.y.double().std(), rtol=1e-6, atol=1e-7)


def _rel(p, y):
    return torch.sqrt(((p - y) ** 2).sum()) / torch.sqrt((y ** 2).sum())


def test_trajectory_scores_leave_the_given_states_out():
    torch.manual_seed(0)
    h, b = 3, 2
    y = torch.randn(b, 5, 4, h + 4, dtype=torch.float64)
    pred = y + 0.1 * torch.randn_like(y)
    per_state = [[float(_rel(pred[i, ..., k], y[i, ..., k])) for k in range(h, h + 4)] for i in range(b)]
    block = [float(_rel(pred[i, ..., h:], y[i, ..., h:])) for i in range(b)]
    torch.testing.assert_close(trajectory_relative_l2_per_sample(pred, y, history=h),
                               torch.tensor(per_state, dtype=torch.float64).mean(1))
    torch.testing.assert_close(space_time_relative_l2_per_sample(pred, y, history=h),
                               torch.tensor(block, dtype=torch.float64))
    scores = trajectory_scores(pred, y, history=h, metric="space_time")
    assert scores.shape == (b, 1 + h + 4)
    torch.testing.assert_close(scores[:, 0], torch.tensor(block, dtype=torch.float64))
    torch.testing.assert_close(scores[:, 1 + h:], torch.tensor(per_state, dtype=torch.float64))
    # what the given states hold does not count
    wrong = pred.clone()
    wrong[..., :h] += 5.0
    for score in (trajectory_relative_l2_per_sample, space_time_relative_l2_per_sample):
        torch.testing.assert_close(score(wrong, y, history=h), score(pred, y, history=h))
    torch.testing.assert_close(trajectory_loss_per_sample(wrong, y, 0.1, True, history=h),
                               trajectory_loss_per_sample(pred, y, 0.1, True, history=h))


def _config(path, **data):
    return {"data": {"path": str(path), "n_train": 2, "n_val": 1, "n_test": 1, **data},
            "model": {"name": "arfno1d", "options": {"time_steps": 3}},
            "loss": {"mode": "pushforward"}, "run": {"device": "cpu"}}


@pytest.mark.parametrize("data, message", [
    ({"history": 0}, r"data.history must be an integer >= 1"),
    ({"first_state": -1}, r"data.first_state must be an integer >= 0"),
    ({"history": 3, "states": 3}, r"data.states = 3 leaves no state to predict"),
])
def test_config_refuses_impossible_windows(trajectory_file, data, message):
    with pytest.raises(ValueError, match=message):
        config_from_dict(_config(trajectory_file, **data))


def test_config_refuses_a_window_for_a_direct_mode(trajectory_file):
    raw = _config(trajectory_file, first_state=1)
    raw["loss"] = {"mode": "direct"}
    raw["model"] = {"name": "fno1d", "options": {}}
    with pytest.raises(ValueError, match="window of a trajectory"):
        config_from_dict(raw)
