"""FNO .mat readers: v5 (scipy) and v7.3 (HDF5, transposed) fakes give the same arrays and datasets."""
import numpy as np
import pytest
import torch

from petrov.cli import main
from petrov.datasets import dataset_info, open_dataset, read_mat
from petrov.datasets.fno_files import mat_format

RNG = np.random.default_rng(0)
BURGERS = {"a": RNG.standard_normal((3, 32)), "u": RNG.standard_normal((3, 32))}
DARCY = {"coeff": RNG.choice([3.0, 12.0], size=(4, 9, 9)), "sol": RNG.standard_normal((4, 9, 9))}
# NavierStokes_V1e-5_N1200_T20.mat's layout: a = w0 (N, 64, 64), u = w at t = 1..T (N, 64, 64, T), t (1, T)
NS = {"a": RNG.standard_normal((3, 8, 8)), "u": RNG.standard_normal((3, 8, 8, 5)), "t": np.arange(1.0, 6.0)[None]}


@pytest.mark.parametrize("arrays", [BURGERS, DARCY, NS], ids=["burgers", "darcy", "navier-stokes"])
def test_both_formats_read_the_matlab_arrays(tmp_path, arrays, mat_writers):
    write_v5, write_v73 = mat_writers
    v5 = write_v5(tmp_path / "v5.mat", arrays)
    v73 = write_v73(tmp_path / "v73.mat", arrays)
    assert mat_format(v5) == "v5" and mat_format(v73) == "v7.3"
    fields = {k: v for k, v in arrays.items() if k != "t"}
    for path in (v5, v73):
        got = read_mat(path)
        assert got.keys() == fields.keys()
        for key, value in fields.items():
            np.testing.assert_array_equal(got[key], value.astype(np.float32))


def test_burgers_mat_as_dataset_at_lower_resolution(tmp_path, mat_writers):
    write_v5, write_v73 = mat_writers
    for path in (write_v5(tmp_path / "v5.mat", BURGERS), write_v73(tmp_path / "v73.mat", BURGERS)):
        ds = open_dataset(path, resolution=8, indices=[2, 0])
        assert ds.kind == "burgers" and ds.periodic and ds.native_resolution == 32
        assert ds.x.shape == (2, 8, 1)
        expect_x = torch.tensor(BURGERS["a"][[2, 0], ::4, None], dtype=torch.float32)
        expect_y = torch.tensor(BURGERS["u"][[2, 0], ::4, None], dtype=torch.float32)
        torch.testing.assert_close(ds.x, expect_x, rtol=0, atol=0)
        torch.testing.assert_close(ds.y, expect_y, rtol=0, atol=0)


def test_darcy_mat_as_forward_and_inverse_dataset(tmp_path, mat_writers):
    write_v5, write_v73 = mat_writers
    for path in (write_v5(tmp_path / "v5.mat", DARCY), write_v73(tmp_path / "v73.mat", DARCY)):
        ds = open_dataset(path, resolution=5)
        assert ds.kind == "darcy" and not ds.periodic and ds.x.shape == (4, 5, 5, 1)
        torch.testing.assert_close(ds.x[..., 0], torch.tensor(DARCY["coeff"][:, ::2, ::2], dtype=torch.float32))
        torch.testing.assert_close(ds.y[..., 0], torch.tensor(DARCY["sol"][:, ::2, ::2], dtype=torch.float32))
        inv = open_dataset(path, kind="darcy-inverse", coarse_resolution=3)
        torch.testing.assert_close(inv.x[..., 0], torch.tensor(DARCY["sol"], dtype=torch.float32))
        assert inv.y.shape == (4, 3, 3, 1)


def test_navier_stokes_mat_as_a_trajectory_dataset_read_by_sample(tmp_path, mat_writers):
    """x = a, y = [a, u] along time (y[..., k] = w(t = k)), strided; a lazy dataset reads one sample at a time."""
    write_v5, write_v73 = mat_writers
    expect_y = np.concatenate([NS["a"][..., None], NS["u"]], axis=-1).astype(np.float32)
    for path in (write_v5(tmp_path / "v5.mat", NS), write_v73(tmp_path / "v73.mat", NS)):
        ds = open_dataset(path, resolution=4, indices=[2, 0])
        assert ds.kind == "navier-stokes" and ds.periodic and ds.native_resolution == 8
        assert ds.x.shape == (2, 4, 4, 1) and ds.y.shape == (2, 4, 4, 6)
        np.testing.assert_array_equal(ds.x[..., 0].numpy(), NS["a"][[2, 0], ::2, ::2].astype(np.float32))
        np.testing.assert_array_equal(ds.y.numpy(), expect_y[[2, 0], ::2, ::2])
        lazy = open_dataset(path, lazy=True, indices=[1])
        np.testing.assert_array_equal(lazy[0][1].numpy(), expect_y[1])
        assert dataset_info(path)["y_shape"] == (3, 8, 8, 6)


def test_import_fno_writes_a_petrov_file_of_the_files_kind(tmp_path, mat_writers, capsys):
    write_v5, write_v73 = mat_writers
    for name, arrays, kind in (("ns", NS, "navier-stokes"), ("darcy", DARCY, "darcy")):
        for writer in (write_v5, write_v73):
            source = writer(tmp_path / f"{name}-{writer.__name__}.mat", arrays)
            out = tmp_path / f"{name}-{writer.__name__}.h5"
            assert main(["import", "--fno", str(source), "-o", str(out), "--no-progress"]) == 0
            got, want = open_dataset(out), open_dataset(source)
            assert got.kind == kind and got.periodic == want.periodic
            torch.testing.assert_close(got.x, want.x, rtol=0, atol=0)
            torch.testing.assert_close(got.y, want.y, rtol=0, atol=0)
    capsys.readouterr()
    assert main(["import", "--fno", str(source), "--grid", "nodes", "-o", str(tmp_path / "x.h5")]) == 2
    assert "--grid applies to grid arrays, not to an --fno file" in capsys.readouterr().err


def test_missing_keys_are_named(tmp_path, mat_writers):
    write_v5, write_v73 = mat_writers
    for writer in (write_v5, write_v73):
        path = writer(tmp_path / f"{writer.__name__}.mat", {"a": BURGERS["a"], "v": BURGERS["u"]})
        with pytest.raises(KeyError, match=r"holds variables \['a', 'v'\].*'coeff' and 'sol'"):
            open_dataset(path)


def test_bad_mat_files(tmp_path, mat_writers):
    write_v5, write_v73 = mat_writers
    with pytest.raises(FileNotFoundError, match="no such .mat file"):
        open_dataset(tmp_path / "missing.mat")
    junk = tmp_path / "junk.mat"
    junk.write_bytes(b"MATLAB? no" * 20)
    with pytest.raises(ValueError, match="neither a MATLAB v5 nor a v7.3"):
        open_dataset(junk)
    good = write_v5(tmp_path / "good.mat", BURGERS).read_bytes()
    cut = tmp_path / "cut.mat"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        open_dataset(cut)
    odd = write_v5(tmp_path / "odd.mat", {"a": BURGERS["a"], "u": BURGERS["u"][:, :16]})
    with pytest.raises(ValueError, match="equal shape"):
        open_dataset(odd)
    odd_ns = write_v73(tmp_path / "odd_ns.mat", {"a": NS["a"][:, :, :4], "u": NS["u"]})
    with pytest.raises(ValueError, match=r"expected arrays of shapes \(samples, n x n\) and \(samples, n x n x T\)"):
        open_dataset(odd_ns)
