"""Faults and bad inputs as a user meets them at the command line: nothing lost, nothing silently wrong.

Each test runs ``petrov`` through its real entry point, in-process (``petrov.cli.main``: the same
parsing, command and one-line error report, without paying a process start-up per case), on a tiny
Burgers file, a tiny Darcy file and a two-epoch run copied into the test's own folder.  The faults that
need a process of their own (signals, closed pipes, kill -9, a disk filling up under a running
generation) are in ``test_faults_processes.py``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from petrov.datasets import generate_dataset, import_arrays
from petrov.train.config import load_config
from petrov.train.trainer import DataChanged, train

@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_fno1d_toml):
    """b.h5 (Burgers, 16 samples at 64), d.h5 (Darcy, 16 at 29), tiny.toml and run1 (trained on b.h5)."""
    root = tmp_path_factory.mktemp("world")
    generate_dataset("burgers", root / "b.h5", 16, resolution=64, progress=False)
    generate_dataset("darcy", root / "d.h5", 16, resolution=29, progress=False)
    (root / "tiny.toml").write_text(tiny_fno1d_toml(2))
    cwd = os.getcwd()
    os.chdir(root)  # the run records the relative data path "b.h5"
    try:
        train(load_config("tiny.toml"), "run1")
    finally:
        os.chdir(cwd)
    return root


def one_error(err: str, command: str) -> str:
    """The single error line of a failed command (and nothing else on stderr)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"petrov {command}: error: "), err
    return lines[0]


def visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


# --- existing files ----------------------------------------------------------------------------------

def test_train_refuses_a_folder_of_a_users_files_unless_overwrite(here, cli):
    out = here / "out"
    out.mkdir()
    (out / "log.csv").write_text("my notes\n")
    (out / "metrics.json").write_text('{"mine": 1}\n')
    code, _, err = cli("train", "tiny.toml", "--out", out)
    assert code == 1 and "holds files petrov did not write for `petrov train` (log.csv, metrics.json)" in \
        one_error(err, "train")
    assert (out / "log.csv").read_text() == "my notes\n"  # untouched
    (out / "notes.txt").write_text("keep me")
    code, _, _ = cli("train", "tiny.toml", "--out", out, "--overwrite")
    assert code == 0 and (out / "notes.txt").read_text() == "keep me"
    assert (out / "log.csv").read_text().startswith("epoch,")


def test_evaluate_and_invert_never_write_over_the_runs_own_metrics(here, cli):
    before = (here / "run1" / "metrics.json").read_text()
    for args in (("evaluate", "run1", "--out", "run1"),
                 ("evaluate", "run1", "--out", "run1", "--overwrite"),
                 ("invert", "d.h5", "--method", "pde", "--indices", "0:1", "--out", "run1", "--overwrite")):
        code, _, err = cli(*args)
        assert code == 1 and re.search(r"run1/metrics\.(csv|json) was written by `petrov train`; `petrov \w+` "
                                       r"does not write over another command's outputs", one_error(err, args[0]))
    assert (here / "run1" / "metrics.json").read_text() == before


def test_evaluate_refuses_a_users_metrics_and_replaces_its_own_results_whole(here, cli):
    ev = here / "ev"
    ev.mkdir()
    (ev / "metrics.csv").write_text("a,b\n")
    code, _, err = cli("evaluate", "run1", "--out", ev)
    assert code == 1 and "(metrics.csv)" in one_error(err, "evaluate") and (ev / "metrics.csv").read_text() == "a,b\n"
    assert cli("evaluate", "run1", "--out", ev, "--overwrite")[0] == 0
    assert "predictions.png" in visible(ev)
    assert cli("evaluate", "run1", "--out", ev, "--no-plots")[0] == 0  # the second evaluation, no plots
    assert visible(ev) == ["metrics.csv", "metrics.json"]  # no plot of the first beside the new metrics


# --- silently wrong ------------------------------------------------------------------------------------

def test_a_run_is_never_tested_on_a_file_regenerated_under_it(here):
    def regenerate(trainer, record):
        if record.epoch == 1:
            generate_dataset("burgers", "b.h5", 16, resolution=64, seed=7, overwrite=True, progress=False)

    with pytest.raises(DataChanged, match=r"b.h5 changed while the run trained on it \(it now holds seed 7, "
                                          r"the run's data had seed 0\).*best.pt is kept"):
        train(load_config("tiny.toml"), "r", callbacks=[regenerate])
    assert not (here / "r" / "metrics.json").exists() and (here / "r" / "best.pt").exists()


