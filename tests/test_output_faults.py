"""Bad output locations and bad inputs of evaluate, invert, train and generate: each is one clear line
saying what is wrong and what to do, found before the work, and nothing half-made is left behind."""
from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from petrov.cli import main as cli_main
from petrov.common.disk_space import NoSpace
from petrov.common.path_checks import Unwritable, check_writable, ensure_dir, require_space
from petrov.common.outputs import OutputConflict, check_outputs
from petrov.datasets import generate_dataset
from petrov.datasets.mesh.importing import import_meshes
from petrov.evaluate import load_run, parse_indices
from petrov.inverse import invert, runner
from petrov.inverse.api import parse_noise
from petrov.inverse.runner import PARTIAL
from petrov.operators.io import DamagedCheckpoint, load_checkpoint
from petrov.train.config import config_from_dict
from petrov.train.trainer import train


def _mounted(point: str, kind: str) -> bool:
    try:
        with open("/proc/self/mounts") as fh:
            return any(line.split()[1:3] == [point, kind] for line in fh)
    except OSError:
        return False


needs_proc = pytest.mark.skipif(not _mounted("/proc", "proc"), reason="needs /proc mounted (Linux)")
needs_sys = pytest.mark.skipif(not _mounted("/sys", "sysfs"), reason="needs /sys mounted (Linux)")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny trained inverse Darcy run and its data file (21 x 21 observations)."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("outfaults")
    data = root / "darcy-21.h5"
    generate_dataset("darcy-inverse", data, 20, resolution=21, seed=2, progress=False, coarse_resolution=6)
    cfg = config_from_dict({
        "data": {"path": str(data), "n_train": 12, "n_val": 4, "n_test": 4, "kind": "darcy-inverse",
                 "coarse_resolution": 6},
        "model": {"name": "galerkin2d_inverse", "options": {"coarse_size": 6, "d_model": 8, "n_layers": 1}},
        "optim": {"epochs": 1, "batch_size": 4, "min_warmup_steps": 0},
        "run": {"device": "cpu", "progress": False}})
    train(cfg, root / "inverse")
    return root / "inverse", data, cfg


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") <= 2, err  # one to three lines
    assert "Errno" not in err and "Traceback" not in err, err
    return err


# --- 1. an output folder that cannot be made -------------------------------------------------------

@needs_proc
def test_evaluate_out_in_proc_says_the_folder_cannot_be_created(run, capsys):
    run_dir, _, _ = run
    assert cli_main(["evaluate", str(run_dir), "--no-plots", "--out", "/proc/petrov-test"]) == 1
    err = _error(capsys)
    assert "cannot create the output directory /proc/petrov-test" in err
    assert "choose a writable location with --out" in err
    assert "No such file" not in err


@needs_sys
def test_evaluate_out_in_sys_says_the_folder_cannot_be_created(run, capsys):
    run_dir, _, _ = run
    assert cli_main(["evaluate", str(run_dir), "--no-plots", "--out", "/sys/petrov-test"]) == 1
    err = _error(capsys)
    assert "cannot create the output directory /sys/petrov-test" in err and "--out" in err
    assert "Operation not permitted" not in err


@needs_proc
def test_invert_out_in_proc_says_the_folder_cannot_be_created(run, capsys):
    run_dir, data, _ = run
    code = cli_main(["invert", str(data), "--method", "learned", "--inverse-run", str(run_dir), "--indices=-1:",
                     "--out", "/proc/petrov-inv", "--no-plots", "--no-progress"])
    assert code == 1
    err = _error(capsys)
    assert "cannot create the output directory /proc/petrov-inv" in err and "choose a writable location" in err


@needs_proc
def test_train_out_in_proc_is_refused_before_the_work(run):
    _, _, cfg = run
    with pytest.raises(Unwritable, match=r"cannot create the run directory /proc/petrov-run: .*proc file system"):
        train(cfg, "/proc/petrov-run")


