"""The figures are written as non-empty, valid PNG files, atomically, from plain data."""
import json

import numpy as np
import pytest
import torch

from petrov.datasets import GridDataset
from petrov.train.plots import (
    plot_comparison,
    plot_error_vs_resolution,
    plot_predictions,
    plot_training_curves,
    read_epoch_log,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 2000
    assert not list(path.parent.glob(".*tmp"))


def dataset(grid, n=3, grid_out=None):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *grid, 1, generator=g)
    y = torch.randn(n, *(grid_out or grid), 1, generator=g)
    return GridDataset(x, y, kind="burgers" if len(grid) == 1 else "darcy", periodic=len(grid) == 1,
                       native_resolution=grid[0], indices=np.arange(10, 10 + n))


def test_predictions_1d_and_2d(tmp_path):
    ds = dataset((64,))
    assert_png(plot_predictions(ds, ds.y + 0.01, tmp_path / "p1.png", title="1-D"))
    ds2 = dataset((9, 9))
    assert_png(plot_predictions(ds2, ds2.y * 1.1, tmp_path / "p2.png", n=2))
    inverse = dataset((9, 9), grid_out=(5, 5))  # target on a coarser grid than the input
    assert_png(plot_predictions(inverse, inverse.y, tmp_path / "p3.png"))
    with pytest.raises(ValueError, match="do not match"):
        plot_predictions(ds, ds.y[:, :32], tmp_path / "bad.png")


def test_error_vs_resolution(tmp_path):
    rows = [{"resolution": r, "n": 5, "mean": 1e-3 * (1 + i), "std": 2e-4, "median": 9e-4, "max": 3e-3}
            for i, r in enumerate([256, 512, 1024])]
    assert_png(plot_error_vs_resolution(rows, tmp_path / "e.png", train_resolution=512, target=1e-2))
    with pytest.raises(ValueError, match="no evaluation rows"):
        plot_error_vs_resolution([], tmp_path / "empty.png")


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
