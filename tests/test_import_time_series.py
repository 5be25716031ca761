"""`petrov import` of time series from the user's arrays (a T axis in the axis string, several fields, one
array per field or one per group, rectangular grids), and a sweep of malformed files: each one answered
with one line naming the file, the key and what was expected, and nothing left in the output folder."""
import json

import h5py
import numpy as np
import pytest

from petrov.cli import main as cli_main
from petrov.datasets import import_arrays, open_dataset
from petrov.datasets.time_series import import_time_series

RNG = np.random.default_rng(3)
N, T, NX, NY = 3, 5, 8, 12


def stored(path):
    with h5py.File(path, "r") as h5:
        return h5["x"][...], h5["y"][...], dict(h5.attrs)


def test_one_array_of_every_field_on_a_rectangular_grid(tmp_path):
    u = RNG.standard_normal((N, NX, NY, T, 2))  # FNO's samples, grid, time order, with fields last
    np.save(tmp_path / "u.npy", u)
    out = import_time_series(tmp_path / "u.h5", tmp_path / "u.npy", axes="NXYTC", grid=["periodic", "nodes"],
                             fields=["a", "b"], domain=[[0, 2], [0, 1]], dt=0.5)
    x, y, attrs = stored(out)
    assert np.array_equal(y, u.astype(np.float32)) and np.array_equal(x, y[..., 0, :])
    assert json.loads(attrs["native_shape"]) == [NX, NY] and attrs["native_resolution"] == NY
    assert json.loads(attrs["domain"]) == [[0, 2], [0, 1]] and attrs["dt"] == 0.5 and attrs["time_steps"] == T - 1
    ds = open_dataset(out, resolution=(4, 12))
    np.testing.assert_array_equal(ds.y.numpy(), u[:, ::2].reshape(N, 4, NY, 2 * T).astype(np.float32))
    np.testing.assert_array_equal(ds.x.numpy(), u[:, ::2, :, 0].astype(np.float32))
    with pytest.raises(ValueError, match="give one number of points per axis"):
        open_dataset(out, resolution=4)  # every 2nd x point, but 12 nodes do not stride by 2


def test_one_array_per_field_and_import_arrays_with_a_time_axis(tmp_path):
    vx, rho = RNG.standard_normal((2, N, T, NX)).astype(np.float32)
    np.savez(tmp_path / "f.npz", Vx=vx, density=rho)
    out = import_time_series(tmp_path / "f.h5", [f"{tmp_path}/f.npz:Vx", f"{tmp_path}/f.npz:density"], axes="NTX",
                             grid="periodic")
    x, y, attrs = stored(out)
    assert json.loads(attrs["fields"]) == ["Vx", "density"]  # named by their keys
    assert np.array_equal(y, np.stack([np.moveaxis(vx, 1, -1), np.moveaxis(rho, 1, -1)], -1))
    again = import_arrays(tmp_path / "g.h5", vx, x_axes="NTX", grid="periodic", fields=["Vx"])
    assert np.array_equal(stored(again)[1][..., 0], np.moveaxis(vx, 1, -1))
    assert json.loads(stored(again)[2]["fields"]) == ["Vx"]


def test_a_single_field_window_is_the_window_of_the_other_trajectory_kinds(tmp_path):
    from petrov.datasets.windows import Window

    u = RNG.standard_normal((N, NX, T)).astype(np.float32)
    out = import_time_series(tmp_path / "one.h5", u, axes="NXT", grid="periodic")
    window = Window(history=2, first=1, states=3)
    ds = open_dataset(out, window=window)
    x, y = window.apply(u)  # (N, X, S) as burgers-trajectory stores it
    np.testing.assert_array_equal(ds.y.numpy(), y)
    np.testing.assert_array_equal(ds.x.numpy(), x)
    assert ds.fields == ["u"] and ds.axis_periodic == (True,)