def test_a_failing_mkdir_is_put_into_words(tmp_path, monkeypatch):
    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(Unwritable) as caught:
        ensure_dir(tmp_path / "new" / "out", "output directory", "--out")
    text = str(caught.value)
    assert text.startswith(f"cannot create the output directory {tmp_path / 'new' / 'out'}: ")
    assert "read-only file system" in text and text.endswith("choose a writable location with --out")
    assert "Errno" not in text


def test_a_writable_folder_passes_the_check_and_leaves_nothing(tmp_path):
    check_writable(tmp_path / "a" / "b", "output directory", "--out")
    check_writable(tmp_path, "output directory", "--out")
    assert list(tmp_path.iterdir()) == []  # the probe folder is gone


# --- 2. an unwritable place is not a full disk -----------------------------------------------------

@needs_proc
def test_require_space_in_proc_says_not_writable_not_disk_full():
    with pytest.raises(Unwritable) as caught:
        require_space(Path("/proc/petrov.h5"), 10**6, "free some space", flag="-o")
    assert "disk full" not in str(caught.value)
    assert str(caught.value).startswith("cannot write /proc/petrov.h5: /proc is on the system's virtual proc file ")
    assert str(caught.value).endswith("; choose a writable location with -o")


def test_require_space_still_reports_a_full_disk_where_it_can_write(tmp_path):
    with pytest.raises(NoSpace, match=rf"^disk full: cannot write {tmp_path}/b.h5 \(.* needed, .* free in {tmp_path}\); "
                                      r"free some space$"):
        require_space(tmp_path / "b.h5", 10**20, "free some space")


@needs_proc
def test_generate_into_proc_is_not_a_full_disk(capsys):
    code = cli_main(["generate", "burgers", "--n-samples", "2", "--resolution", "64", "-o", "/proc/petrov.h5"])
    assert code == 1
    err = _error(capsys)
    assert "disk full" not in err and "cannot write /proc/petrov.h5" in err and "-o" in err


# --- 3. an absurd noise level; no partial folder after an early failure ---------------------------

def test_noise_level_is_bounded():
    assert parse_noise("0.05") == 0.05 and parse_noise(1) == 1.0 and parse_noise("observed") is None
    for bad in ("1e30", 1.5, "inf", "nan", -0.1):
        with pytest.raises(ValueError, match=r"noise"):
            parse_noise(bad)
    with pytest.raises(ValueError, match=r"too large.*\[0, 1\]"):
        parse_noise("1e30")


def test_invert_with_huge_noise_fails_before_any_work(run, tmp_path, capsys):
    run_dir, data, _ = run
    out = tmp_path / "inv" / "nhuge"
    code = cli_main(["invert", str(data), "--method", "learned", "--inverse-run", str(run_dir), "--indices=-2:",
                     "--noise", "1e30", "--out", str(out), "--no-plots", "--no-progress"])
    assert code == 1
    err = _error(capsys)
    assert "noise 1e+30 is too large" in err and "cannot take inputs" not in err
    assert not (tmp_path / "inv").exists()


def test_a_failed_inversion_leaves_no_partial_folder(run, tmp_path, monkeypatch):
    run_dir, data, _ = run

    def broken(*args, **kwargs):
        raise RuntimeError("the method failed")

    monkeypatch.setattr(runner, "_chunk_task", broken)
    out = tmp_path / "inv"
    with pytest.raises(RuntimeError, match="the method failed"):
        invert(data, "learned", inverse_run=run_dir, indices=slice(-2, None), out_dir=out, plots=False)
    assert not out.exists()


def test_a_failed_inversion_keeps_finished_chunks(run, tmp_path, monkeypatch):
    run_dir, data, _ = run
    real, calls = runner._chunk_task, []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the method failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "_chunk_task", second_fails)
    out = tmp_path / "inv"
    with pytest.raises(RuntimeError, match="the method failed"):
        invert(data, "learned", inverse_run=run_dir, indices=slice(-2, None), out_dir=out, plots=False,
               chunk_size=1)
    assert (out / PARTIAL / "chunk-000000.npz").is_file()  # nothing finished is lost


