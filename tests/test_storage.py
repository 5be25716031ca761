"""HDF5 storage: attributes round-trip, atomic write, interrupted generation resumes to identical data."""
import json
import os
import signal

import h5py
import numpy as np
import pytest

from petrov.common.locks import exclusive_lock
from petrov.common.interrupts import Terminated, stop_on_signals
from petrov.datasets import dataset_info, generate_dataset, merge_shards, periodic_grf_1d, solve_burgers
from petrov.datasets.content_hash import ContentHash
from petrov.datasets.hdf5_files import partial_path

N_BURGERS = 64  # tiny native grid


class Interrupt(Exception):
    pass


def interrupt_after(chunks: int):
    calls = []

    def callback(done, total):
        calls.append(done)
        if len(calls) == chunks:
            raise Interrupt(f"killed after {done} samples")

    return callback


def read_all(path):
    with h5py.File(path, "r") as h5:
        return h5["x"][...], h5["y"][...], dict(h5.attrs)


def test_burgers_file_round_trips_with_attributes(tmp_path):
    path = generate_dataset("burgers", tmp_path / "b.h5", 5, N_BURGERS, seed=7, chunk_size=2,
                            progress=False, nu=0.05)
    assert path == tmp_path / "b.h5" and not partial_path(path).exists()
    x, y, attrs = read_all(path)
    assert x.dtype == np.float32 and y.dtype == np.float32 and x.shape == y.shape == (5, N_BURGERS)
    with h5py.File(path, "r") as h5:
        assert h5["x"].chunks == (1, N_BURGERS)
    # every parameter, the seed, grid and bookkeeping are recorded
    assert attrs["kind"] == "burgers" and attrs["grid"] == "periodic"
    assert attrs["seed"] == 7 and attrs["native_resolution"] == N_BURGERS
    assert attrs["n_samples"] == attrs["n_complete"] == 5
    assert attrs["nu"] == 0.05 and attrs["t"] == 1.0 and attrs["tau"] == 5.0 and attrs["sigma"] == 25.0
    assert json.loads(attrs["params"]) == {"nu": 0.05, "t": 1.0, "alpha": 2.0, "tau": 5.0, "sigma": 25.0}
    assert json.loads(attrs["solver_settings"])["nu"] == 0.05
    assert attrs["petrov_version"] and attrs["created"]
    # the stored data are the recipe: GRF sample i and its Burgers solution (same chunks of 2)
    u0 = periodic_grf_1d(N_BURGERS, 7, range(5))
    np.testing.assert_array_equal(x, u0.astype(np.float32))
    u1 = np.concatenate([solve_burgers(u0[i : i + 2], nu=0.05) for i in (0, 2, 4)])
    np.testing.assert_array_equal(y, u1.astype(np.float32))


def test_interrupted_generation_resumes_to_identical_file(tmp_path):
    ref = generate_dataset("burgers", tmp_path / "ref.h5", 7, N_BURGERS, seed=3, chunk_size=2, progress=False)
    out = tmp_path / "run.h5"
    with pytest.raises(Interrupt):
        generate_dataset("burgers", out, 7, N_BURGERS, seed=3, chunk_size=2, progress=False,
                         callback=interrupt_after(2))
    assert not out.exists()  # nothing half-written under the final name
    with h5py.File(partial_path(out), "r") as h5:
        assert h5.attrs["n_complete"] == 4
        assert np.isnan(h5["x"][4:]).all()  # unwritten samples are NaN, never plausible zeros
    seen = []
    generate_dataset("burgers", out, 7, N_BURGERS, seed=3, progress=False, callback=lambda d, t: seen.append(d))
    assert seen == [6, 7]  # resumed after the 4 samples on disk, with the interrupted run's chunk size
    assert out.exists() and not partial_path(out).exists()
    x_ref, y_ref, a_ref = read_all(ref)
    x, y, a = read_all(out)
    np.testing.assert_array_equal(x, x_ref)
    np.testing.assert_array_equal(y, y_ref)
    assert a.keys() == a_ref.keys()
    assert all(a[k] == a_ref[k] for k in a_ref if k != "created")


def chain_of(x: np.ndarray, y: np.ndarray) -> str:
    digest = ContentHash()
    digest.update(x, y)
    return digest.state