def test_one_sample_per_group_through_the_cli_in_chunks(tmp_path, capsys):
    data = RNG.standard_normal((N, T, NX, NY, 2)).astype(np.float32)
    with h5py.File(tmp_path / "g.h5", "w") as h5:
        for i in range(N):
            h5[f"run{i}/data"] = data[i]
    out = tmp_path / "o.h5"
    assert cli_main(["import", "--series", f"{tmp_path}/g.h5:*/data", "--axes", "TXYC", "--fields", "u", "v",
                     "--grid", "periodic", "--chunk-size", "2", "--dt", "0.1", "-o", str(out), "--no-progress"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    x, y, attrs = stored(out)
    assert np.array_equal(y, np.moveaxis(data, 1, 3)) and attrs["chunk_size"] == 2 and attrs["dt"] == 0.1


# --- the sweep of malformed files ----------------------------------------------------------------------


def cfd(path, *, drop=(), n=N, t=T, bad=None, periodic=True, **replace):
    name = path.with_name(("2D_CFD_periodic_" if periodic else "2D_CFD_") + path.name)
    with h5py.File(name, "w") as h5:
        for k in ("Vx", "Vy", "density", "pressure"):
            h5[k] = RNG.standard_normal((n, t, NX, NY)).astype(np.float32)
        h5["x-coordinate"] = (np.arange(NX) + 0.5) / NX
        h5["y-coordinate"] = (np.arange(NY) + 0.5) / NY
        h5["t-coordinate"] = np.linspace(0, 1, t + 1)
        for k in drop:
            del h5[k]
        for k, v in replace.items():
            del h5[k.replace("_", "-")]
            h5[k.replace("_", "-")] = v
        if bad:
            key, i = bad
            h5[key][i, 1, 2, 3] = np.nan if key != "Vx" else np.inf
    return name


def groups(path, *, n=N, shapes=None, drop=None, t_len=T):
    with h5py.File(path, "w") as h5:
        for i in range(n):
            shape = (shapes or {}).get(i, (T, NX, NY, 2))
            g = h5.create_group(f"{i:04d}")
            g["data"] = RNG.standard_normal(shape)
            g["grid/x"] = np.linspace(0, 1, NX)
            g["grid/y"] = np.linspace(0, 1, NY)
            g["grid/t"] = np.linspace(0, 1, t_len)
        if drop:
            del h5[drop]
    return path


def well(path, *, root=None, no_attr=None, drop=None, velocity=None, bc="PERIODIC", time=None, nan=False, x=None,
         all_constant=False):
    with h5py.File(path, "w") as h5:
        h5.attrs.update({"grid_type": "cartesian", "n_spatial_dims": 2, "n_trajectories": N, "dataset_name": "d",
                         **(root or {})})
        if no_attr:
            del h5.attrs[no_attr]
        dims = h5.create_group("dimensions")
        dims.attrs["spatial_dims"] = ["x", "y"]
        dims["time"] = np.linspace(0, 1, T) if time is None else time
        dims["x"] = np.linspace(0, 1, NX, endpoint=False) if x is None else x
        dims["y"] = np.linspace(0, 1, NY, endpoint=False)
        if x is not None and np.ndim(x) == 2:
            dims["x"].attrs["sample_varying"] = True
        for k, axes in (("xbc", ["x"]), ("ybc", ["y"])):
            h5[f"boundary_conditions/{k}/mask"] = np.zeros(3, bool)
            h5[f"boundary_conditions/{k}"].attrs.update(bc_type=bc, associated_dims=axes)
        h5.create_group("t0_fields").attrs["field_names"] = ["rho"]
        h5["t0_fields/rho"] = RNG.standard_normal((N, T, NX, NY)).astype(np.float32)
        h5.create_group("t1_fields").attrs["field_names"] = ["velocity"]
        h5["t1_fields/velocity"] = RNG.standard_normal(velocity or (N, T, NX, NY, 2)).astype(np.float32)
        h5.create_group("t2_fields").attrs["field_names"] = []
        for key in ("t0_fields/rho", "t1_fields/velocity"):
            h5[key].attrs.update(time_varying=not all_constant, sample_varying=True, dim_varying=[True, True])
        if nan:
            h5["t1_fields/velocity"][1, 2, 3, 4, 1] = np.nan
        if drop:
            del h5[drop]
    return path


def text(path, content=""):
    path.write_text(content)
    return path


P, W, S = ["--from", "pdebench"], ["--from", "the-well"], ["--series"]

# (name, make(tmp) -> the arguments after `petrov import` (no -o), fragments the one line must hold)
CASES = [
    ("empty file", lambda d: P + [str(text(d / "e.h5"))], ["e.h5", "not an HDF5 file"]),
    ("text file", lambda d: P + [str(text(d / "t.hdf5", "x,y\n1,2\n"))], ["t.hdf5", "not an HDF5 file"]),
    ("empty HDF5", lambda d: P + [str(groups(d / "n.h5", n=0))], ["n.h5", "not a PDEBench time series", "nothing"]),
    ("unknown keys", lambda d: P + [str(cfd(d / "u.h5", drop=("density",)))], ["u.h5", "not a PDEBench", "Vx"]),
    ("missing pressure", lambda d: P + [str(cfd(d / "p.h5", drop=("pressure",)))], ["p.h5", "'pressure'"]),
    ("missing t-coordinate", lambda d: P + [str(cfd(d / "t.h5", drop=("t-coordinate",)))], ["t.h5", "'t-coordinate'"]),
    ("field with another time length", lambda d: P + [str(_other_time(cfd(d / "o.h5")))],
     ["o.h5:Vy", "4 states (the time length)", "o.h5:Vx"]),
    ("non-uniform x", lambda d: P + [str(cfd(d / "x.h5", x_coordinate=np.sort(RNG.random(NX))))],
     ["x.h5:x-coordinate", "not uniformly spaced"]),
    ("non-uniform t", lambda d: P + [str(cfd(d / "s.h5", t_coordinate=np.r_[0, 0.1, 0.5, 0.6, 0.9, 1.0]))],
     ["s.h5:t-coordinate", "not equally spaced in time"]),
    ("wrong x length", lambda d: P + [str(cfd(d / "l.h5", x_coordinate=np.linspace(0, 1, NX + 1)))],
     ["l.h5:x-coordinate", f"expected {NX} values"]),
    ("NaN", lambda d: P + [str(cfd(d / "nan.h5", bad=("density", 2)))], ["nan.h5:density", "'density'", "sample 2"]),
    ("Inf", lambda d: P + [str(cfd(d / "inf.h5", bad=("Vx", 1)))], ["inf.h5:Vx", "'Vx'", "sample 1"]),
    ("3-D flow", lambda d: P + [str(_add(cfd(d / "z.h5"), "Vz"))], ["z.h5", "3-D", "1-D and 2-D"]),
    ("no periodicity", lambda d: P + [str(cfd(d / "b.h5", periodic=False))], ["b.h5", "--grid"]),
    ("one state", lambda d: P + [str(cfd(d / "one.h5", t=1))], ["one.h5:t-coordinate", "1 state", "at least 2"]),
    ("group without data", lambda d: P + [str(groups(d / "g.h5", drop="0001/data")), "--grid", "nodes"],
     ["g.h5", "'0001'", "'data'"]),
    ("groups of two shapes", lambda d: P + [str(groups(d / "h.h5", shapes={2: (T, NX, NY + 1, 2)})), "--grid", "nodes"],
     ["h.h5", "'0002'", "one shape"]),
    ("group without grid/t", lambda d: P + [str(groups(d / "k.h5", drop="0000/grid/t")), "--grid", "nodes"],
     ["k.h5", "'0000/grid/t'"]),
    ("times unlike states", lambda d: P + [str(groups(d / "m.h5", t_len=T + 3)), "--grid", "nodes"],
     ["m.h5:0000/grid/t", f"expected {T} times"]),
    ("group data of rank 2", lambda d: P + [str(groups(d / "r.h5", shapes={i: (T, NX) for i in range(N)}))],
     ["r.h5", "expected (T, X, C) or (T, X, Y, C)"]),
    ("unknown --from", lambda d: ["--from", "pdebnch", str(cfd(d / "q.h5"))], ["pdebnch", "pdebench, the-well"]),
    ("missing file", lambda d: P + [str(d / "absent.hdf5")], ["absent.hdf5", "no such file"]),
    ("wrong field count", lambda d: P + [str(cfd(d / "f.h5")), "--fields", "a", "b"], ["f.h5", "2 names", "4 fields"]),
    ("well: no dimensions", lambda d: W + [str(well(d / "w1.h5", drop="dimensions"))], ["w1.h5", "dimensions"]),
    ("well: no n_spatial_dims", lambda d: W + [str(well(d / "w2.h5", no_attr="n_spatial_dims"))],
     ["w2.h5", "'n_spatial_dims'"]),
    ("well: 3-D", lambda d: W + [str(well(d / "w3.h5", root={"n_spatial_dims": 3}))], ["w3.h5", "1-D and 2-D"]),
    ("well: spherical", lambda d: W + [str(well(d / "w4.h5", root={"grid_type": "spherical"}))], ["w4.h5", "Cartesian"]),
    ("well: other time length", lambda d: W + [str(well(d / "w5.h5", velocity=(N, T - 1, NX, NY, 2)))],
     ["w5.h5:t1_fields/velocity", "4 states", "w5.h5:t0_fields/rho"]),
    ("well: 3 components", lambda d: W + [str(well(d / "w6.h5", velocity=(N, T, NX, NY, 3)))],
     ["w6.h5", "t1_fields/velocity", "expected (n_trajectories"]),
    ("well: unknown bc_type", lambda d: W + [str(well(d / "w7.h5", bc="SLIP"))], ["w7.h5", "'SLIP'", "PERIODIC"]),
    ("well: n_trajectories off", lambda d: W + [str(well(d / "w8.h5", root={"n_trajectories": N + 1}))],
     ["w8.h5", "t0_fields/rho", "n_trajectories = 4"]),
    ("well: no time-varying field", lambda d: W + [str(well(d / "w9.h5", all_constant=True))],
     ["w9.h5", "no field varying in time"]),
    ("well: sample-varying grid", lambda d: W + [str(well(d / "wa.h5", x=np.tile(np.linspace(0, 1, NX), (N, 1))))],
     ["wa.h5", "dimensions/x", "varies between samples"]),
    ("well: uneven times", lambda d: W + [str(well(d / "wb.h5", time=np.r_[0, 0.1, 0.3, 0.4, 0.5]))],
     ["wb.h5:dimensions/time", "not equally spaced"]),
    ("well: listed field missing", lambda d: W + [str(well(d / "wc.h5", drop="t0_fields/rho"))],
     ["wc.h5", "t0_fields/rho"]),
    ("well: NaN", lambda d: W + [str(well(d / "wd.h5", nan=True))], ["wd.h5:t1_fields/velocity", "'velocity_y'", "sample 1"]),
    ("well: no boundary_conditions", lambda d: W + [str(well(d / "we.h5", drop="boundary_conditions"))],
     ["we.h5", "boundary_conditions", "--grid"]),
    ("axes without T", lambda d: S + [_npy(d), "--axes", "NXYC", "--grid", "periodic"], ["a.npy", "needs one T"]),
    ("axes repeating", lambda d: S + [_npy(d), "--axes", "NTTY", "--grid", "periodic"], ["a.npy", "a letter repeats"]),
    ("axes of another rank", lambda d: S + [_npy(d), "--axes", "NTXYC", "--grid", "periodic"],
     ["a.npy", "5 letters for an array with 4 axes"]),
    ("axes with Z", lambda d: S + [_npy(d), "--axes", "NTXZ", "--grid", "periodic"], ["a.npy", "unknown letters ['Z']"]),
    ("three grids for two axes", lambda d: S + [_npy(d), "--axes", "NTXY", "--grid", "periodic", "nodes", "nodes"],
     ["grid must be one of", "one per grid axis (2)"]),
    ("arrays of other sample counts", lambda d: S + [_npy(d), _npy(d, "b.npy", n=N + 1), "--axes", "NTXY", "--grid",
                                                     "periodic"], ["b.npy", "4 samples", "a.npy"]),
    ("pattern on a file without groups", lambda d: S + [f"{cfd(d / 'c.h5')}:*/data", "--axes", "TXY", "--grid",
                                                        "nodes"], ["c.h5", "no groups"]),
    ("series without --axes", lambda d: S + [_npy(d), "--grid", "periodic"], ["--series needs --axes"]),
]


def _npy(d, name="a.npy", n=N):
    np.save(d / name, RNG.standard_normal((n, T, NX, NY)).astype(np.float32))
    return str(d / name)


def _other_time(path):
    with h5py.File(path, "r+") as h5:
        del h5["Vy"]
        h5["Vy"] = RNG.standard_normal((N, T - 1, NX, NY)).astype(np.float32)
    return path


def _add(path, key):
    with h5py.File(path, "r+") as h5:
        h5[key] = h5["Vx"][...]
    return path


@pytest.mark.parametrize("name, make, fragments", CASES, ids=[c[0] for c in CASES])
def test_a_malformed_source_is_one_line_and_leaves_nothing(tmp_path, capsys, name, make, fragments):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    args = make(src)
    before = sorted(p.name for p in src.iterdir())
    code = cli_main(["import", *args, "-o", str(out / "ts.h5"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()  # a usage error (code 2) adds a line pointing to --help
    assert (code == 1 and len(lines) == 1) or (code == 2 and lines[0].startswith("petrov import: error")), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert not out.exists() or not any(out.iterdir())  # nothing half-written, no temporary file
    assert sorted(p.name for p in src.iterdir()) == before  # the sources untouched, nothing beside them


def test_the_sweep_has_at_least_thirty_cases():
    assert len(CASES) >= 30
