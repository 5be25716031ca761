"""Mesh dataset files: layout and attributes, the stored data are the recipe's, interrupted generations
resume to the same file, chunking and worker counts do not change it, one writer per path, the CLI."""
import json

import h5py
import numpy as np
import pytest

from petrov.common.locks import Locked, exclusive_lock
from petrov.datasets import generate_dataset, open_dataset
from petrov.datasets.mesh import DarcyMeshParams, darcy_mesh_sample, mesh_info, open_mesh_dataset, read_domain
from petrov.datasets.hdf5_files import partial_path
from petrov.cli import main

SMALL = dict(h=0.08, refinements=1, modes=16)  # ~180 / ~650 nodes: fast
VARIANTS = ["level0", "level1", "remesh"]


class Interrupt(Exception):
    pass


def generate(path, n, seed=0, **kwargs):
    return generate_dataset("darcy-mesh", path, n, seed=seed, progress=False, **(SMALL | kwargs))


def contents(path):
    """Every dataset of the file (name -> array) and its attributes without the creation time."""
    data = {}
    with h5py.File(path, "r") as h5:
        h5.visititems(lambda name, obj: data.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
        attrs = {k: v for k, v in h5.attrs.items() if k != "created"}
    return data, attrs


def assert_same_data(a, b):
    data_a, _ = contents(a)
    data_b, _ = contents(b)
    assert data_a.keys() == data_b.keys()
    for name in data_a:
        np.testing.assert_array_equal(data_a[name], data_b[name], err_msg=name)


def test_layout_attributes_and_the_recipe_data(tmp_path):
    path = generate(tmp_path / "m.h5", 3, seed=4, chunk_size=2)
    assert path == tmp_path / "m.h5" and not partial_path(path).exists()
    data, attrs = contents(path)
    assert attrs["format"] == "petrov-mesh-dataset" and attrs["format_version"] == 1
    assert attrs["kind"] == "darcy-mesh" and attrs["seed"] == 4
    assert attrs["n_samples"] == attrs["n_complete"] == 3
    assert json.loads(attrs["levels"]) == VARIANTS
    assert json.loads(attrs["params"]) == {**DarcyMeshParams().__dict__, **SMALL}
    assert attrs["h"] == 0.08 and attrs["x_name"] == "a" and attrs["y_name"] == "u"
    assert attrs["petrov_version"]
    p = DarcyMeshParams(**SMALL)
    with h5py.File(path, "r") as h5:
        assert h5["level1"].attrs["spacing"] == 0.04 and h5["remesh"].attrs["refinements"] == -1
        for index in range(3):
            domain, samples = darcy_mesh_sample(p, 4, index)
            stored = read_domain(h5, index)
            assert stored.family == domain.family
            assert all(np.array_equal(x, y) for x, y in zip(stored.loops, domain.loops))
            for variant in VARIANTS:
                group, s = h5[variant], samples[variant]
                lo, hi = group["node_offsets"][index : index + 2]
                t_lo, t_hi = group["triangle_offsets"][index : index + 2]
                np.testing.assert_array_equal(group["points"][lo:hi], s.points)
                np.testing.assert_array_equal(group["triangles"][t_lo:t_hi], s.triangles)
                np.testing.assert_array_equal(group["x"][lo:hi], s.x)
                np.testing.assert_array_equal(group["y"][lo:hi], s.y)
                np.testing.assert_array_equal(group["boundary"][lo:hi], s.boundary)
                assert group["weights"][lo:hi].sum() == pytest.approx(domain.area, rel=1e-12)
                assert (group["y"][lo:hi][s.boundary] == 0).all() and (group["y"][lo:hi][~s.boundary] > 0).all()
    for variant in VARIANTS:
        assert data[f"{variant}/points"].dtype == np.float64 and data[f"{variant}/x"].dtype == np.float32
        assert data[f"{variant}/triangles"].dtype == np.int32 and data[f"{variant}/boundary"].dtype == np.uint8
        assert data[f"{variant}/node_offsets"][-1] == len(data[f"{variant}/points"])


@pytest.mark.parametrize("chain", ["kept", "read back"])  # read back: as after a claim cut off mid-way
def test_interrupted_generation_resumes_to_identical_file(tmp_path, chain):
    ref = generate(tmp_path / "ref.h5", 5, seed=3, chunk_size=2)
    out = tmp_path / "run.h5"

    def stop(done, total):
        raise Interrupt(done)

    with pytest.raises(Interrupt):
        generate(out, 5, seed=3, chunk_size=2, callback=stop)
    assert not out.exists()
    tmp = partial_path(out)
    with h5py.File(tmp, "r+") as h5:
        assert h5.attrs["n_complete"] == 2
        ds = h5["level1/points"]  # a chunk cut short after writing some rows: they must be dropped
        ds.resize((ds.shape[0] + 7, 2))
        if chain == "read back":
            del h5.attrs["hash_chain_samples"]
    seen = []
    generate(out, 5, seed=3, callback=lambda done, total: seen.append(done))
    assert seen == [4, 5]  # resumed after the two samples on disk, in the interrupted run's chunks
    assert_same_data(out, ref)
    assert contents(out)[1]["content_hash"] == contents(ref)[1]["content_hash"]


def test_chunks_and_workers_do_not_change_the_file(tmp_path):
    a = generate(tmp_path / "a.h5", 3, seed=1, chunk_size=1)
    b = generate(tmp_path / "b.h5", 3, seed=1, chunk_size=3, workers=2)
    assert_same_data(a, b)


def test_settings_overwrite_and_one_writer(tmp_path):
    out = tmp_path / "m.h5"
    with pytest.raises(Interrupt):
        generate(out, 3, seed=0, chunk_size=1, callback=lambda d, t: (_ for _ in ()).throw(Interrupt()))
    with pytest.raises(ValueError, match="different settings.*seed.*delete it"):
        generate(out, 3, seed=1)
    generate(out, 3, seed=1, overwrite=True)
    before = out.stat().st_mtime_ns
    generate(out, 3, seed=1)  # the identical complete file: nothing to do, as for grid files
    assert out.stat().st_mtime_ns == before
    with pytest.raises(FileExistsError, match="overwrite"):
        generate(out, 3, seed=2)
    with exclusive_lock(out):
        with pytest.raises(Locked, match="being generated by another process"):
            generate(out, 3, seed=2, overwrite=True)
    assert contents(out)[1]["seed"] == 1


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(resolution=85), ValueError, "mesh dataset: it has no resolution"),
    (dict(hh=0.1), ValueError, "unknown key.*'hh'.*valid keys:.* h, refinements"),
    (dict(h=0.2), ValueError, r"h must be in \[0.005, 0.08\]"),
    (dict(families="holes,circles"), KeyError, "unknown domain family 'circles'"),
    (dict(max_holes=4), ValueError, "max_holes must be an integer in"),
    (dict(low=0.0), ValueError, "low must be a finite positive"),
    (dict(n_samples=0), ValueError, "n_samples must be an integer >= 1"),
])
def test_bad_arguments(tmp_path, kwargs, error, match):
    args = dict(n_samples=2) | kwargs
    out = tmp_path / "bad.h5"
    with pytest.raises(error, match=match):
        generate_dataset("darcy-mesh", out, args.pop("n_samples"), progress=False, **args)
    assert not out.exists() and not partial_path(out).exists()
    with pytest.raises(KeyError, match="unknown dataset kind 'darcy-msh'.*mesh kinds: darcy-mesh"):
        generate_dataset("darcy-msh", out, 2, progress=False)