def test_regenerating_with_the_same_seed_is_the_same_data(here, cli):
    generate_dataset("burgers", "b.h5", 16, resolution=64, seed=0, overwrite=True, progress=False)
    code, _, err = cli("evaluate", "run1", "--no-plots")
    assert code == 0 and err == ""


def test_evaluate_and_resume_say_when_the_data_changed(here, cli):
    assert cli("generate", "burgers", "--n-samples", 16, "--resolution", 64, "--seed", 3, "--overwrite",
               "--no-progress", "-o", "b.h5")[0] == 0
    code, _, err = cli("evaluate", "run1", "--no-plots")
    assert code == 0 and err.strip() == ("warning: b.h5 is not the data this run was trained on (it now holds seed "
                                         "3, the run's data had seed 0); its 'test' samples are not the run's "
                                         "held-out test split")
    code, _, err = cli("train", "--out", "run1", "--resume")
    assert code == 1 and "b.h5 changed since the run started (it now holds seed 3" in one_error(err, "train")


def test_a_slice_past_the_end_is_refused_by_invert_as_by_evaluate(here, cli):
    code, _, err = cli("invert", "d.h5", "--method", "pde", "--indices", "14:30", "--out", "inv")
    assert code == 1 and "d.h5: indices 14:30 reach past the 16 samples (0..15)" in one_error(err, "invert")
    code, _, err = cli("evaluate", "run1", "--indices", "14:30", "--no-plots")
    assert code == 1 and "indices 14:30 reach past the 16 samples" in one_error(err, "evaluate")
    assert not (here / "inv").exists()


