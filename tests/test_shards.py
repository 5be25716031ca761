"""Shards: a dataset generated in pieces and merged is the dataset generated on one machine, bit for bit.

Grid kinds (burgers, darcy) and the mesh kind (darcy-mesh), tiny: every stored array, every attribute
but the volatile ones (``content_hash.VOLATILE``: the time and the chunking) and the content hash agree;
the merged file opens and `petrov info` reads it like a generated one. Every refusal names the file
and what is wrong, before anything is written; a killed shard and a killed merge resume.
"""
import h5py
import numpy as np
import pytest

from petrov.cli import main
from petrov.common.locks import Locked, exclusive_lock
from petrov.datasets import dataset_info, generate_dataset, merge_shards, open_dataset, open_mesh_dataset
from petrov.datasets.content_hash import VOLATILE
from petrov.datasets.hdf5_files import partial_path
from petrov.datasets.shards import parse_range, parse_shard, sample_range, shard_range

KINDS = {
    "burgers": dict(resolution=64),
    "darcy": dict(resolution=17),
    "darcy-mesh": dict(h=0.08, refinements=1, modes=16),
}
N = 7


class Interrupt(Exception):
    pass


def stop_after(chunks):
    calls = []

    def callback(done, total):
        calls.append(done)
        if len(calls) == chunks:
            raise Interrupt(done)

    return callback


