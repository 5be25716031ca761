"""The Well's files (written here with h5py in The Well's own layout, small) become kind time-series files
through `petrov import --from the-well`: every sample equal to the source bit for bit in float32, vector
fields split into components, periodicity per axis from boundary_conditions, dt from dimensions/time."""
import json

import h5py
import numpy as np
import pytest

from petrov.cli import main as cli_main
from petrov.datasets import open_dataset
from petrov.datasets.series_formats import import_series_file

RNG = np.random.default_rng(11)
N, T, NX, NY = 2, 4, 8, 6


def write_well_file(path, n=N, x_bc="PERIODIC", y_bc="WALL", tensor=True, constant=True, flat_tensor=False):
    """The Well's layout for a 2-D Cartesian dataset: root attributes, dimensions/ (time, x, y),
    boundary_conditions/, t0_fields/ (scalars), t1_fields/ (vectors, trailing component axis), t2_fields/."""
    fields = {
        "t0_fields/tracer": RNG.standard_normal((n, T, NX, NY)).astype(np.float32),
        "t0_fields/pressure": RNG.standard_normal((n, T, NX, NY)).astype(np.float32),
        "t1_fields/velocity": RNG.standard_normal((n, T, NX, NY, 2)).astype(np.float32),
    }
    if tensor:
        shape = (n, T, NX, NY, 4) if flat_tensor else (n, T, NX, NY, 2, 2)
        fields["t2_fields/stress"] = RNG.standard_normal(shape).astype(np.float32)
    with h5py.File(path, "w") as h5:
        h5.attrs.update(dataset_name="shear_flow", grid_type="cartesian", n_spatial_dims=2, n_trajectories=n,
                        simulation_parameters=["Reynolds"], Reynolds=1e4)
        dims = h5.create_group("dimensions")
        dims.attrs["spatial_dims"] = ["x", "y"]
        dims["time"] = np.arange(T, dtype=np.float32) * 0.25
        dims["time"].attrs["sample_varying"] = False
        dims["x"] = np.linspace(0, 1, NX, endpoint=False).astype(np.float32)
        dims["y"] = np.linspace(-1, 1, NY).astype(np.float32)
        for axis in ("x", "y"):
            dims[axis].attrs.update(sample_varying=False, time_varying=False)
        bcs = h5.create_group("boundary_conditions")
        for name, axis, kind in (("x_periodic", "x", x_bc), ("y_wall", "y", y_bc)):
            if kind is None:
                continue
            g = bcs.create_group(name)
            g.attrs.update(associated_dims=[axis], associated_fields=[], bc_type=kind, sample_varying=False,
                           time_varying=False)
            g["mask"] = np.zeros(NX if axis == "x" else NY, bool)
        for order in range(3):
            group = h5.create_group(f"t{order}_fields")
            names = [k.split("/")[1] for k in fields if k.startswith(f"t{order}_")]
            if order == 0 and constant:
                names.append("obstacle")
                group["obstacle"] = RNG.standard_normal((NX, NY)).astype(np.float32)
                group["obstacle"].attrs.update(dim_varying=[True, True], sample_varying=False, time_varying=False)
            group.attrs["field_names"] = names
        for key, value in fields.items():
            h5[key] = value
            h5[key].attrs.update(dim_varying=[True, True], sample_varying=True, time_varying=True)
    return fields


