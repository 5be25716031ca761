"""Loading at strided resolutions, indices, the inverse-Darcy pooled target, and bad files."""
import shutil

import h5py
import numpy as np
import pytest
import torch

from petrov.datasets import average_pool, generate_dataset, open_dataset
from petrov.datasets.sampling import allowed_resolutions, stride_for
from petrov.datasets.hdf5_files import partial_path
from petrov.grids.layout import grid_coordinates


@pytest.fixture(scope="module")
def burgers_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("burgers") / "b.h5"
    return generate_dataset("burgers", path, 6, 64, seed=4, progress=False)


@pytest.fixture(scope="module")
def darcy_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("darcy") / "d.h5"
    return generate_dataset("darcy", path, 5, 17, seed=1, progress=False)


def test_burgers_subsampling_keeps_values_and_coordinates_at_shared_points(burgers_file):
    full = open_dataset(burgers_file)
    coarse = open_dataset(burgers_file, resolution=16)
    assert full.x.shape == (6, 64, 1) and coarse.x.shape == (6, 16, 1) and coarse.y.shape == (6, 16, 1)
    assert full.periodic and coarse.resolution == 16 and coarse.native_resolution == 64
    torch.testing.assert_close(coarse.x, full.x[:, ::4], rtol=0, atol=0)
    torch.testing.assert_close(coarse.y, full.y[:, ::4], rtol=0, atol=0)
    torch.testing.assert_close(coarse.coords, full.coords[::4], rtol=0, atol=0)
    torch.testing.assert_close(coarse.coords, grid_coordinates((16,), periodic=True))
    assert coarse.coords[-1, 0] < 1.0  # periodic grid: the point 1 is the point 0


def test_darcy_subsampling_keeps_values_and_coordinates_at_shared_points(darcy_file):
    full = open_dataset(darcy_file)
    mid = open_dataset(darcy_file, resolution=9)
    low = open_dataset(darcy_file, resolution=5)
    assert full.x.shape == (5, 17, 17, 1) and mid.y.shape == (5, 9, 9, 1) and not full.periodic
    for ds, s in ((mid, 2), (low, 4)):
        torch.testing.assert_close(ds.x, full.x[:, ::s, ::s], rtol=0, atol=0)
        torch.testing.assert_close(ds.y, full.y[:, ::s, ::s], rtol=0, atol=0)
        torch.testing.assert_close(ds.coords, full.coords[::s, ::s], rtol=0, atol=0)
    assert low.coords[-1, -1].tolist() == [1.0, 1.0]  # node grid keeps both boundaries
    assert (low.y[:, 0] == 0).all() and (low.y[:, -1] == 0).all()


@pytest.mark.parametrize("resolution, allowed", [(48, "2, 4, 8, 16, 32, 64"), (3, "2, 4"), (128, "64")])
def test_burgers_impossible_resolution_lists_allowed(burgers_file, resolution, allowed):
    with pytest.raises(ValueError, match=f"resolution {resolution} .*allowed resolutions: .*{allowed}"):
        open_dataset(burgers_file, resolution=resolution)


def test_darcy_impossible_resolution_lists_allowed(darcy_file):
    with pytest.raises(ValueError, match=r"resolution 8 .*resolution - 1 must divide 16.*2, 3, 5, 9, 17"):
        open_dataset(darcy_file, resolution=8)


def test_indices_select_and_order_samples(burgers_file):
    full = open_dataset(burgers_file)
    for indices, expect in [
        (slice(-2, None), [4, 5]),
        (range(1, 4), [1, 2, 3]),
        (np.array([5, 0, 5, 2]), [5, 0, 5, 2]),  # any order, repeats allowed
        (torch.tensor([3]), [3]),
        ([-1], [5]),
    ]:
        ds = open_dataset(burgers_file, indices=indices, resolution=32)
        assert ds.indices.tolist() == expect and len(ds) == len(expect)
        torch.testing.assert_close(ds.x, full.x[expect][:, ::2], rtol=0, atol=0)
        x0, y0 = ds[0]
        assert x0.shape == (32, 1) and torch.equal(y0, ds.y[0])
    with pytest.raises(IndexError, match="index 6 out of range for a dataset of 6"):
        open_dataset(burgers_file, indices=[0, 6])


def test_dtype(burgers_file):
    assert open_dataset(burgers_file, dtype=torch.float64).x.dtype == torch.float64
    assert open_dataset(burgers_file).x.dtype == torch.float32


@pytest.mark.parametrize("lazy", [False, True])
def test_dtype_must_be_floating(burgers_file, lazy):
    with pytest.raises(ValueError, match="dtype must be a floating torch.dtype .*got torch.int32"):
        open_dataset(burgers_file, dtype=torch.int32, lazy=lazy)  # would truncate the data
    with pytest.raises(TypeError, match="dtype must be a floating torch.dtype .*got str 'float32'"):
        open_dataset(burgers_file, dtype="float32", lazy=lazy)


def test_an_empty_selection_is_an_error(burgers_file):
    with pytest.raises(ValueError, match="indices 3:1 select no samples"):
        open_dataset(burgers_file, indices=slice(3, 1))


def test_stride_rules_need_a_native_grid_of_at_least_2_points():
    with pytest.raises(ValueError, match="native .* must be an integer >= 2, got 0"):
        stride_for(0, 4, True)  # was a zero stride
    with pytest.raises(ValueError, match="native .* must be an integer >= 2, got -5"):
        allowed_resolutions(-5, False)  # was []