def test_grid_and_mesh_readers_refuse_each_others_files(tmp_path):
    mesh = generate(tmp_path / "m.h5", 1)
    grid = generate_dataset("darcy", tmp_path / "g.h5", 1, 9, progress=False)
    with pytest.raises(ValueError, match="samples on meshes.*but this reads data on grids: give a file on grids.*"
                                         "open_mesh_dataset in Python"):
        open_dataset(mesh)
    with pytest.raises(ValueError, match="not a petrov mesh dataset.*open_dataset"):
        open_mesh_dataset(grid)


@pytest.mark.parametrize("name, value, match", [
    ("kind", None, "attribute 'kind' is missing; the file is damaged"),
    ("levels", "not json", "attribute levels = 'not json' is not a JSON list"),
    ("levels", '["level0", "level7"]', "attribute levels = .* does not list the file's mesh groups"),
    ("params", "{", "attribute params = '{' is not a JSON object"),
    ("n_complete", 5, "attribute n_complete = 5 is more than n_samples = 1"),
])
def test_damaged_attributes_are_named(tmp_path, capsys, name, value, match):
    path = generate(tmp_path / "m.h5", 1)
    with h5py.File(path, "r+") as h5:
        if value is None:
            del h5.attrs[name]
        else:
            h5.attrs[name] = value
    for read in (mesh_info, lambda p: open_mesh_dataset(p, "level0")):
        with pytest.raises(ValueError, match=match):
            read(path)
    assert main(["info", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"petrov info: error: {path}: attribute") and err.count("\n") == 1


def test_cli_generate_and_info(tmp_path, capsys):
    out = tmp_path / "m.h5"
    assert main(["generate", "darcy-mesh", "--n-samples", "2", "--seed", "3", "-o", str(out), "--h", "0.08",
                 "--refinements", "1", "--modes", "16", "--families", "lshape", "--no-progress"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    for expected in ("kind:        darcy-mesh", "2 of 2 (complete)", "level0 ", "level1 ", "remesh ",
                     "(spacing 0.04)", "domains:     lshape 2", "seed = 3"):
        assert expected in text, expected
    with pytest.raises(SystemExit):  # mesh kinds have no resolution
        main(["generate", "darcy-mesh", "--n-samples", "2", "-o", str(out), "--resolution", "85"])
    with pytest.raises(SystemExit):  # imported meshes are not generated
        main(["generate", "imported-mesh", "--n-samples", "2", "-o", str(out)])
    capsys.readouterr()
    assert main(["info", "--json", str(out)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layout"] == "mesh" and info["levels"]["level0"]["nodes"]["min"] > 100