def contents(path):
    """Every dataset of the file (name -> array) and its attributes."""
    data = {}
    with h5py.File(path, "r") as h5:
        h5.visititems(lambda name, obj: data.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
        groups = {}
        h5.visititems(lambda name, obj: groups.__setitem__(name, dict(obj.attrs)) if isinstance(obj, h5py.Group)
                      else None)
        return data, dict(h5.attrs), groups


def assert_same_file(got, want):
    """The named invariant: same arrays (values, dtypes, shapes), same attributes but the volatile ones,
    the same content hash, the same group attributes."""
    data, attrs, groups = contents(got)
    ref_data, ref_attrs, ref_groups = contents(want)
    assert data.keys() == ref_data.keys()
    for name in ref_data:
        assert data[name].dtype == ref_data[name].dtype, name
        np.testing.assert_array_equal(data[name], ref_data[name], err_msg=name)
    kept = lambda a: {k: v for k, v in a.items() if k not in VOLATILE}  # noqa: E731
    assert kept(attrs).keys() == kept(ref_attrs).keys()
    for key, value in kept(ref_attrs).items():
        assert np.array_equal(attrs[key], value), key
    assert attrs["content_hash"] == ref_attrs["content_hash"] and attrs["content_hash"].startswith(b"sha256:")
    assert attrs["n_complete"] == ref_attrs["n_complete"] == ref_attrs["n_samples"]
    assert groups == ref_groups


@pytest.fixture(scope="module", params=list(KINDS))
def made(request, tmp_path_factory):
    """kind, the one-machine file, its three shards (0/3, 1/3, 2/3) and a folder for outputs."""
    kind = request.param
    root = tmp_path_factory.mktemp(kind)
    whole = generate_dataset(kind, root / "whole.h5", N, seed=3, chunk_size=2, progress=False, **KINDS[kind])
    shards = [generate_dataset(kind, root / f"part-{k}.h5", N, seed=3, shard=(k, 3), progress=False, **KINDS[kind])
              for k in range(3)]
    return kind, whole, shards, root


def test_three_shards_merged_are_the_one_machine_file(made, tmp_path):
    kind, whole, shards, _ = made
    merged = merge_shards([shards[2], shards[0], shards[1]], tmp_path / "merged.h5", progress=False)  # any order
    assert_same_file(merged, whole)
    assert not partial_path(merged).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged.h5"]  # no lock or temporary file left


def test_a_shard_records_its_range_and_the_whole_recipe(made):
    kind, whole, shards, _ = made
    _, whole_attrs, _ = contents(whole)
    starts = []
    for k, shard in enumerate(shards):
        data, attrs, _ = contents(shard)
        lo, hi = shard_range(k, 3, N)
        assert (attrs["shard_start"], attrs["shard_stop"], attrs["total_samples"]) == (lo, hi, N)
        assert attrs["n_samples"] == attrs["n_complete"] == hi - lo and attrs["shard"] == f"{k}/3"
        for key in ("kind", "params", "seed", "solver_settings"):
            assert attrs[key] == whole_attrs[key], key
        starts.append(lo)
    assert starts == [0, 2, 4]
    if kind != "darcy-mesh":  # a shard's samples are the whole file's samples lo..hi-1
        with h5py.File(whole) as ref, h5py.File(shards[1]) as part:
            np.testing.assert_array_equal(part["y"][:], ref["y"][2:4])


def test_the_merged_file_opens_and_reads_like_a_generated_one(made, tmp_path, capsys):
    kind, whole, shards, _ = made
    merged = merge_shards(shards, tmp_path / "merged.h5", progress=False)
    if kind == "darcy-mesh":
        a, b = open_mesh_dataset(merged, "level1"), open_mesh_dataset(whole, "level1")
        assert len(a) == len(b) == N
        for key in ("x", "y", "pos", "weights", "triangles"):
            assert np.array_equal(a[N - 1][key].numpy(), b[N - 1][key].numpy()), key
    else:
        a, b = open_dataset(merged), open_dataset(whole)
        assert np.array_equal(a.x.numpy(), b.x.numpy()) and np.array_equal(a.y.numpy(), b.y.numpy())
    info, ref = dataset_info(merged), dataset_info(whole)
    for d in (info, ref):
        d.pop("path")
        d["attrs"] = {k: v for k, v in d["attrs"].items() if k not in VOLATILE}
    assert info == ref
    assert main(["info", str(merged)]) == 0
    text = capsys.readouterr().out
    assert f"{N} of {N} (complete)" in text and "shard" not in text


def test_shards_and_merge_from_the_command_line(tmp_path, capsys):
    common = ["burgers", "--n-samples", "10", "--resolution", "64", "--seed", "5", "--no-progress"]
    assert main(["generate", *common, "-o", str(tmp_path / "whole.h5")]) == 0
    parts = []
    for k in range(3):
        parts.append(tmp_path / "shards" / f"b-{k}.h5")
        assert main(["generate", *common, "--shard", f"{k}/3", "-o", str(parts[-1])]) == 0
    capsys.readouterr()
    assert main(["info", str(parts[1])]) == 0
    assert "shard:       1/3: samples 3..5 of the dataset's 10" in capsys.readouterr().out
    assert main(["merge", *map(str, parts), "-o", str(tmp_path / "merged.h5"), "--no-progress"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'merged.h5'}"
    assert_same_file(tmp_path / "merged.h5", tmp_path / "whole.h5")
    assert main(["merge", *map(str, parts), "-o", str(tmp_path / "merged.h5")]) == 0  # the same again
    assert "already holds these 10 samples; nothing to do" in capsys.readouterr().out
    # an --indices range is a shard too, merged with any others that fit
    mixed = tmp_path / "mixed"
    assert main(["generate", *common, "--indices", "0:6", "-o", str(mixed / "a.h5")]) == 0
    assert main(["merge", str(mixed / "a.h5"), str(parts[2]), "-o", str(mixed / "m.h5"), "--no-progress"]) == 0
    assert_same_file(mixed / "m.h5", tmp_path / "whole.h5")


# --- refusals --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def burgers_shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusals")

    def make(name, n=10, resolution=64, seed=0, **kw):
        return generate_dataset("burgers", root / name, n, resolution, seed, progress=False, **kw)

    files = {f"s{k}": make(f"s{k}.h5", shard=(k, 3)) for k in range(3)}
    files.update(
        copy=make("copy.h5", shard=(1, 3)),
        overlap=make("overlap.h5", indices=(2, 5)),
        seed=make("seed.h5", shard=(1, 3), seed=1),
        nu=make("nu.h5", shard=(1, 3), nu=0.05),
        resolution=make("resolution.h5", shard=(1, 3), resolution=32),
        total=make("total.h5", shard=(1, 3), n=11),
        kind=generate_dataset("burgers-trajectory", root / "kind.h5", 10, 64, shard=(1, 3), progress=False,
                              time_steps=2),
        whole=make("whole.h5"),
    )
    return root, files


REFUSALS = [
    (("s0", "s2"), r"samples 3\.\.5 of the 10 are in none of the shards given; .*`--shard 1/3`"),
    (("s1", "s2"), r"samples 0\.\.2 of the 10 are in none of the shards given"),
    (("s0", "s1"), r"samples 6\.\.9 of the 10 are in none of the shards given; .*`--shard 2/3`"),
    (("s0", "s1", "s1", "s2"), r"s1\.h5 is given twice; give each shard once"),
    (("s0", "s1", "copy", "s2"), r"s1\.h5 and .*copy\.h5 both hold samples 3\.\.5 \(the same shard twice\?\)"),
    (("s0", "overlap", "s1", "s2"), r"s0\.h5 \(samples 0\.\.2\) and .*overlap\.h5 \(samples 2\.\.4\) overlap"),
    (("s0", "seed", "s2"), r"seed\.h5 is a shard of another dataset than .*s0\.h5: seed 1 there, 0 in"),
    (("s0", "nu", "s2"), r"nu\.h5 is a shard of another dataset than .*s0\.h5: nu 0\.05 there, 0\.1 in"),
    (("s0", "resolution", "s2"), r"resolution\.h5 is a shard of another .*: resolution 32 there, 64 in"),
    (("s0", "total", "s2"), r"total\.h5 is a shard of another .*: n_samples \(of the whole dataset\) 11 there, 10"),
    (("s0", "kind", "s2"), r"kind\.h5 is a shard of another dataset than .*s0\.h5: kind 'burgers-trajectory'"),
    (("s0", "whole"), r"whole\.h5 is not a shard but a whole dataset \(10 samples of burgers\)"),
]


@pytest.mark.parametrize("names, message", REFUSALS, ids=[" ".join(n) for n, _ in REFUSALS])
def test_every_refusal_names_the_file_and_what_is_wrong_before_anything_is_written(burgers_shards, tmp_path,
                                                                                   names, message):
    root, files = burgers_shards
    with pytest.raises(ValueError, match=message):
        merge_shards([files[name] for name in names], tmp_path / "out.h5", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_unfinished_or_foreign_file_is_refused_by_name(burgers_shards, tmp_path, capsys):
    root, files = burgers_shards
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(files["s1"].read_bytes())
    with h5py.File(damaged, "r+") as h5:
        h5["y"][1, 5] += 1.0
    out = tmp_path / "out" / "m.h5"
    with pytest.raises(ValueError, match=r"damaged\.h5: its samples do not match its content hash .*regenerate "
                                         r"that shard"):
        merge_shards([files["s0"], damaged, files["s2"]], out, progress=False)
    unfinished = tmp_path / "unfinished.h5"
    with pytest.raises(Interrupt):
        generate_dataset("burgers", unfinished, 10, 64, shard=(1, 3), chunk_size=1, progress=False,
                         callback=stop_after(1))
    with pytest.raises(ValueError, match=r"unfinished\.h5\.partial is an unfinished shard \(1 of its 3 samples "
                                         r"written\); rerun its `petrov generate \.\.\. --shard` command"):
        merge_shards([files["s0"], partial_path(unfinished), files["s2"]], out, progress=False)
    (tmp_path / "notes.txt").write_text("not a dataset")
    assert main(["merge", str(files["s0"]), str(tmp_path / "notes.txt"), "-o", str(out)]) == 1
    assert "notes.txt is not a readable HDF5 file" in capsys.readouterr().err
    assert not out.parent.exists() or list(out.parent.iterdir()) == []
    with pytest.raises(ValueError, match=r"the output .*s0\.h5 is one of the shards; choose another -o"):
        merge_shards([files["s0"], files["s1"], files["s2"]], files["s0"], overwrite=True, progress=False)


# --- ranges ----------------------------------------------------------------------------------------------


def test_shard_ranges_are_contiguous_balanced_and_cover_every_sample_once():
    for n in (1, 7, 10, 1000):
        for count in range(1, min(n, 12) + 1):
            ranges = [shard_range(k, count, n) for k in range(count)]
            assert ranges[0][0] == 0 and ranges[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
            sizes = [hi - lo for lo, hi in ranges]
            assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


@pytest.mark.parametrize("shard, indices, message", [
    ("3/3", None, r"shard 3/3: K counts from 0 and must be in 0\.\.2 \(as \$SLURM_ARRAY_TASK_ID with --array=0-2"),
    ("-1/3", None, r"must be in 0\.\.2"),
    ("1/0", None, r"the number of shards N must be >= 1"),
    ("2 of 3", None, r"shard '2 of 3': expected K/N"),
    ("0/11", None, r"11 shards of 10 samples would leave some empty; use at most 10 shards"),
    (None, "5:5", r"indices 5:5: expected A:B with 0 <= A < B <= n_samples = 10"),
    (None, "8:12", r"indices 8:12: expected A:B"),
    (None, "3-6", r"indices '3-6': expected A:B"),
    ("0/2", "0:5", r"give a shard \(--shard K/N\) or a range of indices \(--indices A:B\), not both"),
])
def test_impossible_shards_are_refused(tmp_path, shard, indices, message):
    with pytest.raises(ValueError, match=message):
        generate_dataset("burgers", tmp_path / "b.h5", 10, 64, shard=shard, indices=indices, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_the_forms_of_a_shard_and_a_range():
    assert parse_shard("2/5") == parse_shard((2, 5)) == (2, 5)
    assert parse_range("3:9") == parse_range((3, 9)) == parse_range(range(3, 9)) == parse_range(slice(3, 9)) == (3, 9)
    assert sample_range(10, shard="1/3") == ((3, 6), "1/3")
    assert sample_range(10, indices="3:6") == ((3, 6), "")
    assert sample_range(10) is None


# --- interrupted shards and merges --------------------------------------------------------------------


def test_a_killed_shard_resumes_and_merges_to_the_one_machine_file(made, tmp_path):
    kind, whole, shards, _ = made
    part = tmp_path / "part-1.h5"
    with pytest.raises(Interrupt):
        generate_dataset(kind, part, N, seed=3, shard="1/3", chunk_size=1, progress=False, callback=stop_after(1),
                         **KINDS[kind])
    with h5py.File(partial_path(part)) as h5:
        assert h5.attrs["n_complete"] == 1 and h5.attrs["shard_start"] == 2
    seen = []
    generate_dataset(kind, part, N, seed=3, shard="1/3", progress=False, callback=lambda d, t: seen.append(d),
                     **KINDS[kind])
    assert seen == [2]  # resumed after the sample on disk, in the interrupted run's chunks of one
    assert_same_file(part, shards[1])
    merged = merge_shards([shards[0], part, shards[2]], tmp_path / "merged.h5", progress=False)
    assert_same_file(merged, whole)


def test_a_merge_streams_a_chunk_at_a_time_resumes_and_has_one_writer(made, tmp_path):
    kind, whole, shards, _ = made
    out = tmp_path / "merged.h5"
    with pytest.raises(Interrupt):
        merge_shards(shards, out, chunk_size=2, progress=False, callback=stop_after(2))
    assert not out.exists()
    with h5py.File(partial_path(out)) as h5:
        assert h5.attrs["n_complete"] == 4
    with exclusive_lock(out):
        with pytest.raises(Locked, match="is being merged by another process"):
            merge_shards(shards, out, progress=False)
    seen = []
    merge_shards(shards, out, chunk_size=2, progress=False, callback=lambda d, t: seen.append(d))
    assert seen == [6, 7]  # the shards are 0..1, 2..3, 4..6: copied two samples at a time, from sample 4 on
    assert_same_file(out, whole)
    mine = tmp_path / "mine.h5"
    mine.write_text("a user's file")
    with pytest.raises(FileExistsError, match="mine.h5 already exists; pass --overwrite"):
        merge_shards(shards, mine, progress=False)
    assert mine.read_text() == "a user's file"
