"""Evaluation of time series of several fields per state (channels state-major: ``s * F + f`` is field f of state
s) on rectangular grids: the metrics per field against plain references, the table's per-field lines, the
figures per field at the domain's aspect ratio, and resolution pairs ``[n_x, n_y]`` in configs and tables."""
import copy
import csv

import numpy as np
import pytest
import torch
from PIL import Image

from petrov.datasets import generate_dataset
from petrov.evaluate import evaluation, figure_style
from petrov.evaluate.curve_plots import plot_error_vs_resolution, plot_error_vs_time
from petrov.evaluate.evaluation import dataset_fields, evaluate_resolutions
from petrov.evaluate.field_plots import plot_spacetime
from petrov.evaluate.reports import format_table
from petrov.evaluate.resolutions import parse_resolutions, resolution_label
from petrov.evaluate.runs import as_setup
from petrov.evaluate.state_plots import animate_rollout, field_scale, plot_states
from petrov.operators import build_model
from petrov.train.config import config_from_dict
from petrov.train.metrics import field_trajectory_scores, per_time_row, resolution_row, write_metrics
from petrov.train.rollout import trajectory_scores

F, S, H = 3, 5, 2  # fields, states, given states
NAMES = ["Vx", "density", "pressure"]


def trajectories(b=4, grid=(6, 4), states=S, fields=F, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(b, *grid, states * fields, generator=g, dtype=torch.float64)
    y = y * torch.tensor([1.0, 20.0, 0.1]).repeat(states)[: states * fields] if fields == F else y
    return y, y + 0.05 * torch.randn(y.shape, generator=g, dtype=torch.float64) * y.abs().mean()


def plain_rel(p: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(((p - y) ** 2).sum()) / np.sqrt((y**2).sum()))


@pytest.mark.parametrize("metric", ["state_mean", "space_time"])
def test_one_field_scores_exactly_as_a_single_field(metric):
    y, p = trajectories(fields=1)
    ours = field_trajectory_scores(p, y, fields=1, history=H, metric=metric)
    assert torch.equal(ours, trajectory_scores(p, y, history=H, metric=metric))
    row_named, row = per_time_row(64, ours, history=H, fields=["u"]), per_time_row(64, ours, history=H)
    assert row_named == row and "fields" not in row


@pytest.mark.parametrize("metric", ["state_mean", "space_time"])
def test_scores_per_field_match_plain_references(metric):
    y, p = trajectories()
    scores = field_trajectory_scores(p, y, fields=F, history=H, metric=metric)
    assert scores.shape == (4, 1 + F + S + S * F)
    yn, pn = y.numpy().reshape(4, 6, 4, S, F), p.numpy().reshape(4, 6, 4, S, F)
    for b in range(4):
        if metric == "space_time":  # the whole predicted block, all fields together
            overall = plain_rel(pn[b, ..., H:, :], yn[b, ..., H:, :])
        else:  # the mean over predicted (state, field) channels of their relative L2
            overall = np.mean([plain_rel(pn[b, ..., s, f], yn[b, ..., s, f]) for s in range(H, S) for f in range(F)])
        assert scores[b, 0].item() == pytest.approx(overall, rel=1e-12)
        for f in range(F):  # field f over its predicted space-time block
            assert scores[b, 1 + f].item() == pytest.approx(plain_rel(pn[b, ..., H:, f], yn[b, ..., H:, f]), rel=1e-12)
        for s in range(S):
            assert scores[b, 1 + F + s].item() == pytest.approx(plain_rel(pn[b, ..., s, :], yn[b, ..., s, :]), rel=1e-12)
            for f in range(F):
                assert scores[b, 1 + F + S + s * F + f].item() == pytest.approx(
                    plain_rel(pn[b, ..., s, f], yn[b, ..., s, f]), rel=1e-12)


def test_the_row_of_several_fields():
    y, p = trajectories()
    scores = field_trajectory_scores(p, y, fields=F, history=H, metric="space_time")
    row = per_time_row([16, 48], scores, keep_samples=True, history=H, fields=NAMES)
    assert row["resolution"] == [16, 48] and row["fields"] == NAMES and row["history"] == H
    torch.testing.assert_close(torch.tensor(row["field_mean"], dtype=torch.float64), scores[:, 1:1 + F].mean(0))
    assert len(row["per_time_mean"]) == S and len(row["per_time_field_mean"]) == S
    torch.testing.assert_close(torch.tensor(row["per_time_field_mean"], dtype=torch.float64),
                               scores[:, 1 + F + S:].view(4, S, F).mean(0))
    assert row["per_sample"] == scores[:, 0].tolist()
    with pytest.raises(ValueError, match="not those of 4 fields"):
        per_time_row(16, scores, history=H, fields=["a", "b", "c", "d"])


def test_a_channel_count_not_divisible_by_the_fields_is_refused():
    y, p = trajectories(fields=1)
    with pytest.raises(ValueError, match="2 field.s. per state has a multiple of 2 channels, got 5"):
        field_trajectory_scores(p, y, fields=2)


def rows_of_fields(resolutions=(32, [16, 48])):
    rows = []
    for k, res in enumerate(resolutions):
        y, p = trajectories(seed=k)
        rows.append(per_time_row(res, field_trajectory_scores(p, y, fields=F, history=H), history=H, fields=NAMES))
    return rows


def test_the_table_adds_lines_per_field_and_labels_pairs():
    rows = rows_of_fields()
    text = format_table(rows, train_resolution=[16, 48])
    lines = text.splitlines()
    assert any(line.strip().startswith("16x48*") for line in lines) and "* training resolution" in lines
    assert "relative L2 of each field over the predicted space-time block" in lines
    split = lines.index("mean relative L2 of each field at each predicted state k")
    block, per_state = lines[:split], lines[split + 2:]
    assert per_state[0].split()[:2] == ["32", "Vx"] and len(per_state) == len(rows) * F
    for name in NAMES:  # a block line and a per-state line (S - H states) per resolution
        assert len([line for line in block if line.split()[1:2] == [name]]) == len(rows)
        assert [len(line.split()) for line in per_state if line.split()[1] == name] == [2 + S - H] * len(rows)
    f = NAMES.index("density")
    assert f"{rows[1]['field_mean'][f]:.4e}" in text


def test_one_field_prints_no_field_lines():
    y, p = trajectories(fields=1)
    row = per_time_row(64, field_trajectory_scores(p, y, fields=1, history=H), history=H, fields=["u"])
    text = format_table([row], train_resolution=64)
    assert "field" not in text and text == format_table([per_time_row(64, trajectory_scores(p, y, history=H),
                                                                     history=H)], train_resolution=64)


def test_metrics_files_name_a_pair_as_in_tables(tmp_path):
    y, p = trajectories(fields=1)
    rows = [resolution_row((16, 48), torch.tensor([0.1, 0.2])), resolution_row(32, torch.tensor([0.3, 0.1]))]
    csv_path, _ = write_metrics(rows, tmp_path)
    with open(csv_path) as fh:
        assert [r["resolution"] for r in csv.DictReader(fh)] == ["16x48", "32"]
    assert rows[0]["resolution"] == [16, 48]


def test_resolution_pairs_are_parsed_and_labelled():
    assert parse_resolutions("16x48, 32,16X48") == [(16, 48), 32]
    assert parse_resolutions([[16, 48], 64]) == [(16, 48), 64]
    assert resolution_label([16, 48]) == "16x48" and resolution_label(64) == "64"
    with pytest.raises(ValueError, match="not a grid size"):
        parse_resolutions("16x0")
    with pytest.raises(ValueError, match="not a mix"):
        parse_resolutions("16x48,level0")


BASE = {"data": {"path": "x.h5"}, "model": {"name": "marching2d"}, "optim": {}, "loss": {"mode": "pushforward"},
        "run": {}}


def config(**data):
    raw = copy.deepcopy(BASE)
    raw["data"].update(data)
    return config_from_dict(raw, check_model=False)


def test_the_config_takes_resolution_pairs():
    cfg = config(train_resolution=[16, 48], eval_resolutions=[32, [16, 48], [8, 24]])
    assert cfg.data.train_resolution == [16, 48] and cfg.data.eval_resolutions == [32, [16, 48], [8, 24]]
    assert config(train_resolution=64).data.train_resolution == 64


@pytest.mark.parametrize("key, value, match", [
    ("train_resolution", [16], r"data.train_resolution must be .* or a pair \[n_x, n_y\]"),
    ("train_resolution", [16, 48, 2], r"data.train_resolution must be"),
    ("train_resolution", [0, 48], r"data.train_resolution must be"),
    ("train_resolution", -4, r"data.train_resolution must be"),
    ("eval_resolutions", [32, [16, -48]], r"data.eval_resolutions\[1\] must be"),
    ("train_resolution", "16x48", r"data.train_resolution: expected int or list"),
    ("train_resolution", [16.5, 48], r"data.train_resolution: expected int or list"),
])
def test_a_wrong_resolution_is_one_clear_error(key, value, match):
    with pytest.raises(ValueError, match=match):
        config(**{key: value})


def test_a_pair_for_generated_square_data_is_refused():
    with pytest.raises(ValueError, match="rectangular grid, but data.generate makes square"):
        config(train_resolution=[16, 48], n_train=8, n_val=2, n_test=2,
               generate={"kind": "navier-stokes", "n_samples": 12, "resolution": 16})


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions make, laid out, kept in place of being saved (saving is tested once)."""
    seen = []

    def keep(fig, path, **kwargs):
        fig.canvas.draw()
        seen.append(fig)
        return path

    monkeypatch.setattr(figure_style, "save_figure", keep)
    return seen


def test_states_per_field_keep_the_domain_aspect(tmp_path, drawn):
    """16 x 48 points on [0, 1] x [0, 3]: x across, y up, every panel three times as tall as wide."""
    y, p = trajectories(b=2, grid=(16, 48))
    extent = (0.0, 1.0, 0.0, 3.0)
    plot_states(y, p, tmp_path / "states.png", history=H, fields=NAMES, extent=extent, sample_ids=[3, 8])
    fields = [ax for ax in drawn[0].axes if ax.images]
    assert len(fields) == 2 * F * 6  # samples x fields rows, 6 panels each
    for ax in fields:
        assert ax.images[0].get_extent() == pytest.approx(list(extent))
        assert ax.get_aspect() == 1.0  # equal data units: the domain's shape
        box = ax.get_window_extent()
        assert box.height / box.width == pytest.approx(3.0, rel=0.02)
        assert ax.images[0].get_array().shape == (48, 16)  # drawn transposed: y up the rows


def test_states_share_a_scale_per_field_and_diverge_for_signed_ones(tmp_path, drawn):
    y, p = trajectories(b=1, grid=(8, 8))
    y[..., 1::F] = y[..., 1::F].abs() + 1.0  # density: positive
    plot_states(y, p, tmp_path / "s.png", history=H, fields=NAMES)
    panels = [ax for ax in drawn[0].axes if ax.images]
    for f, name in enumerate(NAMES):
        truth, pred = panels[6 * f].images[0], panels[6 * f + 1].images[0]
        assert truth.get_clim() == pred.get_clim()  # truth and prediction on one scale
        cmap, lo, hi = field_scale(y[0, ..., H * F + f::F].numpy())
        assert truth.get_clim() == pytest.approx((lo, hi)) and truth.get_cmap().name == cmap
        err = panels[6 * f + 2].images[0].get_clim()
        assert err[0] == pytest.approx(-err[1])  # the difference centred on 0
    assert panels[0].images[0].get_cmap().name == "RdBu_r"  # Vx takes both signs
    assert panels[6].images[0].get_cmap().name == "viridis"  # density does not


def test_the_wide_domain_is_drawn_wide(tmp_path, drawn):
    y, p = trajectories(b=1, grid=(48, 16), fields=1)
    plot_states(y, p, tmp_path / "s.png", history=H, extent=(0.0, 3.0, 0.0, 1.0))
    box = [ax for ax in drawn[0].axes if ax.images][0].get_window_extent()
    assert box.width / box.height == pytest.approx(3.0, rel=0.02)


def test_the_states_figure_of_several_fields_is_written(tmp_path):
    y, p = trajectories(b=1, grid=(6, 12), fields=2)
    path = plot_states(y, p, tmp_path / "states.png", history=H, fields=["u", "v"], extent=(0, 1, 0, 2))
    assert path.is_file() and path.with_suffix(".pdf").is_file()


def test_the_rollout_gif_has_a_row_per_field(tmp_path):
    y, p = trajectories(b=1, grid=(8, 24))
    path = animate_rollout(y[0], p[0], tmp_path / "rollout.gif", history=H, fields=NAMES, extent=(0, 1, 0, 3))
    with Image.open(path) as gif:
        assert gif.n_frames == S and gif.size[1] > gif.size[0]  # three rows of tall panels


def test_error_vs_time_draws_a_panel_per_field(tmp_path, drawn):
    rows = rows_of_fields()
    plot_error_vs_time(rows, tmp_path / "error_vs_time.png")
    panels = [ax for ax in drawn[0].axes if ax.lines]
    assert [ax.get_title() for ax in panels] == NAMES
    for f, ax in enumerate(panels):
        lines = {line.get_label(): line.get_ydata() for line in ax.lines}
        assert set(lines) == {"32 grid points", "16x48 grid points"}
        expected = [state[f] for state in rows[1]["per_time_field_mean"][H:]]
        np.testing.assert_allclose(lines["16x48 grid points"], expected)


def test_error_vs_resolution_places_a_pair_at_its_geometric_mean(tmp_path, drawn):
    rows = [resolution_row(r, torch.tensor([0.1, 0.2, 0.3])) for r in ((16, 48), 64, (32, 96))]
    plot_error_vs_resolution(rows, tmp_path / "e.png", train_resolution=[16, 48])
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16x48", "32x96", "64"]
    np.testing.assert_allclose(ax.get_xticks(), [np.sqrt(16 * 48), np.sqrt(32 * 96), 64])


def test_spacetime_per_field(tmp_path, drawn):
    y = np.random.default_rng(0).standard_normal((2, 16, S * 2))
    plot_spacetime(y, y * 1.01, tmp_path / "s.png", fields=["u", "v"], n=2)
    titles = [ax.get_title() for ax in drawn[0].axes if ax.images]
    assert sum("truth v(x, t)" in t for t in titles) == 2 and len(titles) == 2 * 2 * 3


def test_the_fields_of_opened_data():
    class Opened:
        fields = ["Vx", "Vy"]

    class Old:
        attrs = {"fields": '["density"]'}

    assert dataset_fields(Opened()) == ["Vx", "Vy"] and dataset_fields(Old()) == ["density"]
    assert dataset_fields(object()) == []


@pytest.fixture(scope="module")
def vorticity_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ns") / "ns.h5"
    return generate_dataset("navier-stokes", path, 4, 16, seed=0, progress=False, nu=1e-3, t=2.0, time_steps=4)


def marching_setup(path, fields, history, time_steps):
    cfg = config_from_dict({
        "data": {"path": str(path), "n_train": 1, "n_val": 1, "n_test": 2, "first_state": 1, "history": history},
        "model": {"name": "marching2d", "options": dict(d_model=8, n_layers=1, n_heads=2, latent_size=8, fine_width=4,
                                                        latent_modes=2, decoder_width=4, modes=3, history=history,
                                                        time_steps=time_steps, fields=fields)},
        "optim": {}, "loss": {"mode": "pushforward", "trajectory_metric": "space_time"}, "run": {"device": "cpu"}})
    return as_setup(build_model("marching2d", **cfg.model.options), cfg, "cpu")


@pytest.mark.filterwarnings("ignore:.*belong to the run's training")  # every sample of the tiny file: all of them
def test_evaluate_resolutions_scores_each_field(vorticity_file, monkeypatch):
    """The window's 4 states read as 2 states of 2 fields (a stand-in for the loader of several fields, which
    names them and gives the first state's fields as x): a marching model of 2 fields, one row per resolution
    with the fields' errors; a model of another number of fields is one clear error."""
    opened = evaluation._open

    def two_fields(*args, **kwargs):
        data = opened(*args, **kwargs)
        data.fields, data.x = ["w_a", "w_b"], data.y[..., :2].contiguous()
        return data

    monkeypatch.setattr(evaluation, "_open", two_fields)
    torch.manual_seed(0)
    rows = evaluate_resolutions(marching_setup(vorticity_file, 2, 1, 1), vorticity_file, [16, 8], indices="all")
    assert [r["resolution"] for r in rows] == [16, 8] and all(r["fields"] == ["w_a", "w_b"] for r in rows)
    assert len(rows[0]["field_mean"]) == 2 and len(rows[0]["per_time_field_mean"]) == 2
    assert all(0 < e < 10 for r in rows for e in r["field_mean"])
    with pytest.raises(ValueError, match=r"2 field\(s\) per state \(w_a, w_b\) but the model steps 1"):
        evaluate_resolutions(marching_setup(vorticity_file, 1, 2, 2), vorticity_file, [16], indices="all")
