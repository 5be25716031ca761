"""Per-field normalization of time series of several fields (channels state-major: ``s * F + f`` is field f of
state s): one global mean and std per field, broadcast over the states; F = 1 is exactly the single field."""
import io

import pytest
import torch

from petrov.datasets import PointwiseGaussianNormalizer, fit_normalizer, generate_dataset, open_dataset
from petrov.datasets.normalizers import normalizer_from_state
from petrov.datasets.windows import Window

F = 2


def plain_field_stats(data: torch.Tensor, fields: int):
    """Mean and unbiased std of each field over every entry of its channels f, f + F, ..., by loops."""
    d = data.double()
    means, stds = [], []
    for f in range(fields):
        values = torch.cat([d[..., c].reshape(-1) for c in range(f, d.shape[-1], fields)])
        n = values.numel()
        mean = sum(values.tolist()) / n
        means.append(mean)
        stds.append((sum((v - mean) ** 2 for v in values.tolist()) / (n - 1)) ** 0.5)
    return torch.tensor(means, dtype=torch.float64), torch.tensor(stds, dtype=torch.float64)


def series(n=4, grid=(5, 3), states=3, fields=F, seed=0):
    """Samples (n, *grid, states * fields) whose fields differ in scale and offset (field f: offset 10 f)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(n, *grid, states, fields, generator=g, dtype=torch.float64)
    u = u * torch.tensor([1.0, 50.0])[:fields] + torch.tensor([0.0, 10.0])[:fields]
    return u.reshape(n, *grid, states * fields)


@pytest.fixture(scope="module")
def trajectory_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fields") / "t.h5"
    return generate_dataset("burgers-trajectory", path, 6, 16, seed=1, progress=False, time_steps=5)


def test_global_statistics_per_field_match_a_plain_reference():
    data = series()
    norm = PointwiseGaussianNormalizer.fit(data, pointwise=False, fields=F)
    mean, std = plain_field_stats(data, F)
    assert norm.mean.shape == (F,) and not norm.pointwise and norm.fields == F
    torch.testing.assert_close(norm.mean.double(), mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(norm.std.double(), std, rtol=1e-6, atol=1e-6)
    # broadcast back: channel s F + f encoded with field f's statistics, at any number of states
    for states in (3, 1):
        x = data[..., : states * F].float()
        z = norm.encode(x)
        channel_field = torch.arange(states * F) % F
        expected = (x.double() - mean[channel_field]) / (std[channel_field] + norm.eps)
        torch.testing.assert_close(z.double(), expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(norm.decode(z), x, rtol=1e-5, atol=1e-4)


def test_each_field_is_standardized_separately():
    z = PointwiseGaussianNormalizer.fit(series(n=16), pointwise=False, fields=F).encode(series(n=16).float())
    per_field = z.double().reshape(-1, F)
    torch.testing.assert_close(per_field.mean(0), torch.zeros(F, dtype=torch.float64), atol=1e-5, rtol=0)
    torch.testing.assert_close(per_field.std(0), torch.ones(F, dtype=torch.float64), atol=1e-4, rtol=0)


def test_one_field_is_exactly_the_single_field_normalizer():
    data = series(fields=1)
    for pointwise in (True, False):
        old = PointwiseGaussianNormalizer.fit(data, pointwise=pointwise)
        new = PointwiseGaussianNormalizer.fit(data, pointwise=pointwise, fields=1)
        assert torch.equal(old.mean, new.mean) and torch.equal(old.std, new.std)
        assert new.to_state().keys() == old.to_state().keys() and "fields" not in new.to_state()


def test_pointwise_statistics_stay_per_channel():
    data = series()
    norm = PointwiseGaussianNormalizer.fit(data, fields=F)
    plain = PointwiseGaussianNormalizer.fit(data)
    assert norm.mean.shape == (5, 3, 3 * F) and torch.equal(norm.mean, plain.mean)
    first = norm.first_channels(1 * F)  # the given state's fields
    assert first.mean.shape == (5, 3, F) and first.fields == F
    with pytest.raises(ValueError, match="whole number of states of 2 fields"):
        norm.first_channels(3)


def test_first_channels_of_global_per_field_statistics_are_themselves():
    norm = PointwiseGaussianNormalizer.fit(series(), pointwise=False, fields=F)
    assert norm.first_channels(F) is norm and norm.at_resolution(7) is norm


@pytest.mark.parametrize("pointwise", [True, False])
def test_state_round_trip_through_a_checkpoint(pointwise):
    norm = PointwiseGaussianNormalizer.fit(series(), pointwise=pointwise, fields=F)
    buffer = io.BytesIO()
    torch.save({"x_normalizer": norm.to_state()}, buffer)
    buffer.seek(0)
    back = normalizer_from_state(torch.load(buffer, weights_only=True)["x_normalizer"])
    assert back.fields == F and torch.equal(back.mean, norm.mean) and torch.equal(back.std, norm.std)
    x = series(seed=3).float()
    torch.testing.assert_close(back.encode(x), norm.encode(x), rtol=0, atol=0)


def test_a_channel_count_not_divisible_by_the_fields_is_refused():
    with pytest.raises(ValueError, match="5 channels, not a whole number of states of 2 fields"):
        PointwiseGaussianNormalizer.fit(torch.randn(3, 4, 5, dtype=torch.float64), pointwise=False, fields=2)
    norm = PointwiseGaussianNormalizer.fit(series(), pointwise=False, fields=F)
    with pytest.raises(ValueError, match="whole number of states of 2 fields"):
        norm.encode(torch.randn(2, 5, 3, 3))
    with pytest.raises(ValueError, match=r"statistics of 2 fields are \(2,\)"):
        PointwiseGaussianNormalizer(torch.zeros(3), torch.ones(3), fields=2)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="fields must be an integer >= 1"):
            PointwiseGaussianNormalizer.fit(series(), pointwise=False, fields=bad)


def test_fit_normalizer_streams_per_field_statistics(trajectory_file):
    """A window of 6 states read as 3 states of 2 fields: the streamed statistics, block by block, are the
    plain per-field ones of the window; one field is the single field's fit, state for state."""
    window = Window(history=2)
    streamed = fit_normalizer(trajectory_file, "y", range(5), pointwise=False, window=window, fields=F, block=2)
    y = open_dataset(trajectory_file, indices=range(5), window=window).y
    mean, std = plain_field_stats(y, F)
    torch.testing.assert_close(streamed.mean.double(), mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(streamed.std.double(), std, rtol=1e-5, atol=1e-6)
    single = fit_normalizer(trajectory_file, "y", range(5), pointwise=False, window=window)
    again = fit_normalizer(trajectory_file, "y", range(5), pointwise=False, window=window, fields=1)
    assert single.to_state().keys() == again.to_state().keys()
    assert torch.equal(single.mean, again.mean) and torch.equal(single.std, again.std)
    with pytest.raises(ValueError, match="whole number of states of 4 fields"):
        fit_normalizer(trajectory_file, "y", range(5), pointwise=False, window=window, fields=4)


def test_an_exported_graph_normalises_each_field_as_the_normaliser_does():
    from petrov.export.statistics import ExportedNormalizer

    data = series(states=4).double()
    norm = PointwiseGaussianNormalizer(*plain_field_stats(data, F), 1e-5, fields=F)  # global: (F,)
    exported = ExportedNormalizer(norm, tuple(data.shape[1:-1]), dynamic=False)
    torch.testing.assert_close(exported.encode(data), norm.encode(data))
    torch.testing.assert_close(exported.decode(data), norm.decode(data))
