"""``petrov import``: a user's arrays from each source format become a dataset that round-trips, loads
strided and trains; every bad input is a clear error and leaves no file behind."""
import json
import math

import h5py
import numpy as np
import pytest
import torch

from petrov.datasets import dataset_info, fit_normalizer, import_arrays, open_dataset
from petrov.cli import main as cli_main
from petrov.train.config import config_from_dict
from petrov.train.trainer import train

RNG = np.random.default_rng(0)
N = 8
# 1-D periodic, one channel; 2-D node grid, two input channels (coefficient, forcing) and a vector field out
X1, Y1 = RNG.standard_normal((N, 16)), RNG.standard_normal((N, 16))
X2, Y2 = RNG.standard_normal((N, 9, 9, 2)), RNG.standard_normal((N, 9, 9, 2))


def stored(path):
    with h5py.File(path, "r") as h5:
        return h5["x"][...], h5["y"][...], dict(h5.attrs)


# Each case: write the source, return (x spec, y spec, import options, expected x, expected y) with the
# expected arrays in the stored order (n, *grid, c).
def npy_case(tmp_path, mat_writers):
    np.save(tmp_path / "in.npy", X1)
    np.save(tmp_path / "out.npy", Y1)
    return tmp_path / "in.npy", str(tmp_path / "out.npy"), {"grid": "periodic"}, X1[..., None], Y1[..., None]


def npz_samples_last_case(tmp_path, mat_writers):
    np.savez(tmp_path / "d.npz", a=X1.T, u=Y1.T)  # (points, samples)
    opts = {"grid": "periodic", "x_axes": "XN"}
    return f"{tmp_path}/d.npz:a", f"{tmp_path}/d.npz:u", opts, X1[..., None], Y1[..., None]


def hdf5_pdebench_case(tmp_path, mat_writers):
    with h5py.File(tmp_path / "pde.h5", "w") as h5:  # PDEBench-style: nu (N, X, Y), tensor (N, 1, X, Y)
        h5["nu"] = X2[..., 0]
        h5.create_group("sol")["tensor"] = Y2[..., :1].transpose(0, 3, 1, 2)
    opts = {"grid": "nodes", "x_axes": "NXY", "y_axes": "NCXY", "domain": (0.0, 2.0)}
    return f"{tmp_path}/pde.h5:nu", (tmp_path / "pde.h5", "sol/tensor"), opts, X2[..., :1], Y2[..., :1]


def mat_v5_case(tmp_path, mat_writers):
    mat_writers[0](tmp_path / "v5.mat", {"coef": X2, "vel": Y2.transpose(0, 3, 1, 2)})
    opts = {"grid": "nodes", "x_axes": "NXYC", "y_axes": "NCXY"}
    return f"{tmp_path}/v5.mat:coef", f"{tmp_path}/v5.mat:vel", opts, X2, Y2


def mat_v73_case(tmp_path, mat_writers):
    # same MATLAB arrays and axes as v5: the reader undoes the v7.3 reversal
    mat_writers[1](tmp_path / "v73.mat", {"coef": X2, "vel": Y2.transpose(0, 3, 1, 2)})
    opts = {"grid": "nodes", "x_axes": "NXYC", "y_axes": "NCXY"}
    return f"{tmp_path}/v73.mat:coef", f"{tmp_path}/v73.mat:vel", opts, X2, Y2