# --- 4. the observation shape as the user gave it --------------------------------------------------

def test_a_one_dimensional_observation_reports_the_given_shape(run, tmp_path, capsys):
    run_dir, _, _ = run
    np.save(tmp_path / "obs_1d.npy", np.ones((2, 21)))
    code = cli_main(["invert", str(tmp_path / "obs_1d.npy"), "--method", "learned", "--inverse-run", str(run_dir),
                     "--noise", "observed", "--out", str(tmp_path / "c2"), "--no-plots", "--no-progress"])
    assert code == 1
    err = _error(capsys)
    assert "has shape (2, 21)" in err and "(1, 2, 21)" not in err and "(N, m, m)" in err


# --- 5. --indices lists what invert accepts --------------------------------------------------------

def test_invert_indices_message_lists_only_what_invert_accepts(run, tmp_path, capsys):
    run_dir, data, _ = run
    code = cli_main(["invert", str(data), "--method", "learned", "--inverse-run", str(run_dir), "--indices",
                     "1:2:3:4", "--out", str(tmp_path / "c3"), "--no-plots", "--no-progress"])
    assert code == 1
    err = _error(capsys)
    assert "--indices must be 'all' or 'a:b'" in err and "'test'" not in err
    with pytest.raises(ValueError, match=r"--indices must be 'test', 'all' or 'a:b'"):
        parse_indices("1:2:3:4")  # evaluate's still accepts 'test'
    with pytest.raises(ValueError, match=r"--calibrate must be 'all' or 'a:b'"):
        parse_indices("x", test=False, flag="--calibrate")


# --- 6. a truncated checkpoint -------------------------------------------------------------------

def test_a_truncated_checkpoint_is_one_short_line_with_a_remedy(run, tmp_path, capsys):
    run_dir, _, _ = run
    copy = tmp_path / "b3"
    shutil.copytree(run_dir, copy)
    with open(copy / "best.pt", "r+b") as fh:
        fh.truncate(2000)
    assert cli_main(["evaluate", str(copy), "--no-plots"]) == 1
    err = _error(capsys)
    assert "best.pt is damaged (corrupt or truncated?" in err and "--overwrite" in err
    assert "miniz" not in err and len(err.replace(str(tmp_path), "")) < 300  # short apart from the paths
    with pytest.raises(DamagedCheckpoint, match=r"restore it from a copy, or save or train the model again$"):
        load_checkpoint(copy / "best.pt")


# --- 7. --overwrite worded for the command line and for Python ------------------------------------

def test_overwrite_advice_reads_well_for_both(tmp_path):
    (tmp_path / "d.h5").write_text("x")
    with pytest.raises(OutputConflict, match=r"pass --overwrite \(overwrite=True in Python\)"):
        check_outputs(tmp_path, "generate", ["d.h5"], scope="file", flag="-o")
    (tmp_path / "m.npz").write_text("x")
    with pytest.raises(FileExistsError, match=r"pass --overwrite \(overwrite=True in Python\)"):
        import_meshes(tmp_path / "m.npz", tmp_path / "d.h5", x_field="a", y_field="u")


# --- 8. an edited config.json model section -------------------------------------------------------

def test_an_edited_model_section_is_warned_about(run, tmp_path, recwarn):
    run_dir, _, _ = run
    load_run(run_dir)
    assert not [w for w in recwarn if "model section" in str(w.message)]  # an untouched run: silent
    copy = tmp_path / "c"
    shutil.copytree(run_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    config["model"]["name"] = "nope"
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.warns(UserWarning, match=r"model\.name is 'nope' there.*the checkpoint's model config is used"):
        setup = load_run(copy)
    assert setup.operator is not None