def test_a_file_of_a_newer_format_is_refused(burgers_file, tmp_path):
    copy = tmp_path / "future.h5"
    shutil.copy(burgers_file, copy)
    with h5py.File(copy, "r+") as h5:
        h5.attrs["format_version"] = 99
    with pytest.raises(ValueError, match="format_version 99: it was written by a newer petrov"):
        open_dataset(copy)


def pooled_reference(a: np.ndarray, coarse: int) -> np.ndarray:
    """Plain loops: coarse node j averages the fine nodes j*k - (k-1)//2 ... j*k - (k-1)//2 + k - 1 that exist."""
    n = a.shape[-1]
    k = (n - 1) // (coarse - 1)
    out = np.zeros(a.shape[:-2] + (coarse, coarse))
    for i in range(coarse):
        for j in range(coarse):
            rows = [r for r in range(i * k - (k - 1) // 2, i * k - (k - 1) // 2 + k) if 0 <= r < n]
            cols = [c for c in range(j * k - (k - 1) // 2, j * k - (k - 1) // 2 + k) if 0 <= c < n]
            out[..., i, j] = a[..., rows, :][..., cols].mean(axis=(-2, -1))
    return out


@pytest.mark.parametrize("fine, coarse", [(17, 5), (17, 9), (13, 4), (9, 9), (141, 36)])
def test_average_pool_matches_plain_block_means(fine, coarse):
    a = np.random.default_rng(0).standard_normal((2, fine, fine))
    np.testing.assert_allclose(average_pool(a, coarse), pooled_reference(a, coarse), rtol=1e-12)


def test_average_pool_of_constant_is_constant_and_rejects_bad_grids():
    np.testing.assert_allclose(average_pool(np.full((1, 141, 141), 3.0), 71), 3.0)
    with pytest.raises(ValueError, match="coarse_resolution 6 .*must divide 16"):
        average_pool(np.zeros((1, 17, 17)), 6)


def test_darcy_inverse_view_of_a_darcy_file(darcy_file):
    fwd = open_dataset(darcy_file, resolution=9)
    inv = open_dataset(darcy_file, resolution=9, kind="darcy-inverse", coarse_resolution=3)
    assert inv.kind == "darcy-inverse" and inv.x.shape == (5, 9, 9, 1) and inv.y.shape == (5, 3, 3, 1)
    torch.testing.assert_close(inv.x, fwd.y, rtol=0, atol=0)  # input: u at the fine grid
    expect = pooled_reference(fwd.x[..., 0].double().numpy(), 3)
    np.testing.assert_allclose(inv.y[..., 0].numpy(), expect, rtol=1e-6)
    torch.testing.assert_close(inv.coords_out, grid_coordinates((3, 3)))
    assert inv.coarse_resolution == 3 and inv.noise == 0.0
    with pytest.raises(ValueError, match="coarse_resolution 4"):
        open_dataset(darcy_file, resolution=9, kind="darcy-inverse", coarse_resolution=4)
    with pytest.raises(ValueError, match="applies to 'darcy-inverse' only"):
        open_dataset(darcy_file, coarse_resolution=3)


def test_darcy_inverse_file_records_its_defaults(tmp_path):
    path = generate_dataset("darcy-inverse", tmp_path / "inv.h5", 2, 17, progress=False,
                            coarse_resolution=5, noise=0.01)
    ds = open_dataset(path)
    assert ds.kind == "darcy-inverse" and ds.y.shape == (2, 5, 5, 1) and ds.noise == 0.01
    assert open_dataset(path, resolution=9).y.shape == (2, 5, 5, 1)  # 9 -> 5 pools by 2


def test_kind_override_must_be_same_family(burgers_file):
    with pytest.raises(ValueError, match="cannot be loaded as 'darcy-inverse'"):
        open_dataset(burgers_file, kind="darcy-inverse")


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such dataset file"):
        open_dataset(tmp_path / "missing.h5")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\x89HDF garbage" * 10)
    with pytest.raises(ValueError, match="not a readable HDF5 file"):
        open_dataset(bad)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as h5:
        h5["x"] = np.zeros((2, 8))
    with pytest.raises(ValueError, match="not a petrov dataset"):
        open_dataset(other)


def test_truncated_file_is_an_error(burgers_file, tmp_path):
    cut = tmp_path / "cut.h5"
    cut.write_bytes(burgers_file.read_bytes()[:2000])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        open_dataset(cut)


def test_nan_in_data_is_an_error_naming_the_sample(burgers_file, tmp_path):
    copy = tmp_path / "nan.h5"
    shutil.copy(burgers_file, copy)
    with h5py.File(copy, "r+") as h5:
        h5["y"][3, 10] = np.nan
    open_dataset(copy, indices=[0, 1, 2])  # the damaged sample is not read
    with pytest.raises(ValueError, match="'y' contains NaN or inf in sample 3"):
        open_dataset(copy)


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_inf_in_data_is_an_error_naming_field_and_sample(burgers_file, tmp_path, value):
    copy = tmp_path / "inf.h5"
    shutil.copy(burgers_file, copy)
    with h5py.File(copy, "r+") as h5:
        h5["y"][4, 0] = value  # point 0 is on every strided grid
    with pytest.raises(ValueError, match=r"inf.h5: field 'y' contains NaN or inf in sample 4"):
        open_dataset(copy, resolution=32)


def test_incomplete_file_loads_complete_samples_with_a_warning(tmp_path):
    out = tmp_path / "b.h5"

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_dataset("burgers", out, 4, 64, chunk_size=2, progress=False, callback=stop)
    with pytest.warns(UserWarning, match="incomplete \\(2 of 4"):
        ds = open_dataset(partial_path(out))
    assert len(ds) == 2
