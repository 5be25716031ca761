"""Cell-centred grids (``petrov import --grid cells``): coarsening by block averages, cell-centre
coordinates, and a PDEBench-layout Darcy file at 128² that imports and trains with the shipped
``darcy-pdebench`` preset, changed only in its data path."""
import json

import numpy as np
import pytest
import torch

from petrov.cli import main as cli_main
from petrov.datasets import dataset_info, fit_normalizer, import_arrays, open_dataset
from petrov.datasets.sampling import allowed_resolutions, cell_average, stride_for
from petrov.grids.layout import grid_coordinates

RNG = np.random.default_rng(0)


def naive_block_mean(a: np.ndarray, k: int) -> np.ndarray:
    """(b, n, n) -> (b, n/k, n/k) with two explicit loops over the coarse cells."""
    b, n, _ = a.shape
    out = np.zeros((b, n // k, n // k))
    for i in range(n // k):
        for j in range(n // k):
            out[:, i, j] = a[:, i * k : (i + 1) * k, j * k : (j + 1) * k].mean(axis=(1, 2))
    return out


def test_cell_average_is_the_mean_over_each_block_of_cells():
    a = RNG.standard_normal((3, 12, 12))
    for k in (1, 2, 3, 4, 6):
        np.testing.assert_allclose(cell_average(a, k, 1, 2), naive_block_mean(a, k), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="blocks of 5"):
        cell_average(a, 5, 1, 2)


def test_coarse_cell_centres_are_the_centres_of_their_blocks():
    """The careful rule: a coarse cell is the union of k x k fine cells, so its centre is the mean of
    theirs (striding by an even k would place the coarse points off the centres)."""
    fine, coarse = grid_coordinates((16, 16), cells=True, dtype=torch.float64), grid_coordinates(
        (4, 4), cells=True, dtype=torch.float64)
    pooled = cell_average(fine.numpy(), 4, 0, 2)
    np.testing.assert_allclose(pooled, coarse.numpy(), atol=1e-15)
    assert coarse[0, 0, 0] == pytest.approx(1 / 8) and coarse[-1, -1, 1] == pytest.approx(7 / 8)


def test_cell_resolutions_are_the_divisors():
    assert allowed_resolutions(128, periodic=False, cells=True) == [2, 4, 8, 16, 32, 64, 128]
    assert stride_for(128, 32, periodic=False, cells=True) == 4
    with pytest.raises(ValueError, match="cell-centred grid .* divide 128.*32, 64"):
        stride_for(128, 36, periodic=False, cells=True)


def test_a_cell_centred_import_loads_block_averages_at_cell_centres(tmp_path, pdebench_darcy):
    src = tmp_path / "2D_DarcyFlow_beta1.0_Train.hdf5"
    nu, u = pdebench_darcy(src, 3, n=16)
    out = import_arrays(tmp_path / "d.h5", f"{src}:nu", f"{src}:tensor", y_axes="NCXY", grid="cells",
                        coords=[f"{src}:x-coordinate", f"{src}:y-coordinate"])
    info = dataset_info(out)
    assert info["grid"] == "cells" and info["resolutions"] == [2, 4, 8, 16]
    np.testing.assert_allclose(json.loads(info["attrs"]["domain"]), [[0, 1], [0, 1]], atol=1e-7)
    ds = open_dataset(out, resolution=4)
    np.testing.assert_allclose(ds.x[..., 0].numpy(), naive_block_mean(nu, 4), rtol=1e-6)
    np.testing.assert_allclose(ds.y[..., 0].numpy(), naive_block_mean(u, 4), rtol=1e-6)
    np.testing.assert_allclose(ds.coords[:, 0, 0].numpy(), [1 / 8, 3 / 8, 5 / 8, 7 / 8], rtol=1e-6)
    # the normaliser fitted at 16 cells, taken to 4, holds the block means of its mean field
    norm = fit_normalizer(out, "y", indices=range(3))
    np.testing.assert_allclose(norm.at_resolution(4).mean[..., 0].numpy(), naive_block_mean(u.mean(0, keepdims=True), 4)[0],
                               rtol=1e-5)
    assert norm.reaches(8) and not norm.reaches(5)


def test_cell_centres_read_as_a_node_grid_are_refused(tmp_path, pdebench_darcy):
    src = tmp_path / "darcy.h5"
    pdebench_darcy(src, 2, n=16)
    with pytest.warns(UserWarning, match="look like cell centres.*--grid cells"):
        import_arrays(tmp_path / "w.h5", f"{src}:nu", f"{src}:tensor", y_axes="NCXY", grid="nodes",
                      coords=[f"{src}:x-coordinate", f"{src}:y-coordinate"])
    with pytest.warns(UserWarning, match="look like cell centres"), \
            pytest.raises(ValueError, match="cell centres lie half a cell inside"):
        import_arrays(tmp_path / "d.h5", f"{src}:nu", f"{src}:tensor", y_axes="NCXY", grid="nodes",
                      coords=[f"{src}:x-coordinate", f"{src}:y-coordinate"], domain=(0, 1))


def test_pdebench_darcy_at_128_trains_with_the_shipped_preset(tmp_path, monkeypatch, pdebench_darcy):
    """The preset as shipped but for data.path; PETROV_QUICK shrinks the splits and epochs only."""
    monkeypatch.setenv("PETROV_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "2D_DarcyFlow_beta1.0_Train.hdf5"
    pdebench_darcy(src, 32)
    assert cli_main(["import", "--x", f"{src}:nu", "--y", f"{src}:tensor", "--y-axes", "NCXY", "--grid", "cells",
                     "--coords", f"{src}:x-coordinate", f"{src}:y-coordinate", "--no-progress",
                     "-o", "data/mine/pdebench.h5"]) == 0
    assert cli_main(["train", "darcy-pdebench", "--out", "runs/pb", "--set", 'data.path="data/mine/pdebench.h5"']) == 0
    assert cli_main(["evaluate", "runs/pb", "--no-plots"]) == 0
    rows = json.loads((tmp_path / "runs/pb/eval/metrics.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert [r["resolution"] for r in rows] == [32, 64, 128]
    assert all(np.isfinite(r["mean"]) for r in rows)
