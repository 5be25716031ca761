"""Figures of 2-D rollouts: the states figure and the rollout GIF are written whole, one frame per state."""
import numpy as np
import pytest
from PIL import Image

from petrov.evaluate.state_plots import animate_rollout, plot_states


def _trajectories(k=2, n=12, states=6, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((k, n, n, states))
    return y, y + 0.1 * rng.standard_normal(y.shape)


def test_the_states_figure_is_written_as_png_and_pdf(tmp_path):
    y, p = _trajectories()
    path = plot_states(y, p, tmp_path / "states.png", history=2, sample_ids=[7, 9], labels=["first", "worst"])
    assert path.is_file() and path.with_suffix(".pdf").is_file()
    assert Image.open(path).size[0] > 1000


def test_the_rollout_gif_has_a_frame_per_state(tmp_path):
    y, p = _trajectories(k=1, states=5)
    path = animate_rollout(y[0], p[0], tmp_path / "rollout.gif", history=2, sample_id=3)
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == 5
    assert [f.name for f in tmp_path.iterdir()] == ["rollout.gif"]  # no temporary file left


@pytest.mark.parametrize("history", [0, 6])
def test_a_history_that_leaves_nothing_predicted_is_refused(tmp_path, history):
    y, p = _trajectories()
    with pytest.raises(ValueError, match="no predicted state"):
        plot_states(y, p, tmp_path / "s.png", history=history)


def test_shapes_that_differ_are_refused(tmp_path):
    y, p = _trajectories()
    with pytest.raises(ValueError, match="one shape"):
        plot_states(y, p[..., :-1], tmp_path / "s.png", history=2)
    with pytest.raises(ValueError, match="one sample"):
        animate_rollout(y, p, tmp_path / "r.gif", history=2)
