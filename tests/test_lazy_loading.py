"""Grid files read per batch (``data.lazy``): the same samples, the same training, only a rank's shard read."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from petrov.datasets import generate_dataset, open_dataset
from petrov.datasets.storage import StoredData
from petrov.train.config import config_from_dict
from petrov.train.data import data_loader, to_batch
from petrov.train.trainer import train


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("lazy")
    burgers, darcy = root / "burgers.h5", root / "darcy.h5"
    generate_dataset("burgers", burgers, n_samples=14, resolution=64, progress=False)
    generate_dataset("darcy-inverse", darcy, n_samples=6, resolution=21, coarse_resolution=5, progress=False)
    return burgers, darcy


@pytest.mark.parametrize("which, options", [("burgers", {"resolution": 32}),
                                            ("darcy", {"resolution": 21, "coarse_resolution": 5})])
def test_lazy_items_equal_the_loaded_arrays(files, which, options):
    path = files[0] if which == "burgers" else files[1]
    eager = open_dataset(path, indices=[5, 1, 3], **options)
    lazy = open_dataset(path, indices=[5, 1, 3], lazy=True, **options)
    assert len(lazy) == 3 and lazy.grid == eager.grid and lazy.grid_out == eager.grid_out
    torch.testing.assert_close(lazy.coords, eager.coords, rtol=0, atol=0)
    for k in range(3):
        x, y = lazy[k]
        torch.testing.assert_close(x, eager.x[k], rtol=0, atol=0)
        torch.testing.assert_close(y, eager.y[k], rtol=0, atol=0)


def test_a_rank_reads_only_its_shard(files, monkeypatch):
    read = []
    original = StoredData.read

    def spy(self, name, indices, stride, *args, **kwargs):
        read.extend(int(i) for i in np.asarray(indices).reshape(-1))
        return original(self, name, indices, stride, *args, **kwargs)

    lazy = open_dataset(files[0], resolution=32, indices=range(2, 12), lazy=True)
    monkeypatch.setattr(StoredData, "read", spy)
    sampler = DistributedSampler(lazy, num_replicas=2, rank=1, shuffle=False)
    seen = []
    for raw in data_loader(lazy, 2, sampler):
        seen += to_batch(raw, lazy, torch.device("cpu")).positions.tolist()
    shard = sorted(int(lazy.indices[k]) for k in seen)
    assert seen == list(sampler) and sorted(set(read)) == shard and len(shard) == 5


def test_training_reads_per_batch_to_the_same_weights(files, tmp_path):
    def run(lazy: bool):
        cfg = config_from_dict({
            "data": {"path": str(files[0]), "train_resolution": 32, "n_train": 8, "n_val": 3, "n_test": 3,
                     "lazy": lazy},
            "model": {"name": "fno1d", "options": {"width": 4, "modes": 3, "n_layers": 1, "proj_hidden": 4}},
            "optim": {"epochs": 2, "batch_size": 4},
            "run": {"device": "cpu", "progress": False, "threads": 1},
        })
        result = train(cfg, tmp_path / f"lazy-{lazy}")
        return result, torch.load(tmp_path / f"lazy-{lazy}" / "best.pt", weights_only=True)["state_dict"]

    (eager, w_eager), (lazy, w_lazy) = run(False), run(True)
    assert eager.best_val_rel_l2 == lazy.best_val_rel_l2
    assert [r["mean"] for r in eager.test] == [r["mean"] for r in lazy.test]
    for key in w_eager:
        torch.testing.assert_close(w_lazy[key], w_eager[key], rtol=0, atol=0)
