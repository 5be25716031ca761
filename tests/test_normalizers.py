"""Gaussian normalizers: exact round trip, fitted on the training split only, consistent across resolutions."""
import shutil

import h5py
import numpy as np
import pytest
import torch

from petrov.datasets import (
    PointwiseGaussianNormalizer,
    UnitGaussianNormalizer,
    add_noise,
    fit_normalizer,
    generate_dataset,
    open_dataset,
)
from petrov.datasets.normalizers import FieldNormalizer, _interpolate_nodes

TRAIN = range(0, 6)


@pytest.fixture(scope="module")
def burgers_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("norm") / "b.h5"
    return generate_dataset("burgers", path, 8, 64, seed=2, progress=False)


@pytest.fixture(scope="module")
def darcy_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("norm") / "d.h5"
    return generate_dataset("darcy", path, 6, 17, seed=3, progress=False)


def plain_stats(x: torch.Tensor):
    """Mean and unbiased std over the sample axis, written out."""
    x = x.double()
    mean = x.sum(0) / x.shape[0]
    std = (((x - mean) ** 2).sum(0) / (x.shape[0] - 1)).sqrt()
    return mean, std


def test_encode_decode_round_trip():
    gen = torch.Generator().manual_seed(0)
    data = torch.randn(5, 7, 3, 2, generator=gen, dtype=torch.float64) * 3 + 1
    norm = PointwiseGaussianNormalizer.fit(data)
    z = norm.encode(data.float())
    assert z.shape == data.shape
    torch.testing.assert_close(norm.decode(z), data.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(z.double().mean(0), torch.zeros(7, 3, 2, dtype=torch.float64), atol=1e-5, rtol=0)
    batch = torch.randn(2, 7, 3, 2, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(norm.decode(norm.encode(batch)), batch, rtol=1e-12, atol=1e-12)


def test_fit_streams_the_training_split_exactly(burgers_file):
    for field in ("x", "y"):
        norm = fit_normalizer(burgers_file, field, TRAIN, block=4)  # several blocks: tests the merging
        ds = open_dataset(burgers_file, indices=TRAIN)
        mean, std = plain_stats(getattr(ds, field))
        assert norm.mean.shape == (64, 1) and norm.periodic
        torch.testing.assert_close(norm.mean.double(), mean, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(norm.std.double(), std, rtol=1e-5, atol=1e-7)


def test_fit_ignores_the_test_samples(burgers_file, tmp_path):
    before = fit_normalizer(burgers_file, "y", TRAIN)
    changed = tmp_path / "changed.h5"
    shutil.copy(burgers_file, changed)
    with h5py.File(changed, "r+") as h5:
        h5["y"][6:] = 1e3  # the test split changes completely
    after = fit_normalizer(changed, "y", TRAIN)
    assert torch.equal(before.mean, after.mean) and torch.equal(before.std, after.std)
    assert not torch.equal(fit_normalizer(changed, "y").mean, before.mean)  # all samples: it would change


@pytest.mark.parametrize("resolution", [32, 8])
def test_at_resolution_equals_fitting_there_burgers(burgers_file, resolution):
    native = fit_normalizer(burgers_file, "x", TRAIN)
    low = native.at_resolution(resolution)
    mean, std = plain_stats(open_dataset(burgers_file, resolution=resolution, indices=TRAIN).x)
    assert low.mean.shape == (resolution, 1)
    torch.testing.assert_close(low.mean.double(), mean, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(low.std.double(), std, rtol=1e-5, atol=1e-7)
    assert native.at_resolution(64) is native
    with pytest.raises(ValueError, match="allowed resolutions"):
        native.at_resolution(48)


def test_at_resolution_equals_fitting_there_darcy(darcy_file):
    native = fit_normalizer(darcy_file, "y", range(4))
    for resolution in (9, 5):
        low = native.at_resolution(resolution)
        mean, std = plain_stats(open_dataset(darcy_file, resolution=resolution, indices=range(4)).y)
        torch.testing.assert_close(low.mean.double(), mean, rtol=1e-6, atol=1e-8)
        torch.testing.assert_close(low.std.double(), std, rtol=1e-5, atol=1e-8)


def test_at_resolution_off_the_strided_grids_interpolates_the_statistics(darcy_file):
    # 8 nodes from a 17-node grid is no strided sub-grid: the fields are interpolated bilinearly in
    # physical coordinates (x_i = i/7 read off the native nodes X_j = j/16), written out point by point
    native = fit_normalizer(darcy_file, "y", range(4))
    low = native.at_resolution(8)
    assert low.mean.shape == (8, 8, 1)
    m = native.mean[..., 0].double().numpy()
    expected = np.empty((8, 8))
    for i in range(8):
        for j in range(8):
            p, q = i / 7 * 16, j / 7 * 16
            i0, j0 = min(int(p), 15), min(int(q), 15)
            s, t = p - i0, q - j0
            expected[i, j] = ((1 - s) * (1 - t) * m[i0, j0] + s * (1 - t) * m[i0 + 1, j0]
                              + (1 - s) * t * m[i0, j0 + 1] + s * t * m[i0 + 1, j0 + 1])
    np.testing.assert_allclose(low.mean[..., 0].double().numpy(), expected, rtol=1e-6, atol=1e-7)
    # on a strided sub-grid the interpolant and the strided statistics agree (nodes coincide)
    torch.testing.assert_close(_interpolate_nodes(native.mean, 9), native.at_resolution(9).mean)


def test_pooled_inverse_target_is_fitted_on_the_pooled_grid(darcy_file):
    kw = dict(kind="darcy-inverse", resolution=9, coarse_resolution=3)
    norm = fit_normalizer(darcy_file, "y", range(4), **kw)
    ds = open_dataset(darcy_file, indices=range(4), **kw)
    mean, std = plain_stats(ds.y)
    torch.testing.assert_close(norm.mean.double(), mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(norm.std.double(), std, rtol=1e-5, atol=1e-6)
    assert norm.at_resolution(3) is norm
    with pytest.raises(ValueError, match="pooled"):
        norm.at_resolution(2)
    x_norm = fit_normalizer(darcy_file, "x", range(4), kind="darcy-inverse")  # input of the inverse map is u
    torch.testing.assert_close(x_norm.mean, fit_normalizer(darcy_file, "y", range(4)).mean)


def test_global_variant(burgers_file):
    norm = fit_normalizer(burgers_file, "x", TRAIN, pointwise=False, block=4)
    x = open_dataset(burgers_file, indices=TRAIN).x.double()
    assert norm.mean.dim() == 0 and not norm.pointwise
    torch.testing.assert_close(norm.mean.double(), x.mean(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(norm.std.double(), x.std(), rtol=1e-5, atol=1e-7)
    assert norm.at_resolution(16) is norm
    scalar = UnitGaussianNormalizer(2.0, 4.0, eps=1e-6)
    torch.testing.assert_close(scalar.encode(torch.tensor([6.0])), torch.tensor([1.0]), rtol=1e-5, atol=0)


def test_state_round_trips_through_a_weights_only_checkpoint(burgers_file, tmp_path):
    norm = fit_normalizer(burgers_file, "y", TRAIN)
    torch.save({"norm": norm.to_state()}, tmp_path / "ckpt.pt")
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)["norm"]
    back = PointwiseGaussianNormalizer.from_state(state)
    assert torch.equal(back.mean, norm.mean) and torch.equal(back.std, norm.std) and back.eps == norm.eps
    assert back.periodic and back.at_resolution(16).mean.shape == (16, 1)
    with pytest.raises(KeyError, match="missing 'std'"):
        PointwiseGaussianNormalizer.from_state({"mean": norm.mean})


def test_bad_normalizer_input(burgers_file):
    norm = fit_normalizer(burgers_file, "x", TRAIN)
    with pytest.raises(ValueError, match="at_resolution"):
        norm.encode(torch.zeros(2, 32, 1))
    with pytest.raises(ValueError, match="at least 2"):
        fit_normalizer(burgers_file, "x", [0])
    with pytest.raises(ValueError, match="field must be"):
        fit_normalizer(burgers_file, "u", TRAIN)
    with pytest.raises(ValueError, match="finite"):
        PointwiseGaussianNormalizer(torch.zeros(3), torch.tensor([1.0, float("nan"), 1.0]))


@pytest.mark.parametrize("block", [0, -1])
def test_fit_normalizer_block_must_be_positive(burgers_file, block):
    with pytest.raises(ValueError, match=f"block must be an integer >= 1 .*got {block}"):
        fit_normalizer(burgers_file, "x", TRAIN, block=block)  # -1 gave zero statistics, no error


def test_fit_normalizer_checks_a_resolution_it_does_not_use(burgers_file):
    with pytest.raises(ValueError, match="resolution 48 is not a strided sub-grid"):
        fit_normalizer(burgers_file, "y", TRAIN, resolution=48)
    assert torch.equal(fit_normalizer(burgers_file, "y", TRAIN, resolution=32).mean,
                       fit_normalizer(burgers_file, "y", TRAIN).mean)  # point values: fitted at the native grid


def test_encode_and_decode_need_a_floating_tensor():
    norm = PointwiseGaussianNormalizer(torch.zeros(16, 1), torch.full((16, 1), 0.1))
    with pytest.raises(ValueError, match="x must be a floating-point tensor, got torch.int64"):
        norm.encode(torch.ones(1, 16, 1, dtype=torch.long))  # was inf: the stats cast to int
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        norm.decode(torch.ones(1, 16, 1, dtype=torch.long))
    field = FieldNormalizer(torch.zeros(2, 2, 1), torch.full((2, 2, 1), 0.1))
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        field.encode(torch.ones(1, 3, 1, dtype=torch.long), torch.rand(1, 3, 2))


@pytest.mark.parametrize("eps", ["1e-5", float("inf")])
def test_eps_must_be_a_finite_positive_number(eps):
    with pytest.raises(ValueError, match="eps must be a finite number > 0"):
        PointwiseGaussianNormalizer(torch.zeros(3), torch.ones(3), eps=eps)


def test_from_state_needs_a_dict():
    with pytest.raises(TypeError, match="normalizer state must be the dict to_state\\(\\) gives, got NoneType"):
        PointwiseGaussianNormalizer.from_state(None)


def test_add_noise_is_seeded_per_sample_index():
    x = torch.zeros(4, 32, 32, 1)
    ids = np.array([10, 11, 12, 13])
    full = add_noise(x, 0.1, seed=5, indices=ids)
    part = add_noise(x[[2, 0]], 0.1, seed=5, indices=ids[[2, 0]])
    torch.testing.assert_close(part, full[[2, 0]], rtol=0, atol=0)  # independent of batch and order
    assert not torch.equal(add_noise(x, 0.1, seed=6, indices=ids), full)  # another seed, other noise
    assert abs(full.std().item() - 0.1) < 0.01 and abs(full.mean().item()) < 0.01
    assert add_noise(x, 0.0, seed=5, indices=ids) is x
    with pytest.raises(ValueError, match="noise must be"):
        add_noise(x, -0.1, 0, ids)
    with pytest.raises(ValueError, match="3 indices for a batch of 4"):
        add_noise(x, 0.1, 0, ids[:3])
