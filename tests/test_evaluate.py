"""Evaluation across resolutions from one checkpoint, its saved tables, and its clear errors.

One tiny run (Burgers at native 256, 1 epoch of a small Galerkin hybrid, through the real
``train()``) is shared by the tests of this file.
"""
import csv
import json
import math

import numpy as np
import pytest
import torch

from petrov.datasets import generate_dataset, open_dataset
from petrov.operators import build_model
from petrov.cli import main as cli_main
from petrov.train.config import config_from_dict
from petrov.train.operator import NormalizedOperator
from petrov.evaluate import (
    evaluate_resolutions,
    format_table,
    load_run,
    parse_indices,
    parse_resolutions,
    read_metrics,
)
from petrov.train.losses import relative_l2_per_sample
from petrov.train.trainer import train

N_TRAIN, N_VAL, N_TEST, N_TOTAL = 12, 4, 6, 24


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("eval")
    data = root / "burgers-256.h5"
    generate_dataset("burgers", data, N_TOTAL, resolution=256, seed=3, progress=False)
    cfg = config_from_dict({
        "data": {"path": str(data), "train_resolution": 64, "eval_resolutions": [64],
                 "n_train": N_TRAIN, "n_val": N_VAL, "n_test": N_TEST},
        "model": {"name": "galerkin1d", "options": {"d_model": 8, "n_layers": 1, "decoder_width": 8,
                                                    "modes": 4}},
        "optim": {"epochs": 1, "batch_size": 4},
        "run": {"device": "cpu", "progress": False},
    })
    train(cfg, root / "run")
    return root / "run", data


def test_several_resolutions_from_one_checkpoint(run, tmp_path):
    run_dir, data = run
    rows = evaluate_resolutions(run_dir, data, [64, 128, 256], out_dir=tmp_path, per_sample=True)
    assert [r["resolution"] for r in rows] == [64, 128, 256]
    for r in rows:
        assert r["n"] == N_TEST and len(r["per_sample"]) == N_TEST
        assert all(math.isfinite(r[k]) and r[k] >= 0 for k in ("mean", "std", "median", "max"))
        errs = np.array(r["per_sample"])
        assert r["mean"] == pytest.approx(errs.mean()) and r["max"] == pytest.approx(errs.max())
    # a plain recomputation at one resolution: the run's test split is the LAST n_test samples
    op = load_run(run_dir).operator
    test = open_dataset(data, resolution=128, indices=range(N_TOTAL - N_TEST, N_TOTAL))
    with torch.no_grad():
        pred = op(test.x, test.coords.expand(len(test), *test.coords.shape))
    np.testing.assert_allclose(rows[1]["per_sample"], relative_l2_per_sample(pred, test.y).numpy(),
                               rtol=1e-5)
    # the saved CSV and JSON hold exactly the returned values
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["samples"] == f"{N_TOTAL - N_TEST}:{N_TOTAL}"
    assert [{k: v for k, v in r.items() if k != "per_sample"} for r in saved["rows"]] == \
        [{k: v for k, v in r.items() if k != "per_sample"} for r in rows]
    with (tmp_path / "metrics.csv").open() as f:
        table = list(csv.DictReader(f))
    for line, r in zip(table, rows, strict=True):
        assert int(line["resolution"]) == r["resolution"] and int(line["n"]) == r["n"]
        for key in ("mean", "std", "median", "max"):
            assert float(line[key]) == r[key]
    assert read_metrics(tmp_path)[2]["mean"] == rows[2]["mean"]
    assert not list(tmp_path.glob(".*tmp"))  # no temp files left behind


def test_cli_writes_table_metrics_and_plots(run, capsys):
    run_dir, data = run
    code = cli_main(["evaluate", str(run_dir), "--data", str(data), "--resolutions", "64,256",
                     "--device", "cpu", "--batch-size", "4"])
    assert code == 0
    out = capsys.readouterr().out
    assert "relative L2" in out and "64*" in out  # the training resolution is marked
    rows = read_metrics(run_dir / "eval")
    assert [r["resolution"] for r in rows] == [64, 256]
    for name in ("predictions.png", "error_vs_resolution.png", "training_curves.png"):
        assert (run_dir / "eval" / name).stat().st_size > 1000


def test_explicit_indices_and_same_result_for_same_samples(run):
    run_dir, data = run
    by_slice = evaluate_resolutions(run_dir, data, [128], indices=parse_indices(f"{N_TOTAL - N_TEST}:"))
    by_default = evaluate_resolutions(run_dir, data, [128])
    assert by_slice == by_default
    with pytest.warns(UserWarning, match="training/validation split"):
        evaluate_resolutions(run_dir, data, [64], indices=slice(0, 3))


def test_the_printed_table_names_the_samples_it_measured(run, capsys, tmp_path):
    run_dir, data = run
    for flag, title in ((["--indices", "0:3"], "relative L2 on samples 0:3 of the file"),
                        (["--indices", "all"], "relative L2 on all samples of the file"),
                        ([], "relative L2 on the test samples")):
        code = cli_main(["evaluate", str(run_dir), "--data", str(data), "--resolutions", "64", "--no-plots",
                         "--out", str(tmp_path / "ev"), "--overwrite", *flag])
        assert code == 0 and title in capsys.readouterr().out.splitlines()


def test_non_stridable_resolution_names_the_allowed_ones(run):
    run_dir, data = run
    with pytest.raises(ValueError, match=r"resolution 100 .*allowed resolutions: .*64, 128, 256"):
        evaluate_resolutions(run_dir, data, [64, 100])
    # an explicit --resolutions the file cannot be read at is the command line's fault: a usage error
    assert main_error(["evaluate", str(run_dir), "--data", str(data), "--resolutions", "100"]) == 2
    with pytest.raises(ValueError, match="integers"):
        parse_resolutions("64,abc")


def main_error(argv):
    return cli_main(argv)


def test_data_of_another_kind_or_channels_is_a_clear_error(run, tmp_path):
    run_dir, _ = run
    darcy = tmp_path / "darcy.h5"
    generate_dataset("darcy", darcy, 3, resolution=9, seed=0, progress=False)
    with pytest.raises(ValueError, match="holds 'darcy' data but the model was trained on 'burgers'"):
        evaluate_resolutions(run_dir, darcy, [9], indices="all")
    # a bare model expecting two input channels, given one-channel data
    two_channels = NormalizedOperator(build_model("fno1d", in_channels=2, width=4, modes=2, n_layers=1))
    with pytest.raises(ValueError, match="cannot take inputs of shape"):
        evaluate_resolutions(two_channels, run[1], [64], indices=slice(0, 2))


def test_missing_checkpoint_or_run_is_a_clear_error(run, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        evaluate_resolutions(tmp_path / "nowhere", run[1], [64])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text((run[0] / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match="best.pt"):
        evaluate_resolutions(tmp_path / "run", run[1], [64])
    with pytest.raises(FileNotFoundError, match="data file"):
        evaluate_resolutions(run[0], tmp_path / "missing.h5", [64])
    assert cli_main(["evaluate", str(tmp_path / "run"), "--data", str(run[1])]) == 1


def test_format_table_lists_every_row():
    rows = [{"resolution": 64, "n": 3, "mean": 1e-3, "std": 1e-4, "median": 9e-4, "max": 2e-3},
            {"resolution": 128, "n": 3, "mean": 2e-3, "std": 1e-4, "median": 9e-4, "max": 3e-3}]
    text = format_table(rows, train_resolution=64)
    assert "1.0000e-03" in text and "2.0000e-03" in text and "64*" in text and "128 " in text