CASES = [npy_case, npz_samples_last_case, hdf5_pdebench_case, mat_v5_case, mat_v73_case]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__[:-5])
def test_import_round_trips_and_loads_strided(tmp_path, mat_writers, case):
    xs, ys, opts, x_ref, y_ref = case(tmp_path, mat_writers)
    out = import_arrays(tmp_path / "data.h5", xs, ys, chunk_size=3, **opts)
    x, y, attrs = stored(out)
    np.testing.assert_array_equal(x, x_ref.astype(np.float32))
    np.testing.assert_array_equal(y, y_ref.astype(np.float32))
    dim = x_ref.ndim - 2
    assert attrs["kind"] == "imported" and attrs["grid"] == opts["grid"] and attrs["dim"] == dim
    assert attrs["n_complete"] == attrs["n_samples"] == N and attrs["native_resolution"] == x_ref.shape[1]
    assert (attrs["x_channels"], attrs["y_channels"]) == (x_ref.shape[-1], y_ref.shape[-1])
    assert json.loads(attrs["domain"]) == [list(opts.get("domain", (0.0, 1.0)))] * dim
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left
    # strided loading: every second point (periodic 16 -> 8, nodes 9 -> 5), samples in any order
    res = 8 if opts["grid"] == "periodic" else 5
    ds = open_dataset(out, resolution=res, indices=[5, 1])
    sel = (np.array([5, 1]),) + (slice(None, None, 2),) * dim
    torch.testing.assert_close(ds.x, torch.tensor(x_ref[sel], dtype=torch.float32), rtol=0, atol=0)
    torch.testing.assert_close(ds.y, torch.tensor(y_ref[sel], dtype=torch.float32), rtol=0, atol=0)
    assert ds.periodic == (opts["grid"] == "periodic") and ds.coords.shape == (res,) * dim + (dim,)
    info = dataset_info(out)
    assert info["x_shape"] == x_ref.shape and info["y_shape"] == y_ref.shape


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__[:-5])
def test_imported_file_trains_one_epoch_and_evaluates_strided(tmp_path, mat_writers, case):
    torch.set_num_threads(1)
    xs, ys, opts, x_ref, y_ref = case(tmp_path, mat_writers)
    out = import_arrays(tmp_path / "data.h5", xs, ys, **opts)
    dim, periodic = x_ref.ndim - 2, opts["grid"] == "periodic"
    coarse = 8 if periodic else 5
    cfg = config_from_dict({
        "data": {"path": str(out), "n_train": 4, "n_val": 2, "n_test": 2, "train_resolution": coarse,
                 "eval_resolutions": [coarse, x_ref.shape[1]]},
        "model": {"name": f"fno{dim}d", "options": {
            "in_channels": x_ref.shape[-1], "out_channels": y_ref.shape[-1], "width": 4, "modes": 2,
            "n_layers": 1, "proj_hidden": 8, "periodic": periodic}},
        "optim": {"epochs": 1, "batch_size": 2},
        "run": {"device": "cpu", "progress": False},
    })
    result = train(cfg, tmp_path / "run")
    assert result.epochs_completed == 1 and math.isfinite(result.best_val_rel_l2)
    assert [row["resolution"] for row in result.test] == [coarse, x_ref.shape[1]]
    assert all(row["n"] == 2 and math.isfinite(row["mean"]) for row in result.test)