def _targets(here: Path, y: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    import_arrays(here / "z.h5", rng.standard_normal((16, 32)), y, grid="periodic")
    tiny = (here / "tiny.toml").read_text()
    (here / "z.toml").write_text(tiny.replace('"b.h5"', '"z.h5"').replace("[32, 64]", "[32]"))


def test_zero_targets_are_an_error_not_a_relative_error_of_a_million(here, cli):
    _targets(here, np.zeros((16, 32)))
    code, _, err = cli("train", "z.toml", "--out", "r")
    assert code == 1 and ("z.h5 (training split): the target of sample 0 is zero everywhere (8 of 8 samples are); "
                          "the relative L2 error") in one_error(err, "train")


def test_constant_targets_with_an_h1_loss_name_the_cause(here, cli):
    _targets(here, np.ones((16, 32)))
    assert cli("train", "z.toml", "--out", "r0")[0] == 0  # the L2 loss alone is defined
    code, _, err = cli("train", "z.toml", "--out", "r1", "--set", "loss.h1_weight=0.1")
    assert code == 1 and ("the target of sample 0 is constant (8 of 8 samples are); its H1 seminorm is 0, so the "
                          "relative H1 term of the loss (loss.h1_weight = 0.1) is undefined: set loss.h1_weight = 0"
                          ) in one_error(err, "train")


def test_a_generate_table_that_does_not_match_the_existing_file_is_said_so(here, cli):
    generate = '[data.generate]\nkind = "burgers"\nn_samples = 16\nresolution = 64\nseed = 5\n'
    text = (here / "tiny.toml").read_text().replace("[model]", generate + "\n[model]")
    (here / "g.toml").write_text(text)
    code, _, err = cli("train", "g.toml", "--out", "r")
    assert code == 0 and err.strip() == (
        "warning: data.path 'b.h5' exists and holds other data than [data.generate] describes (seed 0 there, 5 in "
        "[data.generate]); training on the existing file (delete it to generate the table's, or point data.path at "
        "a new file)")
    (here / "g.toml").write_text(text.replace("seed = 5", "seed = 0"))
    code, _, err = cli("train", "g.toml", "--out", "r2")
    assert code == 0 and err == ""


def test_a_file_written_by_a_quick_run_is_named_as_such(here, cli, monkeypatch):
    monkeypatch.setenv("PETROV_QUICK", "1")  # the file keeps 32 of the 40 samples
    assert cli("generate", "burgers", "--n-samples", 40, "--resolution", 64, "-o", "q.h5", "--no-progress")[0] == 0
    monkeypatch.delenv("PETROV_QUICK")
    generate = '[data.generate]\nkind = "burgers"\nn_samples = 40\nresolution = 64\n'
    text = (here / "tiny.toml").read_text().replace("[model]", generate + "\n[model]").replace('"b.h5"', '"q.h5"')
    (here / "q.toml").write_text(text)
    code, _, err = cli("train", "q.toml", "--out", "r")
    assert code == 0 and ("(n_samples 32 there, 40 in [data.generate]; 32 samples is what a generation keeps in "
                          "quick mode (PETROV_QUICK=1): a file written by a quick run)") in err


def test_a_forward_model_on_inverse_data_is_refused_before_training_naming_the_coarse_grid(here, cli):
    # the targets are pooled to 15 x 15 at every input grid; fno2d outputs its input's grid: only 15 is scored
    text = (here / "tiny.toml").read_text().replace('"b.h5"', '"d.h5"').replace("train_resolution = 32", (
        'kind = "darcy-inverse"\ncoarse_resolution = 15\ntrain_resolution = 15')).replace("[32, 64]", "[15, 29]")
    (here / "i.toml").write_text(text.replace('name = "fno1d"', 'name = "fno2d"'))
    code, _, err = cli("train", "i.toml", "--out", "r")
    assert code == 1 and ("data.eval_resolutions: resolution 29 cannot be tested (the model outputs shape (1, 29, "
                          "29, 1) where the targets have shape (1, 15, 15, 1); darcy-inverse pools every target to "
                          "data.coarse_resolution") in one_error(err, "train")
    assert not (here / "r" / "best.pt").exists()  # refused before training


# --- messages that say what is wrong --------------------------------------------------------------------

def _corrupt_npz(path: Path, **arrays) -> None:
    np.savez(path, **arrays)
    data = bytearray(path.read_bytes())
    data[100:140] = b"x" * 40  # inside the first member's data: its CRC fails
    path.write_bytes(bytes(data))


MESSAGES = [
    (("info", "run1"), "dataset file 'run1' is a directory, not a file"),
    (("train", "tiny.toml", "--out", "tiny.toml"), "run directory 'tiny.toml' is a file, not a directory"),
    (("evaluate", "b.h5"), "run directory 'b.h5' is a file, not a directory"),
    (("generate", "burgers", "--n-samples", "4", "--resolution", "64", "-o", "run1"),
     "-o run1 is a directory; give the output file's name (e.g. run1/data.h5)"),
    (("train", "run1", "--out", "r"),
     "config 'run1' is a directory, not a TOML file (to continue that run: petrov train --out run1 --resume)"),
    (("import", "--x", "run1", "--y", "b.h5:y", "--grid", "periodic", "-o", "i.h5"),
     "x 'run1' is a directory, not a file"),
    (("invert", "run1", "--method", "pde", "--out", "inv"), "dataset file 'run1' is a directory, not a file"),
    (("evaluate", "run1", "--data", "run1", "--out", "ev"), "data file 'run1' is a directory, not a file"),
    (("invert", "d.h5", "--method", "surrogate", "--forward-run", "b.h5", "--out", "inv"),
     "'b.h5' is an HDF5 file (a dataset?), not a petrov model checkpoint"),
    (("invert", "d.h5", "--method", "surrogate", "--forward-run", "run1", "--indices", "0:1", "--out", "inv"),
     "forward operator run 'run1' was trained on 'burgers' data; this needs a Darcy forward operator a -> u"),
    (("invert", "d.h5", "--method", "learned", "--inverse-run", "run1", "--indices", "0:1", "--out", "inv"),
     "inverse operator run 'run1' was trained on 'burgers' data; this needs an inverse Darcy operator u -> a"),
    (("train", "tiny.toml", "--out", "r", "--set", "optim.lr=nan"), "optim.lr must be a finite number, got nan"),
    (("train", "tiny.toml", "--out", "r", "--set", "run.threads=-1"),
     "run.threads must be None (torch's default) or an integer >= 1, got -1"),
    (("train", "tiny.toml", "--out", "r", "--set", "run.num_workers=-1"),
     "run.num_workers must be an integer >= 0, got -1"),
    (("train", "tiny.toml", "--out", "r", "--set", "run.fill_budget=true"),
     "run.fill_budget plans the epochs to fill run.time_budget_minutes, which is not set"),
    # the statistics of u for the noise come from a Darcy run: another run's kind is named, not a shape
    (("invert", "d.h5", "--method", "pde", "--indices", "0:1", "--noise", "0.01", "--noise-stats", "run1", "--out",
      "inv"), "noise statistics run 'run1' was trained on 'burgers' data; the noise needs the point-wise statistics "
              "of u on the grid: give --noise-stats a run trained on 'darcy-inverse' or 'darcy' data"),
    # a 1-D model on a 2-D file: said first, not as a resolution the file does not have
    (("train", "tiny.toml", "--out", "r", "--set", 'data.path="d.h5"'),
     "model FNO1d takes 1-D grids but d.h5 holds 2-D grids; choose a 2-D grid model"),
    (("evaluate", "run1", "--indices", "5:2", "--no-plots", "--out", "r"),
     "no samples selected from b.h5 (indices 5:2; A:B selects the samples A..B-1: give A < B)"),
]


@pytest.mark.parametrize("args, message", MESSAGES, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in
                                                           enumerate(MESSAGES)])
