"""The figures are written as non-empty, valid PNG files, atomically, from plain data."""
import json

import numpy as np
import pytest
import torch

from petrov.datasets import GridDataset
from petrov.evaluate import figure_style, plots
from petrov.evaluate.plots import (
    field_names,
    percentile_band,
    plot_comparison,
    plot_error_vs_resolution,
    plot_inversion,
    plot_predictions,
    plot_training_curves,
    read_epoch_log,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 2000
    assert not list(path.parent.glob(".*tmp"))


def dataset(grid, n=3, grid_out=None, kind=None):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *grid, 1, generator=g)
    y = torch.randn(n, *(grid_out or grid), 1, generator=g)
    return GridDataset(x, y, kind=kind or ("burgers" if len(grid) == 1 else "darcy"), periodic=len(grid) == 1,
                       native_resolution=grid[0], indices=np.arange(10, 10 + n))


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions make, inspected just before they are saved and closed."""
    seen = []
    save = figure_style.save_figure

    def inspect(fig, path, **kwargs):
        texts = [t for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) if t]
        colorbars = [im.colorbar.ax.get_ylabel() for ax in fig.axes for im in ax.images if im.colorbar]
        images = sum(len(ax.images) for ax in fig.axes)
        bands = [c.get_paths()[0].vertices.copy() for c in fig.axes[0].collections]
        legend = fig.axes[0].get_legend()
        labels = [t.get_text() for t in legend.get_texts()] if legend else []
        seen.append({"texts": texts, "colorbars": colorbars, "images": images, "bands": bands, "legend": labels})
        return save(fig, path, **kwargs)

    monkeypatch.setattr(figure_style, "save_figure", inspect)  # where every figure module calls it
    return seen


def reference_percentile(values, q):
    """Linear interpolation between the sorted values at rank q/100 * (n - 1), written out."""
    v = sorted(values)
    rank = q / 100 * (len(v) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (rank - lo) * (v[hi] - v[lo])


def test_predictions_1d_and_2d(tmp_path):
    ds = dataset((64,))
    assert_png(plot_predictions(ds, ds.y + 0.01, tmp_path / "p1.png", title="1-D"))
    ds2 = dataset((9, 9))
    assert_png(plot_predictions(ds2, ds2.y * 1.1, tmp_path / "p2.png", n=2))
    inverse = dataset((9, 9), grid_out=(5, 5))  # target on a coarser grid than the input
    assert_png(plot_predictions(inverse, inverse.y, tmp_path / "p3.png"))
    with pytest.raises(ValueError, match="do not match"):
        plot_predictions(ds, ds.y[:, :32], tmp_path / "bad.png")


def test_percentile_band_matches_the_sorted_values():
    errors = np.random.default_rng(0).lognormal(np.log(1e-3), 1.0, size=37)
    lo, med, hi = percentile_band(torch.tensor(errors), 10, 90)
    assert lo == pytest.approx(reference_percentile(errors, 10), rel=1e-12)
    assert med == pytest.approx(reference_percentile(errors, 50), rel=1e-12)
    assert hi == pytest.approx(reference_percentile(errors, 90), rel=1e-12)
    # a band of positive errors stays positive (drawable on a log axis), unlike mean - std for skewed errors
    assert 0 < errors.min() <= lo <= med <= hi <= errors.max()
    skewed = np.array([1e-3] * 9 + [1e-1])  # one bad sample: mean - std is negative, the band is not
    assert skewed.mean() - skewed.std() < 0 < percentile_band(skewed)[0]
    assert percentile_band([2.0, 1.0], 0, 100) == (1.0, 1.5, 2.0)
    with pytest.raises(ValueError, match="no per-sample errors"):
        percentile_band([])
    with pytest.raises(ValueError, match="NaN"):
        percentile_band([1.0, float("nan")])
    with pytest.raises(ValueError, match="low <= 50 <= high"):
        percentile_band([1.0, 2.0], 60, 90)


def test_error_vs_resolution_draws_the_percentile_band(tmp_path, figures):
    rng = np.random.default_rng(1)
    rows = []
    for i, r in enumerate([256, 512, 1024]):
        e = rng.lognormal(np.log(1e-3 * (1 + i)), 0.8, size=20)
        rows.append({"resolution": r, "n": 20, "mean": e.mean(), "std": e.std(), "median": float(np.median(e)),
                     "max": e.max(), "per_sample": e.tolist()})
    assert_png(plot_error_vs_resolution(rows[::-1], tmp_path / "e.png", train_resolution=512, target=1e-2))
    (band,) = figures[-1]["bands"]  # one shaded region: its edges are the 10th and 90th percentiles
    for r in rows:
        at = band[np.isclose(band[:, 0], r["resolution"]), 1]
        assert min(at) == pytest.approx(reference_percentile(r["per_sample"], 10))
        assert max(at) == pytest.approx(reference_percentile(r["per_sample"], 90))
    assert {"10th–90th percentile", "median", "mean"} <= set(figures[-1]["legend"])
    # summary rows only (an older metrics file): the median line, no band
    summary = [{k: v for k, v in r.items() if k != "per_sample"} for r in rows]
    assert_png(plot_error_vs_resolution(summary, tmp_path / "s.png"))
    assert figures[-1]["bands"] == []
    with pytest.raises(ValueError, match="no evaluation rows"):
        plot_error_vs_resolution([], tmp_path / "empty.png")


@pytest.mark.parametrize("kind, grid, names", [
    ("burgers", (32,), ("u₀", "u(·, 1)")),
    ("darcy", (9, 9), ("a", "u")),
    ("imported", (9, 9), ("x", "y")),
    ("imported", (32,), ("x", "y")),
])
def test_predictions_name_the_fields_and_label_every_colorbar(tmp_path, figures, kind, grid, names):
    assert field_names(kind) == names
    ds = dataset(grid, n=2, kind=kind)
    plot_predictions(ds, ds.y, tmp_path / "p.png")
    fig = figures[-1]
    text = " ".join(fig["texts"])
    assert all(name in text for name in names)
    assert len(fig["colorbars"]) == fig["images"] and all(fig["colorbars"])
    if len(grid) == 2:
        assert fig["images"] == 8 and set(fig["colorbars"]) >= set(names)


def test_burgers_final_time_comes_from_the_file():
    assert field_names("burgers", {"params": '{"nu": 0.1, "t": 0.5}'}) == ("u₀", "u(·, 0.5)")
    assert field_names("unknown-kind") == ("input", "output")


def test_inversion_names_the_fields(tmp_path, figures):
    rng = np.random.default_rng(0)
    u, a = rng.random((3, 9, 9)), 3 + 9 * rng.random((3, 5, 5))
    recovered = a * np.array([0.9, 0.8, 0.95])[:, None, None]  # errors 0.1, 0.2, 0.05: the first is the median
    assert_png(plot_inversion(u, recovered, tmp_path / "inv.png", a_true=a))
    text = " ".join(figures[-1]["texts"])
    for name in ("u observed", "a true", "a recovered", "error", "sample 0 (first)", "sample 1 (worst error)"):
        assert name in text
    assert figures[-1]["images"] == 8 and all(figures[-1]["colorbars"])


def test_training_curves_from_jsonl_and_csv(tmp_path):
    rows = [{"epoch": e, "train_loss": 1.0 / e, "val_rel_l2": 0.5 / e, "lr": 1e-3 / e, "seconds": 1.0,
             "best": True} for e in range(1, 6)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert_png(plot_training_curves(tmp_path, tmp_path / "curves.png"))
    csv_text = "epoch,train_loss,val_rel_l2,lr,seconds,best\n" + "".join(
        f"{r['epoch']},{r['train_loss']},{r['val_rel_l2']},{r['lr']},{r['seconds']},True\n" for r in rows)
    (tmp_path / "other.csv").write_text(csv_text)
    assert read_epoch_log(tmp_path / "other.csv") == [{**r, "epoch": float(r["epoch"])} for r in rows]
    with pytest.raises(FileNotFoundError, match="no training log"):
        plot_training_curves(tmp_path / "empty", tmp_path / "x.png")


def test_comparison(tmp_path):
    assert_png(plot_comparison(["galerkin", "fourier"], [1e-3, 2e-3], tmp_path / "cmp.png", title="mixers"))
    with pytest.raises(ValueError, match="one value per label"):
        plot_comparison(["a"], [1.0, 2.0], tmp_path / "bad.png")


# --- rules for figures that go into a paper ------------------------------------------------------

@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions make, drawn (layout done) just before they are saved."""
    seen = []
    save = figure_style.save_figure

    def keep(fig, path, **kwargs):
        fig.canvas.draw()
        seen.append({"fig": fig, "boxes": [ax.get_window_extent() for ax in fig.axes],
                     "offsets": [a.get_offset_text().get_text() for ax in fig.axes for a in (ax.xaxis, ax.yaxis)],
                     "legends": [(ax.get_window_extent(), lg.get_window_extent(), ax)
                                 for ax in fig.axes for lg in [ax.get_legend()] if lg]})
        return save(fig, path, **kwargs)

    monkeypatch.setattr(figure_style, "save_figure", keep)
    return seen