def test_normalizer_statistics_are_per_point_and_channel(tmp_path, mat_writers):
    xs, ys, opts, x_ref, _ = mat_v5_case(tmp_path, mat_writers)
    out = import_arrays(tmp_path / "data.h5", xs, ys, **opts)
    norm = fit_normalizer(out, "x", indices=range(5))
    ref = x_ref[:5].astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(norm.mean.numpy(), ref.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(norm.std.numpy(), ref.std(0, ddof=1), rtol=1e-5)
    assert norm.at_resolution(5).mean.shape == (5, 5, 2)


class SliceRecorder:
    """An array-like that records how many samples each read asks for (samples on axis 0)."""

    def __init__(self, array):
        self.array, self.shape, self.dtype, self.ndim = array, array.shape, array.dtype, array.ndim
        self.reads = []

    def __getitem__(self, index):
        self.reads.append(len(range(*index[0].indices(self.shape[0]))))
        return self.array[index]


def test_sources_are_read_a_chunk_at_a_time(tmp_path):
    x, y = SliceRecorder(X1), SliceRecorder(Y1)
    out = import_arrays(tmp_path / "a.h5", x, y, grid="periodic", chunk_size=3)
    assert x.reads == y.reads == [3, 3, 2]
    whole = import_arrays(tmp_path / "b.h5", X1, Y1, grid="periodic")
    for a, b in zip(stored(out)[:2], stored(whole)[:2]):
        np.testing.assert_array_equal(a, b)


def test_existing_output_is_refused_unless_overwrite(tmp_path):
    out = import_arrays(tmp_path / "d.h5", X1, Y1, grid="periodic")
    with pytest.raises(FileExistsError, match="already exists.*overwrite"):
        import_arrays(out, X1, Y1, grid="periodic")
    import_arrays(out, 2 * X1, Y1, grid="periodic", overwrite=True)
    np.testing.assert_array_equal(stored(out)[0][..., 0], (2 * X1).astype(np.float32))


def test_bad_sample_midway_leaves_no_file(tmp_path):
    bad = X1.copy()
    bad[5, 3] = np.nan
    with pytest.raises(ValueError, match=r"x \(in-memory array\) has NaN/Inf .* sample 5 "):
        import_arrays(tmp_path / "d.h5", bad, Y1, grid="periodic", chunk_size=2)
    inf = Y1.copy()
    inf[2, 0] = np.inf
    with pytest.raises(ValueError, match=r"y \(in-memory array\) has NaN/Inf .* sample 2 "):
        import_arrays(tmp_path / "d.h5", X1, inf, grid="periodic")
    big = X1.copy()
    big[7, 0] = 1e300  # beyond float32
    with pytest.raises(ValueError, match="sample 7 "):
        import_arrays(tmp_path / "d.h5", big, Y1, grid="periodic")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("x, y, opts, message", [
    (X1, Y1[:7], {}, r"x \(in-memory array\) has 8 samples but y \(in-memory array\) has 7"),
    (X1, Y1[:, :8], {}, r"grid shapes differ: .* is 16, .* is 8"),
    (X2[..., 0], X2[..., 0, 0], {"y_axes": "NX"}, r"grid shapes differ"),
    (X2[:, :, :5, 0], X2[:, :, :5, 0], {}, r"the grid is 9 x 5; petrov's 2-D grids are square"),
    (X1[:, :3], Y1[:, :3], {}, r"3 points per axis; at least 4"),
    (X2, Y2, {}, r"x \(in-memory array\) has 4 axes; give its axis order"),
    (X1, Y1, {"x_axes": "NXY"}, r"axes 'NXY' for x .*: it has 3 letters for an array with 2 axes"),
    (X1, Y1, {"x_axes": "NN"}, r"a letter repeats; it needs exactly one N"),
    (X1, Y1, {"x_axes": "XY"}, r"it needs exactly one N"),
    (X1, Y1, {"x_axes": "NZ"}, r"unknown letters \['Z'\]"),
    (X2, Y2, {"x_axes": "NXCC"}, r"a letter repeats"),
    (X1, Y1, {"grid": "hexagons"}, r"grid must be one of \('periodic', 'nodes', 'cells'\)"),
    (X1 + 1j, Y1, {}, r"dtype complex128; only real numbers"),
    (X1, Y1, {"domain": (1.0, 0.0)}, r"hi > lo"),
    (X1, Y1, {"domain": [(0, 1), (0, 1)]}, r"one \(lo, hi\) per grid axis \(1\)"),
    (X1, Y1, {"domain": "abc"}, r"domain must be numbers: .*got 'abc'"),
])
def test_bad_arrays_are_named(tmp_path, x, y, opts, message):
    opts = {"grid": "periodic", **opts}
    with pytest.raises(ValueError, match=message):
        import_arrays(tmp_path / "d.h5", x, y, **opts)
    assert list(tmp_path.iterdir()) == []


def test_unknown_keys_list_the_keys_present(tmp_path, mat_writers):
    np.savez(tmp_path / "d.npz", a=X1, u=Y1)
    with pytest.raises(KeyError, match=r"d.npz has no array 'v'; arrays present: a, u"):
        import_arrays(tmp_path / "o.h5", f"{tmp_path}/d.npz:a", f"{tmp_path}/d.npz:v", grid="periodic")
    with pytest.raises(ValueError, match=r"holds several arrays; name one as .*d.npz:KEY \(arrays present: a, u\)"):
        import_arrays(tmp_path / "o.h5", tmp_path / "d.npz", f"{tmp_path}/d.npz:u", grid="periodic")
    with h5py.File(tmp_path / "p.h5", "w") as h5:
        h5.create_group("g")["u"] = Y1
        h5["a"] = X1
    with pytest.raises(KeyError, match=r"has no dataset 'u'; datasets present: a, g/u"):
        import_arrays(tmp_path / "o.h5", f"{tmp_path}/p.h5:a", f"{tmp_path}/p.h5:u", grid="periodic")
    for writer in mat_writers:
        path = writer(tmp_path / f"{writer.__name__}.mat", {"a": X1, "u": Y1})
        with pytest.raises(KeyError, match=r"has no (variable|dataset) 'sol'; \w+ present: a, u"):
            import_arrays(tmp_path / "o.h5", f"{path}:a", f"{path}:sol", grid="periodic")
    with pytest.raises(FileNotFoundError, match="x: no such file"):
        import_arrays(tmp_path / "o.h5", tmp_path / "none.npy", Y1, grid="periodic")
    (tmp_path / "junk.dat").write_bytes(b"not an array")
    with pytest.raises(ValueError, match="unknown format"):
        import_arrays(tmp_path / "o.h5", f"{tmp_path}/junk.dat", Y1, grid="periodic")
    assert not (tmp_path / "o.h5").exists()


def test_output_paths_are_checked(tmp_path):
    assert import_arrays(tmp_path / "no" / "d.h5", X1, Y1, grid="periodic").is_file()  # folders created
    with h5py.File(tmp_path / "src.h5", "w") as h5:
        h5["a"], h5["u"] = X1, Y1
    with pytest.raises(ValueError, match="is the source file of x"):
        import_arrays(tmp_path / "src.h5", f"{tmp_path}/src.h5:a", f"{tmp_path}/src.h5:u", grid="periodic",
                      overwrite=True)


def test_coordinates_give_the_domain_and_must_be_uniform(tmp_path):
    n = X1.shape[1]
    periodic_coords = 2 * np.pi * np.arange(n) / n
    out = import_arrays(tmp_path / "d.h5", X1, Y1, grid="periodic", coords=[periodic_coords])
    np.testing.assert_allclose(json.loads(stored(out)[2]["domain"]), [[0.0, 2 * np.pi]])
    nodes = np.linspace(-1.0, 1.0, n)
    out = import_arrays(tmp_path / "d.h5", X1, Y1, grid="nodes", coords=[nodes], domain=(-1, 1), overwrite=True)
    assert json.loads(stored(out)[2]["domain"]) == [[-1.0, 1.0]]
    with pytest.raises(ValueError, match=r"span .* but domain is .*\(check --grid"):
        import_arrays(tmp_path / "e.h5", X1, Y1, grid="periodic", coords=[nodes], domain=(-1, 1))
    with pytest.raises(ValueError, match="not uniformly spaced"):
        import_arrays(tmp_path / "e.h5", X1, Y1, grid="nodes", coords=[nodes**3])
    with pytest.raises(ValueError, match="expected 16 values"):
        import_arrays(tmp_path / "e.h5", X1, Y1, grid="nodes", coords=[nodes[:8]])
    with pytest.raises(ValueError, match="one 1-D coordinate array per grid axis"):
        import_arrays(tmp_path / "e.h5", X1, Y1, grid="nodes", coords=[nodes, nodes])
    assert not (tmp_path / "e.h5").exists()


def test_imported_kind_is_not_generated(tmp_path, capsys):
    from petrov.datasets import generate_dataset

    with pytest.raises(ValueError, match="not generated; write such a file with `petrov import`"):
        generate_dataset("imported", tmp_path / "g.h5", 2, 16)
    with pytest.raises(SystemExit):
        cli_main(["generate", "imported", "--n-samples", "2", "-o", str(tmp_path / "g.h5")])
    assert "invalid choice: 'imported'" in capsys.readouterr().err


def test_cli_import_then_info(tmp_path, capsys):
    np.savez(tmp_path / "d.npz", a=X2, u=Y2[..., 0])
    out = tmp_path / "d.h5"
    args = ["import", "--x", f"{tmp_path}/d.npz:a", "--y", f"{tmp_path}/d.npz:u", "--x-axes", "NXYC",
            "--y-axes", "NXY", "--grid", "nodes", "--domain", "0", "1", "0", "2", "-o", str(out), "--no-progress"]
    assert cli_main(args) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert json.loads(stored(out)[2]["domain"]) == [[0.0, 1.0], [0.0, 2.0]]
    assert cli_main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    for expected in ("kind:        imported", "8 of 8 (complete)", "(8, 9, 9, 2), (8, 9, 9, 1)",
                     "nodes, native resolution 9", "resolutions: 2, 3, 5, 9"):
        assert expected in text
    assert cli_main(args) == 1  # a runtime failure
    assert "already exists" in capsys.readouterr().err
    assert cli_main(args[:-3] + ["1", "-o", str(out), "--overwrite"]) == 2  # odd --domain values: usage
    assert "LO HI pairs" in capsys.readouterr().err


def test_an_empty_or_foreign_file_named_npy_is_said_to_be_so(tmp_path):
    (tmp_path / "empty.npy").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.npy is empty \(0 bytes\), not a .npy file"):
        import_arrays(tmp_path / "o.h5", tmp_path / "empty.npy", Y1, grid="periodic")
    (tmp_path / "text.npy").write_text("not numpy\n")
    with pytest.raises(ValueError, match=r"text.npy is not a .npy file") as caught:
        import_arrays(tmp_path / "o.h5", tmp_path / "text.npy", Y1, grid="periodic")
    assert "pickle" not in str(caught.value)
    assert not (tmp_path / "o.h5").exists()
