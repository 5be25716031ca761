"""Bad input to ``petrov train`` caught before the training, and divergence told from bad data.

A Burgers file of 16 samples at 64 points and an ``fno1d`` of 4 modes, which needs at least 6 points:
from that file it takes the resolutions 8, 16, 32 and 64 (2 and 4 are strided sub-grids too small for it).
"""
import json
import os
import shutil

import h5py
import numpy as np
import pytest
import torch

from petrov.datasets import generate_dataset
from petrov.train.config import check_resumable, load_config, replace, with_evaluation_keys
from petrov.train.datapass import first_huge
from petrov.train.divergence import parameters_state
from petrov.train.trainer import TrainingDiverged, train

@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_fno1d_toml):
    """b.h5 (Burgers, 16 samples at 64), tiny.toml and run1 (trained on b.h5, finished)."""
    root = tmp_path_factory.mktemp("world")
    generate_dataset("burgers", root / "b.h5", 16, resolution=64, progress=False)
    (root / "tiny.toml").write_text(tiny_fno1d_toml(1))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        torch.set_num_threads(1)
        train(load_config("tiny.toml"), "run1")
    finally:
        os.chdir(cwd)
    return root


def error_line(err: str, command: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"petrov {command}: error: "), err
    return lines[0]


def usage_error_line(err: str, command: str) -> str:
    """A usage error (exit status 2): the error line, then where the usage is."""
    first, _, hint = err.strip().partition("\n")
    assert hint == f"run 'petrov {command} --help' for usage", err
    return error_line(first, command)


# --- 1. evaluation resolutions are checked before the training ----------------------------------------
def test_an_evaluation_resolution_off_the_grid_is_refused_before_training(here, cli):
    code, _, err = cli("train", "tiny.toml", "--out", "r", "--set", "data.eval_resolutions=[1]")
    line = error_line(err, "train")
    assert code != 0 and "resolution 1" in line and "at least 2 and divide 64" in line
    assert "takes 8, 16, 32, 64" in line
    assert not (here / "r").exists()  # nothing trained, nothing written


def test_an_evaluation_resolution_too_coarse_for_the_model_is_refused_before_training(here, cli):
    code, _, err = cli("train", "tiny.toml", "--out", "r", "--set", "data.eval_resolutions=[32, 4]")
    line = error_line(err, "train")
    assert code != 0 and "resolution 4" in line and "need at least 6 points, got 4" in line
    assert "takes 8, 16, 32, 64" in line and "use modes" not in line
    assert not (here / "r").exists()


def test_resuming_may_change_the_evaluation_resolutions_only(here):
    saved = load_config("tiny.toml")
    other = replace(saved, data={"eval_resolutions": [16]})
    check_resumable(saved, other, "r")  # the test's resolutions do not change the training
    assert with_evaluation_keys(saved, other).data.eval_resolutions == [16]
    assert with_evaluation_keys(saved, saved) is None
    with pytest.raises(ValueError, match="differs in data.train_resolution"):
        check_resumable(saved, replace(saved, data={"train_resolution": 16}), "r")


def test_a_resumed_run_is_tested_at_its_new_resolutions_and_says_so(here, cli):
    (here / "run1" / "metrics.json").unlink()  # as a run whose test failed after the training
    code, out, _ = cli("train", "--out", "run1", "--resume", "--set", "data.eval_resolutions=[16]")
    assert code == 0 and "resolution 16" in out and "resolution 32" not in out
    assert [row["resolution"] for row in json.loads((here / "run1" / "metrics.json").read_text())["rows"]] == [16]
    assert json.loads((here / "run1" / "config.json").read_text())["data"]["eval_resolutions"] == [16]


# --- 2. evaluate names the resolutions the trained model takes -------------------------------------
def test_evaluate_lists_only_resolutions_the_trained_model_takes(here, cli):
    code, _, err = cli("evaluate", "run1", "--resolutions", "1", "--no-plots")
    line = usage_error_line(err, "evaluate")
    assert code == 2 and "allowed resolutions: 8, 16, 32, 64 (those of the file the trained model takes)" in line
    code, _, err = cli("evaluate", "run1", "--resolutions", "2", "--no-plots")
    line = usage_error_line(err, "evaluate")
    assert "need at least 6 points, got 2" in line and "use modes" not in line
    assert "allowed resolutions: 8, 16, 32, 64 (those of the file the trained model takes)" in line
    code, _, err = cli("evaluate", "run1", "--resolutions", "sixteen", "--no-plots")  # the same list, not the file's
    line = usage_error_line(err, "evaluate")
    assert "'sixteen' is not a whole number" in line
    assert "allowed resolutions: 8, 16, 32, 64 (those of the file the trained model takes)" in line