def test_chosen_samples_are_the_first_the_median_and_the_worst():
    errors = [0.5, 0.1, 0.9, 0.2, 0.3]
    assert plots.chosen_samples(errors) == [("first", 0), ("median", 4), ("worst", 2)]
    assert plots.chosen_samples([0.1, 0.2]) == [("first", 0), ("median", 1)]  # the median is also the worst
    assert plots.chosen_samples([1.0]) == [("first", 0)]


def test_powers_of_ten_go_into_labels_not_offset_texts(tmp_path, drawn):
    ds = dataset((9, 9))
    tiny = GridDataset(ds.x, 1e-3 * ds.y, kind="darcy", periodic=False, native_resolution=9, indices=ds.indices)
    plot_predictions(tiny, tiny.y * 1.01, tmp_path / "p.png")
    one = dataset((64,))
    plot_predictions(GridDataset(one.x, 1e-4 * one.y, kind="burgers", periodic=True, native_resolution=64,
                                 indices=one.indices), 1e-4 * one.y * 1.1, tmp_path / "q.png")
    for figure in drawn:
        assert not any(figure["offsets"]), figure["offsets"]
    colorbar_labels = [ax.get_ylabel() for ax in drawn[0]["fig"].axes if ax.get_ylabel().startswith("u")]
    assert any("×10⁻³" in label for label in colorbar_labels)


