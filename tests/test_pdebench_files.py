"""PDEBench's time-dependent files (written here with h5py in PDEBench's own layouts, small) become kind
time-series files through `petrov import --from pdebench`: every sample equal to the source bit for bit in
float32, fields, grid, periodicity and time step read from the file."""
import json

import h5py
import numpy as np
import pytest

from petrov.cli import main as cli_main
from petrov.datasets import open_dataset
from petrov.datasets.series_formats import import_series_file
from petrov.datasets.windows import Window

RNG = np.random.default_rng(7)
N, T, NX, NY = 3, 5, 8, 12


def write_group_file(path, n=N, channels=2, dim=2):
    """PDEBench's diffusion-reaction / shallow-water layout: one group per sample ("0000", ...) holding
    data (T, X, Y, C) and grid/x, grid/y, grid/t (cell centres on [-1, 1]^2, t on [0, 5])."""
    shape = (T, NX, NY, channels) if dim == 2 else (T, NX, channels)
    data = RNG.standard_normal((n, *shape))  # float64 in the file: stored as float32
    with h5py.File(path, "w") as h5:
        for i in range(n):
            g = h5.create_group(f"{i:04d}")
            g["data"] = data[i]
            g["grid/x"] = np.linspace(-1, 1, 2 * NX + 1)[1::2]
            if dim == 2:
                g["grid/y"] = np.linspace(-1, 1, 2 * NY + 1)[1::2]
            g["grid/t"] = np.linspace(0, 5, T)
    return data


def write_cfd_file(path, n=N):
    """PDEBench's 2-D compressible-flow layout: Vx, Vy, density, pressure each (N, T, X, Y) float32 and
    x-coordinate, y-coordinate, t-coordinate (one time more than states, as in PDEBench's files)."""
    fields = {k: RNG.standard_normal((n, T, NX, NY)).astype(np.float32) for k in ("Vx", "Vy", "density", "pressure")}
    with h5py.File(path, "w") as h5:
        for k, v in fields.items():
            h5[k] = v
        h5["x-coordinate"] = (np.arange(NX) + 0.5) / NX
        h5["y-coordinate"] = 2 * (np.arange(NY) + 0.5) / NY
        h5["t-coordinate"] = np.linspace(0, 1, T + 1)
    return fields


def stored(path):
    with h5py.File(path, "r") as h5:
        return h5["x"][...], h5["y"][...], dict(h5.attrs)


def test_group_per_sample_file_round_trips(tmp_path):
    src = tmp_path / "2D_diff-react_NA_NA.h5"
    data = write_group_file(src)
    out = import_series_file(tmp_path / "rd.h5", src, format="pdebench", grid="cells")
    x, y, attrs = stored(out)
    expected = np.moveaxis(data, 1, 3).astype(np.float32)  # (N, X, Y, T, C)
    assert y.shape == (N, NX, NY, T, 2) and np.array_equal(y, expected)
    assert np.array_equal(x, expected[..., 0, :])
    assert attrs["kind"] == "time-series" and json.loads(attrs["fields"]) == ["data0", "data1"]
    assert json.loads(attrs["native_shape"]) == [NX, NY] and attrs["native_resolution"] == NY
    assert json.loads(attrs["axis_grids"]) == ["cells", "cells"] and attrs["grid"] == "cells"
    np.testing.assert_allclose(json.loads(attrs["domain"]), [[-1, 1], [-1, 1]], atol=1e-12)
    assert attrs["dt"] == pytest.approx(5 / (T - 1)) and attrs["time_steps"] == T - 1


def test_cfd_file_round_trips_and_loads_rectangular_windows(tmp_path):
    src = tmp_path / "2D_CFD_Rand_M0.1_Eta0.1_Zeta0.1_periodic_8_Train.hdf5"
    fields = write_cfd_file(src)
    out = import_series_file(tmp_path / "cfd.h5", src, format="pdebench")
    x, y, attrs = stored(out)
    names = ["Vx", "Vy", "density", "pressure"]
    expected = np.stack([np.moveaxis(fields[k], 1, -1) for k in names], axis=-1)  # (N, X, Y, T, F)
    assert np.array_equal(y, expected) and json.loads(attrs["fields"]) == names
    assert json.loads(attrs["axis_grids"]) == ["periodic", "periodic"]  # from the file's name
    np.testing.assert_allclose(json.loads(attrs["domain"]), [[1 / 16, 1 + 1 / 16], [1 / 12, 2 + 1 / 12]])
    assert attrs["dt"] == pytest.approx(1 / T)
    ds = open_dataset(out, resolution=(4, 6), window=Window(history=2, first=1, states=3))
    assert ds.fields == names and ds.axis_periodic == (True, True)
    win = expected[:, ::2, ::2, 1:4, :].reshape(N, 4, 6, 12)  # state-major: channel s * F + f
    np.testing.assert_array_equal(ds.y.numpy(), win)
    np.testing.assert_array_equal(ds.x.numpy(), win[..., :8])


def test_one_dimensional_tensor_file(tmp_path):
    src = tmp_path / "1D_Advection_Sols_beta0.1.hdf5"
    u = RNG.standard_normal((N, T, 16)).astype(np.float32)
    with h5py.File(src, "w") as h5:
        h5["tensor"] = u
        h5["x-coordinate"] = (np.arange(16) + 0.5) / 16
        h5["t-coordinate"] = np.linspace(0, 2, T + 1)
    out = import_series_file(tmp_path / "adv.h5", src, format="pdebench", grid="periodic")
    x, y, attrs = stored(out)
    assert np.array_equal(y[..., 0], np.moveaxis(u, 1, -1)) and json.loads(attrs["fields"]) == ["u"]


def test_cli_from_pdebench_with_renamed_fields(tmp_path, capsys):
    src = tmp_path / "2D_rdb_NA_NA.h5"
    data = write_group_file(src, channels=1)
    out = tmp_path / "swe.h5"
    args = ["import", "--from", "pdebench", str(src), "--grid", "nodes", "cells", "--fields", "h", "-o", str(out),
            "--no-progress"]
    assert cli_main(args) == 0
    printed = capsys.readouterr()
    assert f"wrote {out}" in printed.out
    assert "grid/x) run from -0.875 to 0.875" in printed.err and "look like cell centres" in printed.err
    x, y, attrs = stored(out)
    assert np.array_equal(y[..., 0], np.moveaxis(data[..., 0], 1, -1).astype(np.float32))
    assert json.loads(attrs["fields"]) == ["h"] and attrs["grid"] == "mixed"
    assert cli_main(["info", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "time-series" in shown and f"native grid {NX} x {NY}" in shown