@pytest.mark.parametrize("cut", ["between the chain and n_complete", "before the count was kept", "no chain"])
def test_a_resumed_chain_that_does_not_cover_the_stored_samples_is_read_back_from_them(tmp_path, cut):
    ref = generate_dataset("burgers", tmp_path / "ref.h5", 7, N_BURGERS, seed=3, chunk_size=2, progress=False)
    x_ref, y_ref, a_ref = read_all(ref)
    out = tmp_path / "run.h5"
    with pytest.raises(Interrupt):
        generate_dataset("burgers", out, 7, N_BURGERS, seed=3, chunk_size=2, progress=False,
                         callback=interrupt_after(2))
    with h5py.File(partial_path(out), "r+") as h5:
        assert h5.attrs["n_complete"] == h5.attrs["hash_chain_samples"] == 4
        assert h5.attrs["hash_chain"].decode() == chain_of(x_ref[:4], y_ref[:4])
        if cut == "between the chain and n_complete":  # chunk 3's data, count and chain, not n_complete
            h5["x"][4:6], h5["y"][4:6] = x_ref[4:6], y_ref[4:6]
            h5.attrs.modify("hash_chain_samples", np.int64(6))
            h5.attrs.modify("hash_chain", np.bytes_(chain_of(x_ref[:6], y_ref[:6])))
        elif cut == "before the count was kept":  # a partial file of an earlier petrov: chain, no count
            del h5.attrs["hash_chain_samples"]
        else:  # petrov 0.1 kept no chain
            del h5.attrs["hash_chain_samples"], h5.attrs["hash_chain"]
    generate_dataset("burgers", out, 7, N_BURGERS, seed=3, progress=False)
    x, y, a = read_all(out)
    np.testing.assert_array_equal(x, x_ref)
    assert a["content_hash"] == a_ref["content_hash"]
    assert "hash_chain" not in a and "hash_chain_samples" not in a


def test_a_sigterm_during_a_chunks_claim_stops_once_the_chunk_is_claimed(tmp_path, monkeypatch):
    ref = generate_dataset("burgers", tmp_path / "ref.h5", 7, N_BURGERS, seed=3, chunk_size=2, progress=False)
    modify = h5py.AttributeManager.modify

    def terminated_after_the_chain(self, name, value):  # the signal lands between the claim's attributes
        modify(self, name, value)
        if name == "hash_chain" and not sent:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))

    sent: list = []
    monkeypatch.setattr(h5py.AttributeManager, "modify", terminated_after_the_chain)
    out = tmp_path / "run.h5"
    with pytest.raises(Terminated), stop_on_signals():
        generate_dataset("burgers", out, 7, N_BURGERS, seed=3, chunk_size=2, progress=False)
    with h5py.File(partial_path(out), "r") as h5:
        assert h5.attrs["n_complete"] == h5.attrs["hash_chain_samples"] == 2  # the first chunk, whole
    monkeypatch.undo()
    generate_dataset("burgers", out, 7, N_BURGERS, seed=3, progress=False)
    assert read_all(out)[2]["content_hash"] == read_all(ref)[2]["content_hash"]


def test_sample_does_not_depend_on_chunking(tmp_path):
    a = generate_dataset("burgers", tmp_path / "a.h5", 4, N_BURGERS, seed=1, chunk_size=1, progress=False)
    b = generate_dataset("burgers", tmp_path / "b.h5", 4, N_BURGERS, seed=1, chunk_size=4, progress=False)
    xa, ya, _ = read_all(a)
    xb, yb, _ = read_all(b)
    np.testing.assert_array_equal(xa, xb)  # GRFs are seeded per sample index
    # the Burgers solver picks its grid and step per sample: equal up to float32 rounding
    np.testing.assert_allclose(ya, yb, rtol=0, atol=1e-6 * np.abs(ya).max())


def test_partial_with_other_settings_is_refused_then_discarded_with_overwrite(tmp_path):
    out = tmp_path / "b.h5"
    with pytest.raises(Interrupt):
        generate_dataset("burgers", out, 4, N_BURGERS, seed=0, chunk_size=1, progress=False,
                         callback=interrupt_after(1))
    with pytest.raises(ValueError, match="different settings.*seed.*delete it"):
        generate_dataset("burgers", out, 4, N_BURGERS, seed=1, progress=False)
    generate_dataset("burgers", out, 4, N_BURGERS, seed=1, progress=False, overwrite=True)
    x, _, attrs = read_all(out)
    assert attrs["seed"] == 1
    np.testing.assert_array_equal(x, periodic_grf_1d(N_BURGERS, 1, range(4)).astype(np.float32))


def test_corrupt_partial_is_reported(tmp_path):
    out = tmp_path / "b.h5"
    partial_path(out).write_bytes(b"not an hdf5 file at all")
    with pytest.raises(ValueError, match="cannot be read.*delete it"):
        generate_dataset("burgers", out, 2, N_BURGERS, progress=False)
    generate_dataset("burgers", out, 2, N_BURGERS, progress=False, overwrite=True)
    assert out.exists() and not partial_path(out).exists()


