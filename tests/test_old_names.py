"""What petrov 0.3 dropped of 0.1 fails plainly: the module paths that moved in 0.2, the names their
modules re-exported, ``model.cfg``, run checkpoints without the input noise 0.2 saves with them, run
folders without a manifest, and temporary files of writers that held no lock.

tests/data/checkpoints-0.1/run-latent2d_inverse-best.pt was written by petrov 0.1 (commit 1f422fa):
``latent2d_inverse`` trained one epoch on inverse Darcy data.
"""
from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

import pytest

from petrov.common.files import atomic_write
from petrov.common.outputs import OutputConflict, check_outputs, read_manifest
from petrov.operators import build_model
from petrov.train import load_operator

RUN_OF_0_1 = Path(__file__).parent / "data" / "checkpoints-0.1" / "run-latent2d_inverse-best.pt"


@pytest.mark.parametrize("old", ["petrov.train.cli", "petrov.train.evaluate", "petrov.train.inverse",
                                 "petrov.datasets.commands", "petrov.operators.mixers", "petrov.operators.latent",
                                 "petrov.operators.normalization", "petrov.operators.models.latent2d"])
def test_a_module_path_of_0_1_is_not_found(old):
    with pytest.raises(ModuleNotFoundError, match=f"No module named '{old}'"):
        importlib.import_module(old)


@pytest.mark.parametrize("module, name", [("petrov.train", "invert"),
                                          ("petrov.datasets.storage", "generate_grid_dataset"),
                                          ("petrov.datasets.storage", "partial_path"),
                                          ("petrov.datasets.mesh", "generate_mesh_dataset"),
                                          ("petrov.datasets.mesh.storage", "generate_mesh_dataset")])
def test_a_name_a_module_kept_for_0_1_is_gone(module, name):
    with pytest.raises(AttributeError, match=f"has no attribute '{name}'"):
        getattr(importlib.import_module(module), name)


def test_a_model_has_config_not_cfg():
    model = build_model("fno1d", width=4, modes=2, n_layers=1)
    assert model.config.width == 4
    with pytest.raises(AttributeError, match="'cfg'"):
        model.cfg


def test_a_run_checkpoint_of_0_1_is_refused_naming_its_version():
    with pytest.raises(ValueError) as caught:
        load_operator(RUN_OF_0_1)
    assert str(caught.value) == (
        f"{str(RUN_OF_0_1)!r} is a run checkpoint of petrov 0.1.0, which this petrov no longer reads (it holds no "
        f"input noise); train the run again, or load it with petrov 0.2")


def test_a_run_folder_without_a_manifest_is_a_users_folder(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "last.pt").write_bytes(b"")
    assert read_manifest(tmp_path) == {}
    with pytest.raises(OutputConflict, match="holds files petrov did not write for `petrov train`"):
        check_outputs(tmp_path, "train", ["config.json", "last.pt", "best.pt"])


def test_a_users_file_named_like_an_old_temporary_file_is_left_alone(tmp_path):
    mine = tmp_path / ".notes.abcdefgh.tmp"
    mine.write_text("mine")
    old = time.time() - 3600
    os.utime(mine, (old, old))
    atomic_write(tmp_path / "m.json", "{}")  # sweeps the folder of dead writers' temporary files
    assert mine.read_text() == "mine"