def test_a_wrong_path_or_value_gets_a_message_that_names_it(here, cli, args, message):
    code, _, err = cli(*args)
    assert code == 1 and message in one_error(err, args[0])
    assert not (here / "r").exists() and not (here / "inv").exists() and not (here / "i.h5").exists()


USAGE = [
    (("generate", "burgers", "--n-samples", "0", "--resolution", "64", "-o", "i.h5"),
     "--n-samples must be an integer >= 1, got 0"),
    (("generate", "burgers", "--n-samples", "4", "--resolution", "64", "--chunk-size", "0", "-o", "i.h5"),
     "--chunk-size must be an integer >= 1, got 0"),
    (("generate", "darcy", "--n-samples", "4", "--resolution", "29", "--workers", "-1", "-o", "i.h5"),
     "--workers must be an integer >= 0, got -1"),
    (("generate", "burgers", "--n-samples", "6", "--resolution", "64", "--shard", "3/3", "-o", "i.h5"),
     "shard 3/3: K counts from 0 and must be in 0..2"),
    (("generate", "burgers", "--n-samples", "6", "--resolution", "64", "--shard", "-1/3", "-o", "i.h5"),
     "shard -1/3: K counts from 0 and must be in 0..2"),
    (("generate", "burgers", "--n-samples", "6", "--resolution", "64", "--indices", "4:9", "-o", "i.h5"),
     "indices 4:9: expected A:B with 0 <= A < B <= n_samples = 6"),
    (("merge", "b.h5", "-o", "i.h5", "--chunk-size", "0"), "--chunk-size must be an integer >= 1, got 0"),
    (("import", "--x", "b.h5:x", "--y", "b.h5:y", "--grid", "periodic", "-o", "i.h5", "--chunk-size", "0"),
     "--chunk-size must be an integer >= 1, got 0"),
    (("import", "--mesh", "m.npz", "--x-field", "a", "--y-field", "u", "--grid", "nodes", "-o", "i.h5"),
     "--grid applies to grid arrays, not to --mesh files"),
    (("evaluate", "run1", "--batch-size", "0", "--out", "r"), "--batch-size must be an integer >= 1, got 0"),
    (("invert", "d.h5", "--method", "pde", "--chunk-size", "0", "--out", "inv"),
     "--chunk-size must be an integer >= 1, got 0"),
    (("invert", "d.h5", "--method", "pde", "--workers", "-1", "--out", "inv"),
     "--workers must be an integer >= 0, got -1"),
    # petrov train: a flag wrong whatever the config, refused before any work
    *[(("train", "tiny.toml", "--out", "r", "--set", item), f"--set {item!r}: expected section.key=value")
      for item in ("optim.lr", "lr=1e-3", "optim..lr=1", "optim={lr=1}", "data=5", "~model")],
    (("train", "tiny.toml", "--out", "r", "--resume", "--overwrite"), "choose one of --resume"),
    (("train", "--out", "r", "--resume", "--overwrite"), "choose one of --resume"),
    *[(("train", "tiny.toml", "--out", "r", "--budget-minutes", value),
       f"--budget-minutes must be a number of minutes > 0, got {value}") for value in ("0", "-5", "nan", "inf")],
    # petrov evaluate --resolutions in forms that cannot be used
    *[(("evaluate", "run1", "--resolutions", value, "--no-plots", "--out", "r"), says) for value, says in (
        ("", "resolutions (or mesh levels) are separated by commas"),
        ("64,,32", "resolutions (or mesh levels) are separated by commas"),
        ("abc", "--resolutions: resolution 'abc' is not a whole number: b.h5 is a grid file"),
        ("64.0", "resolution '64.0' is not a whole number"),
        ("level0", "resolution 'level0' is not a whole number"),
        ("-64", "resolution -64 is not a grid size (a whole number of grid points)"),
        ("64,0", "resolution 0 is not a grid size"),
        ("100", "--resolutions: resolution 100 not available for this trained model from b.h5"))],
]