def test_existing_output_needs_overwrite(tmp_path):
    out = generate_dataset("burgers", tmp_path / "b.h5", 2, N_BURGERS, seed=0, progress=False)
    before = out.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite"):
        generate_dataset("burgers", out, 2, N_BURGERS, seed=5, progress=False)
    assert out.read_bytes() == before  # refused without touching it
    generate_dataset("burgers", out, 2, N_BURGERS, seed=5, progress=False, overwrite=True)
    assert read_all(out)[2]["seed"] == 5


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(kind="heat"), KeyError, "unknown dataset kind 'heat'.*burgers, burgers-trajectory, darcy, darcy-inverse"),
        (dict(nuu=0.1), ValueError, "unknown key.*'nuu'.*did you mean 'nu'"),
        (dict(nu="fast"), ValueError, "expected a number"),
        (dict(nu=0.0), ValueError, "nu must be a finite positive"),
        (dict(nu=float("nan")), ValueError, "nu must be a finite positive"),
        (dict(n_samples=0), ValueError, "n_samples must be an integer >= 1"),
        (dict(seed=-1), ValueError, "seed must be"),
        (dict(chunk_size=0), ValueError, "chunk_size"),
        (dict(resolution=2), ValueError, "resolution must be an integer >= 4"),
        (dict(kind="darcy", resolution=17, averaging="geometric"), ValueError, "arithmetic"),
        (dict(kind="darcy", resolution=17, low=-3.0), ValueError, "low must be a finite positive"),
        (dict(kind="darcy-inverse", resolution=17, coarse_resolution=6), ValueError, "coarse_resolution 6"),
        (dict(kind="darcy-inverse", resolution=17, noise=-0.1), ValueError, "noise must be"),
    ],
)
def test_bad_generation_arguments(tmp_path, kwargs, error, match):
    args = dict(kind="burgers", n_samples=2, resolution=N_BURGERS) | kwargs
    out = tmp_path / "bad.h5"
    with pytest.raises(error, match=match):
        generate_dataset(args.pop("kind"), out, args.pop("n_samples"), args.pop("resolution"),
                         progress=False, **args)
    assert not out.exists() and not partial_path(out).exists()


def test_missing_output_folders_are_created(tmp_path):
    out = generate_dataset("burgers", tmp_path / "a" / "b" / "b.h5", 2, N_BURGERS, progress=False)
    assert out.is_file()


def test_rerun_with_the_same_settings_keeps_the_file(tmp_path):
    out = generate_dataset("burgers", tmp_path / "b.h5", 2, N_BURGERS, seed=0, progress=False)
    before = out.read_bytes()
    assert generate_dataset("burgers", out, 2, N_BURGERS, seed=0, progress=False) == out
    assert out.read_bytes() == before


def test_quick_mode_caps_the_samples(tmp_path, monkeypatch):
    from petrov.common.quick import QUICK_SAMPLES

    monkeypatch.setenv("PETROV_QUICK", "1")
    out = generate_dataset("burgers", tmp_path / "b.h5", QUICK_SAMPLES + 3, N_BURGERS, progress=False)
    with h5py.File(out) as h5:
        assert h5["x"].shape[0] == QUICK_SAMPLES


def test_darcy_file_round_trips(tmp_path):
    path = generate_dataset("darcy", tmp_path / "d.h5", 3, 17, seed=2, chunk_size=2, progress=False)
    x, y, attrs = read_all(path)
    assert x.shape == y.shape == (3, 17, 17)
    assert set(np.unique(x)) <= {3.0, 12.0}
    assert (y[:, 0, :] == 0).all() and (y[:, -1, :] == 0).all() and (y[:, :, 0] == 0).all()
    assert (y[:, 1:-1, 1:-1] > 0).all()  # positive forcing, positive coefficient
    assert attrs["grid"] == "nodes" and attrs["averaging"] == "arithmetic" and attrs["high"] == 12.0
    assert json.loads(attrs["solver_settings"])["averaging"] == "arithmetic"


def test_an_unfinished_file_is_named_as_such_with_how_to_finish_it(tmp_path):
    out = tmp_path / "b.h5"
    with pytest.raises(Interrupt):
        generate_dataset("burgers", out, 4, N_BURGERS, chunk_size=1, progress=False, callback=interrupt_after(1))
    with pytest.raises(FileNotFoundError, match=r"b.h5 is unfinished: .*b.h5.partial holds 1 of its 4 samples; "
                                                r"rerun the `petrov generate` \(or `petrov merge`\) command"):
        dataset_info(out)
    with exclusive_lock(out):  # a generation still writing it
        with pytest.raises(FileNotFoundError, match=r"b.h5 is not finished yet: another process \(pid \d+\) is "
                                                    r"writing it into .*b.h5.partial; wait for it to finish"):
            dataset_info(out)
    shard = tmp_path / "s-0.h5"
    with pytest.raises(Interrupt):
        generate_dataset("burgers", shard, 4, N_BURGERS, shard="0/2", chunk_size=1, progress=False,
                         callback=interrupt_after(1))
    with pytest.raises(FileNotFoundError, match=r"s-0.h5 is unfinished: .* holds 1 of its 2 samples; rerun its "
                                                r"`petrov generate ... --shard 0/2` command"):
        merge_shards([shard, tmp_path / "s-1.h5"], tmp_path / "m.h5", progress=False)