@pytest.mark.parametrize("flat_tensor", [False, True], ids=["tensor (2, 2)", "tensor flattened (4,)"])
def test_well_file_round_trips(tmp_path, flat_tensor):
    src = tmp_path / "shear_flow_Reynolds_1e4.hdf5"
    fields = write_well_file(src, flat_tensor=flat_tensor)
    out = import_series_file(tmp_path / "well.h5", src, format="the-well")
    with h5py.File(out, "r") as h5:
        x, y, attrs = h5["x"][...], h5["y"][...], dict(h5.attrs)
    names = ["tracer", "pressure", "velocity_x", "velocity_y", "stress_xx", "stress_xy", "stress_yx", "stress_yy"]
    assert json.loads(attrs["fields"]) == names
    parts = [fields["t0_fields/tracer"][..., None], fields["t0_fields/pressure"][..., None],
             fields["t1_fields/velocity"], fields["t2_fields/stress"].reshape(N, T, NX, NY, 4)]
    expected = np.moveaxis(np.concatenate(parts, axis=-1), 1, 3)  # (N, X, Y, T, F)
    assert y.shape == (N, NX, NY, T, 8) and np.array_equal(y, expected)
    assert np.array_equal(x, expected[..., 0, :])
    assert json.loads(attrs["axis_grids"]) == ["periodic", "nodes"] and attrs["grid"] == "mixed"
    np.testing.assert_allclose(json.loads(attrs["domain"]), [[0, 1], [-1, 1]], atol=1e-6)
    assert attrs["dt"] == pytest.approx(0.25)
    assert json.loads(attrs["sources"])["skipped"] == ["t0_fields/obstacle"]  # a constant coefficient
    ds = open_dataset(out, resolution=(4, 6))
    assert ds.fields == names and ds.axis_periodic == (True, False)
    np.testing.assert_array_equal(ds.y.numpy(), expected[:, ::2].reshape(N, 4, NY, T * 8))
    assert ds.coords.shape == (4, NY, 2)


def test_cli_from_the_well_and_grid_override(tmp_path, capsys):
    src = tmp_path / "w.hdf5"
    fields = write_well_file(src, y_bc=None, tensor=False, constant=False)
    out = tmp_path / "w.h5"
    base = ["import", "--from", "the-well", str(src), "-o", str(out), "--no-progress"]
    assert cli_main(base) == 1  # no condition for y: one line asking for --grid
    err = capsys.readouterr().err
    assert "no condition for axis y" in err and "--grid" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert cli_main(base + ["--grid", "periodic", "nodes"]) == 0
    with h5py.File(out, "r") as h5:
        assert np.array_equal(h5["y"][..., 2:], np.moveaxis(fields["t1_fields/velocity"], 1, 3))


def test_a_well_file_trains_and_is_evaluated_per_field(tmp_path, capsys):
    """End to end on The Well's layout: imported, `arfno2d` stepping its 4 fields on the 8 x 6 grid periodic
    in x only (the file's boundary conditions) trained for an epoch, tested and evaluated at two grids."""
    src = tmp_path / "shear_flow.hdf5"
    write_well_file(src, n=8, tensor=False, constant=False)
    data = tmp_path / "well.h5"
    assert cli_main(["import", "--from", "the-well", str(src), "-o", str(data), "--no-progress"]) == 0
    config = tmp_path / "well.toml"
    config.write_text(f"""
[data]
path = "{data}"
train_resolution = [8, 6]
eval_resolutions = [[8, 6], [4, 6]]
n_train = 4
n_val = 2
n_test = 2
normalizer = "global"
history = 2

[model]
name = "arfno2d"
options = {{ fields = 4, history = 2, time_steps = 2, periodic = [true, false], domain = [[0.0, 1.0], [-1.0, 1.0]], width = 4, modes = 2, n_layers = 1, proj_hidden = 8 }}

[optim]
epochs = 1
batch_size = 2

[loss]
mode = "pushforward"

[run]
device = "cpu"
progress = false
threads = 1
""")
    assert cli_main(["train", str(config), "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert cli_main(["evaluate", str(tmp_path / "run"), "--out", str(tmp_path / "eval")]) == 0
    out = capsys.readouterr().out
    assert "8x6" in out and "4x6" in out and "velocity_y" in out
    rows = json.loads((tmp_path / "eval" / "metrics.json").read_text())["rows"]
    assert [r["resolution"] for r in rows] == [[8, 6], [4, 6]]
    assert all(r["fields"] == ["tracer", "pressure", "velocity_x", "velocity_y"] for r in rows)
