"""The one write path and the output-folder rule (petrov.common.files, petrov.common.outputs).

A full disk is a small tmpfs mounted for the test where the machine allows it (root), skipped with
the reason otherwise; the file-size limit (``RLIMIT_FSIZE``, EFBIG) provokes the same failure anywhere.
"""
from __future__ import annotations

import errno
import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from petrov.common.disk_space import NoSpace, format_size
from petrov.common.files import atomic_write, remove_stale_temps, unraisable_errors, write_json
from petrov.common.outputs import MANIFEST, OutputConflict, check_outputs, claim_outputs, read_manifest
from petrov.datasets import generate_dataset, import_arrays
from petrov.operators import Attention, build_model, load_model, save_model


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs at tmp_path/disk (unmounted afterwards); skipped where mounting is not allowed."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not sys.platform.startswith("linux") or shutil.which("mount") is None:
        pytest.skip("a small tmpfs needs Linux and mount(8)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (not root?): {done.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int = 0) -> None:
    """Fill ``disk`` up to ``leave`` free bytes."""
    free = shutil.disk_usage(disk).free - leave
    with open(disk / "filler", "wb") as fh:
        try:
            fh.write(b"\0" * max(free, 0))
        except OSError:
            pass


def hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") and p.name != MANIFEST)


# --- a full disk ------------------------------------------------------------------------------------

def test_a_full_disk_says_so_and_keeps_the_old_file(small_disk):
    target = small_disk / "metrics.json"
    write_json(target, {"old": 1})
    fill(small_disk, leave=4096)
    with pytest.raises(NoSpace, match=r"disk full: cannot write .*metrics.json \(2 MB needed, .* free in "):
        atomic_write(target, b"x" * 2_000_000)
    assert json.loads(target.read_text()) == {"old": 1}  # untouched
    assert hidden(small_disk) == []  # no temporary file left


def test_the_file_size_limit_is_reported_as_such(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # Python ignores SIGXFSZ: writes get EFBIG
    try:
        with pytest.raises(NoSpace, match=r"file size limit reached writing .*big.bin \(the shell's `ulimit -f`") as err:
            atomic_write(tmp_path / "big.bin", b"x" * 200_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert err.value.errno == errno.EFBIG
    assert list(tmp_path.iterdir()) == []


def test_hdf5_write_errors_are_raised_before_the_rename(small_disk):
    """h5py reports a failed chunk write only when it frees the dataset, and HDF5 can crash the
    interpreter at exit after one: the writer raises a clear error, renames nothing, exits cleanly.
    (In a process of its own, so that a crash at exit would show.)"""
    fill(small_disk, leave=200_000)
    code = ("import sys, numpy as np\n"
            "from petrov.common.files import atomic_path\n"
            "from petrov.datasets.hdf5_files import writing_h5\n"
            "target = sys.argv[1]\n"
            "try:\n"
            "    with atomic_path(target) as tmp, writing_h5(tmp, 'w', shown=target, locking=False) as h5:\n"
            "        ds = h5.create_dataset('a', shape=(64, 4096), dtype='float32', chunks=(1, 4096))\n"
            "        for i in range(64):\n"
            "            ds[i] = np.ones(4096, np.float32)\n"
            "except Exception as err:\n"
            "    print(type(err).__name__, err)\n")
    done = subprocess.run([sys.executable, "-c", code, str(small_disk / "c.h5")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("NoSpace disk full: cannot write ") and "c.h5" in done.stdout
    assert not (small_disk / "c.h5").exists() and hidden(small_disk) == []


def test_a_generation_refuses_a_disk_too_small_before_any_work(small_disk):
    with pytest.raises(NoSpace, match=r"disk full: cannot write .*disk/b\.h5 \(1.42 MB needed, 1.0\d MB free in .*disk\); "
                                      r"free some space, or generate fewer samples or a lower resolution$"):
        generate_dataset("burgers", small_disk / "b.h5", 160, resolution=1024, progress=False)
    assert sorted(p.name for p in small_disk.iterdir()) == []


def test_a_generation_that_cannot_create_its_file_leaves_nothing(small_disk, monkeypatch):
    import petrov.datasets.grid_generation as grid_generation

    monkeypatch.setattr(grid_generation, "check_resources", lambda *a, **k: None)  # as if the disk filled meanwhile
    fill(small_disk, leave=50_000)
    with pytest.raises(NoSpace, match=r"disk full: cannot write .*b\.h5\.partial \(910 kB needed, .* free"):
        generate_dataset("burgers", small_disk / "b.h5", 100, resolution=1024, progress=False)
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


def test_a_checkpoint_on_a_full_disk(small_disk):
    model = build_model("fno1d", width=64, modes=16)
    fill(small_disk, leave=20_000)
    with pytest.raises(NoSpace, match=r"disk full: cannot write .*m\.pt \(.* needed"):
        save_model(model, small_disk / "m.pt")
    assert not (small_disk / "m.pt").exists() and hidden(small_disk) == []


def test_sizes_read_as_people_write_them():
    assert format_size(512) == "512 bytes"
    assert format_size(1_500_000) == "1.5 MB"
    assert format_size(2.5e9) == "2.5 GB"
    assert format_size(345e12) == "345 TB"


# --- temporary files ----------------------------------------------------------------------------------

def test_temporary_files_of_dead_writers_are_removed_by_the_next_write(tmp_path):
    """A writer killed outright leaves its temporary file; the next write into the folder removes it,
    but never the file of a writer still at work (it holds a lock on it)."""
    code = ("import os, sys\nfrom petrov.common.files import atomic_path\n"
            "with atomic_path(sys.argv[1]) as tmp:\n"
            "    tmp.write_bytes(b'half'); print(tmp, flush=True); sys.stdin.readline(); os._exit(9)\n")
    dead = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.h5")], input="\n", capture_output=True,
                          text=True)
    left = Path(dead.stdout.strip())
    assert dead.returncode == 9 and left.exists()  # killed: its temporary file stays
    assert remove_stale_temps(tmp_path) == [left]
    alive = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "b.h5")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        working = Path(alive.stdout.readline().strip())
        assert remove_stale_temps(tmp_path) == [] and working.exists()  # a live writer's file is kept
    finally:
        alive.communicate("\n")  # it dies too, leaving its file
    assert working.exists()
    atomic_write(tmp_path / "c.json", "{}")  # any later write sweeps the folder
    assert hidden(tmp_path) == []


def test_errors_python_could_only_print_are_raised():
    class Broken:
        def __del__(self):
            raise OSError(errno.ENOSPC, "write failed")

    with pytest.raises(OSError, match="write failed"):
        with unraisable_errors():
            Broken()


# --- the output-folder rule ---------------------------------------------------------------------------

NAMES = ("metrics.json", "metrics.csv", "plot.png")


def test_a_folder_with_a_users_files_needs_overwrite_and_keeps_the_rest(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").write_text("mine")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputConflict, match=r"holds files petrov did not write for `petrov evaluate` \(metrics.json, "
                                             r"notes.txt\); choose a new or empty --out, or pass --overwrite"):
        check_outputs(out, "evaluate", NAMES)
    claim_outputs(out, "evaluate", NAMES, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine"  # kept; metrics.json will be written over
    assert read_manifest(out)["metrics.json"] == "evaluate"


def test_a_command_never_writes_over_another_commands_outputs(tmp_path):
    run = tmp_path / "run"
    claim_outputs(run, "train", ("config.json", "metrics.json", "best.pt"))
    (run / "metrics.json").write_text("{}")
    (run / "best.pt").write_text("")
    for overwrite in (False, True):
        with pytest.raises(OutputConflict, match=r"run/metrics.json was written by `petrov train`; `petrov "
                                                 r"evaluate` does not write over another command's outputs"):
            check_outputs(run, "evaluate", NAMES, overwrite=overwrite)
    with pytest.raises(OutputConflict, match=r"best.pt was written by `petrov train`"):
        check_outputs(run, "generate", ["best.pt"], overwrite=True, scope="file", flag="-o")


def test_a_commands_earlier_outputs_are_replaced_as_a_whole(tmp_path):
    out = tmp_path / "eval"
    claim_outputs(out, "evaluate", NAMES)
    for name in NAMES:
        (out / name).write_text("first")
    (out / "notes.txt").write_text("a user's note, added later")
    claim = claim_outputs(out, "evaluate", NAMES)  # a second evaluation, e.g. without plots
    assert sorted(claim.removed) == sorted(NAMES)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["notes.txt"]
    claim_outputs(out, "evaluate", NAMES, resume=True)  # resuming keeps what is there


def test_nested_output_folders_are_not_a_users(tmp_path):
    out = tmp_path / "out"
    claim_outputs(out / "eval", "evaluate", NAMES)
    check_outputs(out, "train", ("config.json", "last.pt", "best.pt", "metrics.json"))  # eval/ is petrov's
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputConflict, match=r"holds files petrov did not write for `petrov train` \(notes.txt\)"):
        check_outputs(out, "train", ("config.json", "last.pt", "best.pt", "metrics.json"))


def test_an_output_file_that_is_a_directory_or_exists(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"-o .* is a directory; give the output file's name"):
        check_outputs(tmp_path.parent, "generate", [tmp_path.name], scope="file", flag="-o")
    (tmp_path / "d.h5").write_text("")
    with pytest.raises(OutputConflict, match=r"d.h5 already exists; pass --overwrite \(overwrite=True in Python\)"):
        import_arrays(tmp_path / "d.h5", np.ones((2, 8)), np.ones((2, 8)), grid="periodic")


# --- what a model file may hold ---------------------------------------------------------------------------

def test_a_model_saved_with_numpy_values_and_paths_loads(tmp_path):
    model = build_model("fno1d", width=8, modes=4, n_layers=1)
    extra = {"lr": np.float64(1e-3), "ids": np.arange(3), "where": tmp_path / "data.h5", "n": np.int32(2),
             "nested": [np.float32(0.5), {"ok": True}]}
    save_model(model, tmp_path / "m.pt", extra=extra)
    loaded, back = load_model(tmp_path / "m.pt", return_extra=True)
    assert back["lr"] == 1e-3 and back["n"] == 2 and back["where"] == str(tmp_path / "data.h5")
    assert torch.equal(back["ids"], torch.arange(3)) and back["nested"] == [0.5, {"ok": True}]
    assert loaded.config.width == 8


def test_a_model_file_that_could_not_be_loaded_is_never_written(tmp_path):
    model = build_model("fno1d", width=8, modes=4, n_layers=1)
    with pytest.raises(ValueError, match=r"extra\['f'\] is a function, which a checkpoint cannot hold"):
        save_model(model, tmp_path / "m.pt", extra={"f": lambda x: x})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_loading_onto_a_missing_device_or_from_a_directory(tmp_path):
    model = build_model("fno1d", width=8, modes=4, n_layers=1)
    save_model(model, tmp_path / "m.pt")
    with pytest.raises(ValueError, match=r"map_location='cuda' but no CUDA device is available here"):
        load_model(tmp_path / "m.pt", map_location="cuda")
    with pytest.raises(IsADirectoryError, match=r"is a directory \(it holds m.pt\); give the .pt file"):
        load_model(tmp_path)
    with h5py.File(tmp_path / "d.h5", "w"):
        pass
    with pytest.raises(ValueError, match=r"is an HDF5 file \(a dataset\?\), not a petrov model checkpoint"):
        load_model(tmp_path / "d.h5")


def test_attention_refuses_nan_in_its_inputs():
    layer = Attention(8, n_heads=2, pos_dim=1)
    x, pos = torch.randn(1, 16, 8), torch.rand(1, 16, 1)
    bad_x, bad_pos = x.clone(), pos.clone()
    bad_x[0, 3, 1] = float("nan")
    bad_pos[0, 2, 0] = float("inf")
    with pytest.raises(ValueError, match=r"Attention: x contains NaN or inf \(1 of 128 values\)"):
        layer(bad_x, pos)
    with pytest.raises(ValueError, match=r"Attention: pos contains NaN or inf"):
        layer(x, bad_pos)
    with pytest.raises(ValueError, match=r"second argument is an AttentionConfig, got int 2"):
        Attention(8, 2)