def test_field_plots_have_physical_axes(tmp_path, drawn):
    ds = dataset((9, 9))
    plot_predictions(ds, ds.y, tmp_path / "p.png", n=1)
    fields = [ax for ax in drawn[0]["fig"].axes if ax.images]
    for ax in fields:
        assert ax.get_xlabel() == "x" and ax.get_ylabel() == "y"
        assert len([t for t in ax.get_xticklabels() if t.get_text()]) >= 2
        lo, hi = ax.get_xlim()
        assert lo == pytest.approx(-1 / 16) and hi == pytest.approx(1 + 1 / 16)  # pixels centred on the nodes
    cells = torch.stack(torch.meshgrid(*(((torch.arange(4) + 0.5) / 4,) * 2), indexing="ij"), -1)
    assert plots.grid_extent(cells, [[0, 2], [0, 1]]) == pytest.approx((0.0, 2.0, 0.0, 1.0))


def test_spacetime_runs_time_upwards(tmp_path, drawn):
    y = np.random.default_rng(0).standard_normal((2, 16, 5))
    plots.plot_spacetime(y, y, tmp_path / "s.png", t_final=2.0)
    ax = drawn[0]["fig"].axes[0]
    assert ax.get_xlabel() == "x" and ax.get_ylabel().startswith("t")
    bottom, top = ax.get_ylim()
    assert bottom < 0 < 2.0 < top  # t = 0 at the bottom, the final time at the top


def test_legends_never_cover_the_data(tmp_path, drawn):
    rows = [{"resolution": r, "n": 5, "mean": 1e-2, "median": 1e-2, "max": 5e-2,
             "per_sample": [1e-2, 2e-2, 5e-2, 1e-2, 1e-2]} for r in (256, 512, 1024, 2048, 4096, 8192)]
    plot_error_vs_resolution(rows, tmp_path / "e.png", train_resolution=512)
    (axes_box, legend_box, _), = drawn[0]["legends"]
    assert legend_box.x0 >= axes_box.x1  # beside the axes, not over them


def test_every_figure_is_also_a_pdf(tmp_path):
    path = plot_comparison(["a", "b"], [1e-2, 2e-2], tmp_path / "c.png")
    assert path.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"


def _overlapping(boxes):
    """Pairs of boxes (matplotlib Bbox) that overlap, by index."""
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes)) if boxes[i].overlaps(boxes[j])]


def test_error_vs_level_labels_never_overprint(tmp_path, monkeypatch):
    from petrov.evaluate.mesh_plots import plot_error_vs_level

    seen = {}
    save = figure_style.save_figure

    def measure(fig, path, **kwargs):  # the boxes as drawn, before the figure is saved and closed
        fig.canvas.draw()
        ax = fig.axes[0]
        seen["ticks"] = [[(t.get_text(), t.get_window_extent()) for t in axis.get_ticklabels(which="both")
                          if t.get_text()] for axis in (ax.xaxis, ax.yaxis)]
        seen["texts"] = [t.get_window_extent() for t in ax.texts]
        seen["axes"], seen["legend"] = ax.get_window_extent(), ax.get_legend().get_window_extent()
        seen["figure"] = fig.bbox
        return save(fig, path, **kwargs)

    monkeypatch.setattr(figure_style, "save_figure", measure)
    # level2 and the remesh have nearly the same node count, as in darcy-mesh files
    nodes = {"level0": 328.0, "level1": 1225.0, "level2": 4731.0, "remesh": 4776.0}
    rows = [{"resolution": name, "n": 100, "median": m, "mean": 1.1 * m, "max": 3 * m}
            for name, m in zip(nodes, (3.6e-2, 3.7e-2, 4.0e-2, 4.05e-2))]
    plot_error_vs_level(rows, nodes, tmp_path / "e.png", train_level="level0")
    for labels in seen["ticks"]:
        assert labels and not _overlapping([box for _, box in labels]), [text for text, _ in labels]
    names = " ".join(text for text, _ in seen["ticks"][0])
    assert all(name in names for name in nodes) and "4,776 nodes" in names
    assert not seen["legend"].overlaps(seen["axes"])  # the legend sits outside the data
    assert seen["legend"].width < 0.8 * seen["figure"].width  # below the axes, not a column beside them
    assert not _overlapping(seen["texts"])