# --- 3. a divergence is told from bad data -----------------------------------------------------------
def test_parameters_state_names_non_finite_and_huge_parameters():
    layer = torch.nn.Linear(2, 2)
    assert parameters_state(layer) == ""
    with torch.no_grad():
        layer.weight[0, 0] = 1e25
    assert parameters_state(layer).startswith("huge (largest |w| = 1e+25")
    with torch.no_grad():
        layer.bias[1] = float("nan")
    assert parameters_state(layer) == "non-finite"


def test_a_huge_learning_rate_is_reported_as_a_divergence(here):
    # the first non-finite loss, or the huge parameters a model's value check met: not "x contains NaN"
    with pytest.raises(TrainingDiverged, match=r"(non-finite loss|parameters became).*epoch 1.*lower optim\.lr|"
                                               r"epoch 1.*(non-finite loss|parameters became).*lower optim\.lr"):
        train(load_config("tiny.toml", ["optim.lr=1e30"]), "r")


# --- 4. values whose squares overflow float32 are refused before the training --------------------------
def test_first_huge_finds_the_first_sample_beyond_the_limit():
    a = np.zeros((3, 4), np.float32)
    assert first_huge(a) is None
    a[2, 1], a[1, 3] = -3e38, 2e19
    assert first_huge(a) == (1, pytest.approx(2e19))


@pytest.mark.parametrize("sample, split", [(14, "test"), (3, "training")])
def test_a_huge_value_in_a_split_is_refused_before_training(here, cli, sample, split):
    shutil.copy("b.h5", "bad.h5")
    with h5py.File("bad.h5", "r+") as f:
        f["y"][sample, 8] = 3e38
    code, _, err = cli("train", "tiny.toml", "--out", "r", "--set", 'data.path="bad.h5"')
    line = error_line(err, "train")
    assert code != 0 and f"{split} split (checked before training)" in line
    assert f"sample {sample}" in line and "3e+38" in line and "field 'y'" in line
    assert not (here / "r").exists()


# --- 5. --continue from a run that did not finish says so ---------------------------------------------
def test_continuing_a_run_that_did_not_finish_warns(here, cli):
    (here / "run1" / "metrics.json").unlink()  # as a run stopped by SIGTERM
    code, _, err = cli("train", "--continue", "run1", "--out", "c", "--set", "optim.epochs=1")
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert code == 0 and len(warnings) == 1
    assert "run1 did not finish" in warnings[0] and "best.pt (epoch 1" in warnings[0]
    assert "petrov train --out run1 --resume" in warnings[0]


def test_continuing_a_finished_run_does_not_warn(here, cli):
    code, _, err = cli("train", "--continue", "run1", "--out", "c", "--set", "optim.epochs=1")
    assert code == 0 and "warning" not in err


# --- 6. a finished run, or one whose files went missing, is never trained over silently ------------------
def test_a_finished_run_without_last_pt_is_kept(here, cli):
    (here / "run1" / "last.pt").unlink()
    before = {name: (here / "run1" / name).read_bytes() for name in ("best.pt", "metrics.json", "log.jsonl")}
    code, _, err = cli("train", "tiny.toml", "--out", "run1")
    line = error_line(err, "train")
    assert code != 0 and "already holds a run" in line and "no last.pt" in line and "--overwrite" in line
    code, out, err = cli("train", "--out", "run1", "--resume")
    line = error_line(err, "train")
    assert code != 0 and "last.pt is missing" in line and "--continue run1" in line and "--overwrite" in line
    assert "starting the run" not in out + err
    assert {name: (here / "run1" / name).read_bytes() for name in before} == before  # nothing retrained


def test_resuming_writes_back_a_missing_config_json(here, cli):
    saved = json.loads((here / "run1" / "config.json").read_text())
    (here / "run1" / "config.json").unlink()
    code, _, err = cli("train", "tiny.toml", "--out", "run1", "--resume")
    assert code == 0 and "config.json was missing" in err
    assert json.loads((here / "run1" / "config.json").read_text()) == saved
    code, _, _ = cli("evaluate", "run1", "--no-plots")  # the run is usable again
    assert code == 0


def _foreign_best(path):
    raw = torch.load(path, weights_only=True)
    raw["config"]["modes"] = raw["config"]["modes"] + 1  # a best.pt of another fno1d
    torch.save(raw, path)


@pytest.mark.parametrize("damage, expected", [
    (_foreign_best, "with other options than the run's fno1d"),
    (lambda p: p.write_bytes(p.read_bytes()[:2000]), "not a readable checkpoint"),
    (lambda p: p.unlink(), "does not exist"),
])
def test_a_damaged_best_pt_is_refused_before_resuming(here, cli, damage, expected):
    damage(here / "run1" / "best.pt")
    last = (here / "run1" / "last.pt").read_bytes()
    code, out, err = cli("train", "--out", "run1", "--resume")
    line = error_line(err, "train")
    assert code != 0 and "cannot resume 'run1'" in line and "best.pt" in line and expected in line
    assert "--overwrite" in line and "resuming" not in out
    assert (here / "run1" / "last.pt").read_bytes() == last
