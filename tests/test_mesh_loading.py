"""Lazy mesh datasets and point-set batches: one sample read per item, DataLoader workers, padding,
shards, levels."""
import pickle
import warnings

import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from petrov.datasets import generate_dataset
from petrov.datasets.mesh import collate_points, open_mesh_dataset
from petrov.datasets.mesh import loading as mesh_loading
from petrov.datasets.hdf5_files import partial_path

N = 5


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    out = tmp_path_factory.mktemp("mesh") / "m.h5"
    return generate_dataset("darcy-mesh", out, N, seed=6, progress=False, h=0.08, refinements=1, modes=16)


def test_items_are_the_stored_rows(path):
    ds = open_mesh_dataset(path, level="level1")
    assert len(ds) == N and ds.variant == "level1"
    with h5py.File(path, "r") as h5:
        group = h5["level1"]
        for i in (0, 3):
            item = ds[i]
            lo, hi = group["node_offsets"][i : i + 2]
            t_lo, t_hi = group["triangle_offsets"][i : i + 2]
            assert item["index"] == i
            np.testing.assert_array_equal(item["pos"].numpy(), group["points"][lo:hi].astype(np.float32))
            np.testing.assert_array_equal(item["x"].numpy(), group["x"][lo:hi])
            np.testing.assert_array_equal(item["y"].numpy(), group["y"][lo:hi])
            np.testing.assert_array_equal(item["boundary"].numpy(), group["boundary"][lo:hi] == 1)
            np.testing.assert_array_equal(item["triangles"].numpy(), group["triangles"][t_lo:t_hi])
            assert item["x"].shape == item["y"].shape == (hi - lo, 1) and item["weights"].shape == (hi - lo,)
            assert item["x"].dtype == torch.float32 and item["boundary"].dtype == torch.bool
            assert item["triangles"].dtype == torch.int64


def test_only_the_asked_samples_are_read(path, monkeypatch):
    reads = []
    real = mesh_loading.read_sample
    monkeypatch.setattr(mesh_loading, "read_sample", lambda group, i, off: reads.append(i) or real(group, i, off))
    ds = open_mesh_dataset(path, level=0, indices=[4, 1])
    assert reads == []  # opening reads offsets only
    ds[1]
    assert reads == [1]


def test_a_split_in_memory_gives_the_items_read_from_the_file_and_reads_no_more(path, monkeypatch):
    lazy = open_mesh_dataset(path, level="level1", indices=[3, 1, 2])
    loaded = lazy.in_memory()
    monkeypatch.setattr(mesh_loading, "open_h5", None)  # opening the file from here on would fail
    for ds in (loaded, loaded.subset([2, 0]), pickle.loads(pickle.dumps(loaded))):
        for i in range(len(ds)):
            got, index = ds[i], int(ds.indices[i])
            expected = lazy[[3, 1, 2].index(index)]
            assert got.keys() == expected.keys() and got["index"] == index
            for key in ("x", "y", "pos", "weights", "boundary", "triangles"):
                torch.testing.assert_close(got[key], expected[key], rtol=0, atol=0)


def test_dataloader_workers_and_pickling(path):
    ds = open_mesh_dataset(path, level="remesh")
    ds[0]  # opens this process's handle; a worker opens its own
    ds2 = pickle.loads(pickle.dumps(ds))
    assert ds2._h5 is None and torch.equal(ds2[2]["y"], ds[2]["y"])
    loader = DataLoader(ds, batch_size=2, num_workers=2, collate_fn=collate_points)
    batches = list(loader)
    assert [b["indices"].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    again = collate_points([ds[2], ds[3]])
    for name in ("x", "y", "pos", "weights", "mask", "boundary"):
        assert torch.equal(batches[1][name], again[name])


def test_collate_pads_point_sets(path):
    ds = open_mesh_dataset(path, level="level0")
    items = [ds[i] for i in range(3)]
    batch = collate_points(items)
    counts = [len(item["x"]) for item in items]
    b, n = 3, max(counts)
    assert batch["x"].shape == (b, n, 1) and batch["pos"].shape == (b, n, 2) and batch["weights"].shape == (b, n)
    assert batch["mask"].dtype == torch.bool and batch["mask"].sum(dim=1).tolist() == counts
    assert batch["indices"].tolist() == [0, 1, 2] and len(batch["triangles"]) == 3
    for k, item in enumerate(items):
        m = counts[k]
        for name in ("x", "y", "pos", "weights", "boundary"):
            assert torch.equal(batch[name][k, :m], item[name])
            assert not batch[name][k, m:].any()  # padding: zeros / False
        assert torch.equal(batch["triangles"][k], item["triangles"])
    # the relative L2 error in the weighted norm of the point-set interface ignores the padding
    assert torch.allclose((batch["weights"] * batch["y"][..., 0] ** 2).sum(1),
                          torch.stack([(it["weights"] * it["y"][:, 0] ** 2).sum() for it in items]))


def test_collate_refuses_what_is_not_a_list_of_items(path):
    item = open_mesh_dataset(path, level="level0")[0]
    with pytest.raises(ValueError, match=r"item 1 lacks \['y'\]"):
        collate_points([item, {k: v for k, v in item.items() if k != "y"}])
    with pytest.raises(TypeError, match="takes a list of MeshDataset items .*got Tensor"):
        collate_points(torch.ones(2, 3))
    with pytest.raises(TypeError, match="item 0 is a int"):
        collate_points([1])


def test_shards_split_the_samples(path):
    ds = open_mesh_dataset(path, level=1, indices=slice(1, None))
    shards = [ds.shard(rank, 2) for rank in range(2)]
    assert [s.indices.tolist() for s in shards] == [[1, 3], [2, 4]]
    assert shards[1][0]["index"] == 2
    assert ds.subset([0, -1]).indices.tolist() == [1, 4]
    with pytest.raises(ValueError, match="rank"):
        ds.shard(2, 2)
    assert repr(ds).startswith(f"MeshDataset('{path}', kind='darcy-mesh', level='level1', samples=4, nodes ")


def test_levels_are_chosen_by_name_or_number(path):
    assert open_mesh_dataset(path, level=0).variant == "level0"
    with pytest.raises(ValueError, match=r"several meshes; choose level= one of \['level0', 'level1', 'remesh'\]"):
        open_mesh_dataset(path)
    with pytest.raises(ValueError, match="no mesh level 'level2'"):
        open_mesh_dataset(path, level=2)
    with pytest.raises(IndexError, match="out of range"):
        open_mesh_dataset(path, level=0, indices=[N])
    with pytest.raises(FileNotFoundError):
        open_mesh_dataset(path.with_name("nope.h5"), level=0)


def test_incomplete_files_load_their_complete_samples(tmp_path):
    out = tmp_path / "m.h5"

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_dataset("darcy-mesh", out, 3, progress=False, chunk_size=1, callback=stop, h=0.08, refinements=0)
    with pytest.warns(UserWarning, match="incomplete"):
        ds = open_mesh_dataset(partial_path(out), level=0)
    assert len(ds) == 1 and ds[0]["index"] == 0
    ds.close()
    with h5py.File(partial_path(out), "r+") as h5:
        h5["level0/y"][3] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"sample 0 \(level0\) has NaN/Inf in \['y'\]"):
            open_mesh_dataset(partial_path(out), level=0)[0]