@pytest.mark.parametrize("args, message", USAGE, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in enumerate(USAGE)])
def test_a_flag_value_that_cannot_be_used_is_a_usage_error(here, cli, args, message):
    code, _, err = cli(*args)
    first, *rest = err.strip().splitlines()
    assert code == 2 and first.startswith(f"petrov {args[0]}: error: ") and message in first, err
    assert rest == [f"run 'petrov {args[0]} --help' for usage"]
    assert not (here / "i.h5").exists() and not (here / "r").exists() and not (here / "inv").exists()


def test_a_misused_distributed_environment_is_named_with_what_to_do(here, cli, monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    code, _, err = cli("train", "tiny.toml", "--out", "r")
    assert code == 1 and one_error(err, "train") == (
        "petrov train: error: WORLD_SIZE=2 is set (this process: rank 0 of 2) but MASTER_ADDR and MASTER_PORT are not: "
        "the processes have no address to meet at; start all 2 processes with torchrun (e.g. torchrun "
        "--nproc-per-node=2 -m petrov train ...), or unset WORLD_SIZE, RANK to train in one process")
    monkeypatch.setenv("WORLD_SIZE", "two")
    code, _, err = cli("train", "tiny.toml", "--out", "r")
    assert code == 1 and "the environment variable WORLD_SIZE='two' is not a whole number" in one_error(err, "train")
    assert not (here / "r").exists()


def test_damaged_files_are_named(here, cli):
    (here / "run1" / "config.json").write_text('{"data": ')
    code, _, err = cli("evaluate", "run1", "--out", "ev")
    assert code == 1 and "run1/config.json is not valid JSON (damaged or edited by hand?)" in one_error(err, "evaluate")
    _corrupt_npz(here / "bad.npz", a=np.random.default_rng(0).random((8, 32)))
    code, _, err = cli("import", "--x", "bad.npz:a", "--y", "bad.npz:a", "--grid", "periodic", "-o", "i.h5")
    assert code == 1 and "bad.npz: cannot read array 'a' of the .npz file (corrupt or truncated?)" in \
        one_error(err, "import")
    _corrupt_npz(here / "obs.npz", u=np.random.default_rng(0).random((2, 29, 29)))
    code, _, err = cli("invert", "obs.npz", "--method", "pde", "--out", "inv")
    assert code == 1 and "cannot read obs.npz: a member is damaged (corrupt or truncated?)" in one_error(err, "invert")
    whole = (here / "obs.npz").read_bytes()
    (here / "obs.npz").write_bytes(whole[: len(whole) // 2])
    code, _, err = cli("invert", "obs.npz", "--method", "pde", "--out", "inv")
    assert code == 1 and "cannot read obs.npz as a numpy .npy/.npz file (corrupt or truncated?)" in \
        one_error(err, "invert")


def test_a_damaged_training_log_costs_only_the_training_curves_figure(here, cli):
    (here / "run1" / "log.jsonl").write_text('{"epoch": 1, "train_lo')
    code, out, err = cli("evaluate", "run1", "--out", "ev")
    assert code == 0 and "relative L2" in out
    assert "training_curves.png not drawn: training log 'run1/log.jsonl' is damaged: line 1 is not a JSON " \
           "record" in err
    assert {"metrics.json", "error_vs_resolution.png", "predictions.png"} <= set(visible(here / "ev"))
    assert "training_curves.png" not in visible(here / "ev")


def test_a_normalizer_grid_too_fine_to_fit_in_memory_is_refused_with_its_key(here):
    from types import SimpleNamespace

    from petrov.train.config_tables import DataConfig
    from petrov.train.datapass import fit_normalizers

    meshes = SimpleNamespace(node_counts=[4, 4])  # point-set data: the grid is refused before it is read
    with pytest.raises(ValueError, match=r"^data.normalizer_grid = 100000 is too fine: .*set at most 4097"):
        fit_normalizers(DataConfig(path="m.h5", normalizer_grid=100000), np.arange(2), meshes)


@pytest.mark.parametrize("attribute, value, message", [
    ("native_resolution", 128, "attribute native_resolution = 128 does not match the stored x of shape (16, 64)"),
    ("n_complete", 40, "attribute n_complete = 40 is more than n_samples = 16"),
    ("kind", "heat", "attribute kind = 'heat' is not a dataset kind"),
    ("grid", "torus", "attribute grid = 'torus' is not 'periodic', 'nodes' or 'cells'"),
])
def test_hand_edited_attributes_that_contradict_the_data_are_named(here, cli, attribute, value, message):
    with h5py.File(here / "b.h5", "r+") as h5:
        h5.attrs[attribute] = value
    for args in (("info", "b.h5"), ("train", "tiny.toml", "--out", "r")):
        code, _, err = cli(*args)
        line = one_error(err, args[0])
        assert code == 1 and message in line and "edited or the file is damaged" in line


def test_a_file_being_written_is_not_called_corrupt(here, cli):
    holder = subprocess.Popen([sys.executable, "-c", "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); "
                               "print('open', flush=True); sys.stdin.readline()", "b.h5"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        code, _, err = cli("info", "b.h5")
    finally:
        holder.communicate("\n")
    assert code == 1 and "b.h5 is being written by another process, e.g. a generation still running; wait for it " \
                         "to finish" in one_error(err, "info")


def test_all_zero_observations_are_named(here, cli):
    np.savez(here / "z.npz", u=np.zeros((1, 29, 29)))
    code, _, err = cli("invert", "z.npz", "--method", "pde", "--out", "inv")
    assert code == 1 and "the observation of sample 0 is zero everywhere (z.npz)" in one_error(err, "invert")


# --- output paths as a new user types them ----------------------------------------------------------

def test_a_read_only_partial_file_is_named_with_what_to_do(here, cli, monkeypatch):
    class Stop(Exception):
        pass

    def stop(done, total):
        raise Stop

    with pytest.raises(Stop):
        generate_dataset("burgers", "out.h5", 4, resolution=64, chunk_size=1, progress=False, callback=stop)
    os.chmod("out.h5.partial", 0o444)
    access = os.access  # root may write anything: ask as its owner would
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: access(path, mode, *a, **k) and not (
        mode & os.W_OK and os.path.isfile(path) and not os.stat(path).st_mode & 0o200))
    code, _, err = cli("generate", "burgers", "--n-samples", "4", "--resolution", "64", "-o", "out.h5", "--no-progress")
    assert code == 1 and one_error(err, "generate") == (
        "petrov generate: error: the partial file out.h5.partial is read-only; make it writable (chmod u+w "
        "out.h5.partial) to resume the samples it holds, or delete it to start again")


@pytest.mark.parametrize("args", [
    ("generate", "burgers", "--n-samples", "2", "--resolution", "64"),
    ("import", "--x", "b.h5:x", "--y", "b.h5:y", "--grid", "periodic"),
    ("merge", "s0.h5", "s1.h5"),
], ids=lambda a: a[0])
def test_an_output_inside_a_file_is_named(here, cli, args):
    for k in range(2):
        generate_dataset("burgers", here / f"s{k}.h5", 4, resolution=64, shard=(k, 2), progress=False)
    code, _, err = cli(*args, "-o", "tiny.toml/out.h5")
    assert code == 1 and one_error(err, args[0]).endswith(
        "error: cannot write tiny.toml/out.h5: 'tiny.toml' is a file, not a folder; choose another -o")


def test_a_name_too_long_for_the_files_beside_it_names_the_users_file(here, cli):
    limit = os.pathconf(here, "PC_NAME_MAX")
    name = "d" * (limit - 13) + ".h5"  # fits, but its .partial and temporary names would not
    code, _, err = cli("generate", "burgers", "--n-samples", "2", "--resolution", "64", "-o", name)
    line = one_error(err, "generate")
    shown = "d" * 24 + "..." + "d" * 5 + ".h5"
    assert code == 1 and f"the output file name '{shown}' is {limit - 10} bytes long" in line
    assert f"choose a name of at most {limit - 21} bytes for -o" in line and ".partial" not in line


def test_a_closed_standard_output_is_named_before_any_work(here):
    petrov = Path(sys.executable).parent / "petrov"
    for redirect in (">&-", "1>&-"):
        done = subprocess.run(["bash", "-c", f'"{petrov}" info b.h5 {redirect}'], cwd=here, capture_output=True,
                              text=True)
        assert done.returncode == 1 and done.stderr == (
            "petrov info: error: standard output is closed (`>&-`); send it somewhere instead, e.g. `> /dev/null` "
            "to discard it or `> petrov.log` to keep it\n")


def test_import_of_meshes_creates_a_missing_output_folder_like_every_command(here, cli):
    square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.5]])
    triangles = np.array([[0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]])
    np.savez(here / "m.npz", points=square, triangles=triangles, a=np.full(5, 3.0), u=np.array([0, 0, 0, 0, 0.1]))
    code, out, err = cli("import", "--mesh", "m.npz", "--x-field", "a", "--y-field", "u", "-o", "missing/folder/m.h5",
                         "--no-progress")
    assert code == 0 and err == "" and (here / "missing" / "folder" / "m.h5").is_file()


# --- a full disk ----------------------------------------------------------------------------------------

@pytest.fixture
def full_disk(here):
    """A 1 MiB tmpfs at ./fs, filled but for 16 kB; skipped where mounting is not allowed."""
    disk = here / "fs"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (not root?): {done.stderr.decode().strip()}")
    with open(disk / "filler", "wb") as fh:
        fh.write(b"\0" * (shutil.disk_usage(disk).free - 16_000))
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("command", [
    ("train", "tiny.toml", "--out", "fs/run"),
    ("evaluate", "run1", "--out", "fs/ev"),
    ("invert", "d.h5", "--method", "pde", "--indices", "0:2", "--set", "max_iter=2", "--out", "fs/inv"),
    ("import", "--x", "b.h5:x", "--y", "b.h5:y", "--grid", "periodic", "-o", "fs/i.h5", "--no-progress"),
], ids=lambda c: c[0])
def test_a_full_disk_is_named_as_such_and_leaves_no_temporary_file(full_disk, cli, command):
    code, _, err = cli(*command)
    line = one_error(err, command[0])
    assert code == 1 and "disk full: cannot write fs/" in line and " free in fs" in line, line
    left = [p.relative_to(full_disk) for p in full_disk.rglob("*") if p.name.endswith(".tmp")]
    assert left == []


# --- three errors a new user met, each now named ---------------------------------------------------------

def test_a_checkpoint_whose_weights_hold_nan_is_named_not_the_inputs(here, cli):
    state = torch.load(here / "run1" / "best.pt", weights_only=True)
    key = [k for k, v in state["state_dict"].items() if v.is_floating_point()][1]
    state["state_dict"][key].view(-1)[0] = float("nan")
    torch.save(state, here / "run1" / "best.pt")
    code, _, err = cli("evaluate", "run1", "--no-plots")
    line = one_error(err, "evaluate")
    assert code == 1 and f"checkpoint 'run1/best.pt' is damaged: its weight '{key}' holds 1 NaN/inf of " in line
    assert "the inputs are not the cause" in line and "model.options" not in line


def test_a_best_pt_that_is_a_directory_is_said_to_be_one(here, cli):
    (here / "run1" / "best.pt").unlink()
    (here / "run1" / "best.pt").mkdir()
    code, _, err = cli("evaluate", "run1", "--no-plots")
    line = one_error(err, "evaluate")
    assert code == 1 and "checkpoint 'run1/best.pt' is a directory, not a checkpoint file" in line
    assert "does not exist" not in line and "found" not in line


@pytest.mark.parametrize("sample, split, lazy", [(13, "test", False), (9, "validation", True), (2, "training", False)])
def test_a_nan_in_any_split_is_named_before_training(here, cli, sample, split, lazy):
    with h5py.File(here / "b.h5", "r+") as h5:
        h5["y"][sample, 41] = np.nan  # not on the training grid (every other point): only a full read finds it
    code, out, err = cli("train", "tiny.toml", "--out", "r", "--set", f"data.lazy={str(lazy).lower()}")
    assert code == 1 and f"{split} split (checked before training): b.h5: field 'y' contains NaN or inf in sample " \
                         f"{sample}" in one_error(err, "train")
    assert "epoch 1" not in out and not (here / "r").exists()
