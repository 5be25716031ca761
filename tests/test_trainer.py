"""The training loop on tiny synthetic problems: it fits, logs, stops on NaN, checks shapes."""
import json
import math

import numpy as np
import pytest
import torch

from petrov.datasets import GridDataset, PointwiseGaussianNormalizer, generate_dataset
from petrov.cli import main as cli_main
from petrov.train.config import config_from_dict
from petrov.train.data import TrainingData
from petrov.train.operator import NormalizedOperator
from petrov.train.losses import relative_l2_per_sample
from petrov.train import evaluate_relative_l2, load_operator
from petrov.common.outputs import claim_outputs
from petrov.train.runlog import RUN_FILES
from petrov.train.trainer import TrainingDiverged, train


def shift_problem(n_samples, n, seed=0, first_index=0):
    """x: random 3-mode periodic fields; y: x shifted by 1/8 of the period (exactly learnable)."""
    g = torch.Generator().manual_seed(seed)
    s = torch.arange(n, dtype=torch.float64) / n
    k = torch.arange(1, 4, dtype=torch.float64)
    a = torch.randn(n_samples, 3, generator=g, dtype=torch.float64) / k
    phase = 2 * math.pi * torch.rand(n_samples, 3, generator=g, dtype=torch.float64)
    x = (a[:, :, None] * torch.sin(2 * math.pi * k[None, :, None] * s + phase[:, :, None])).sum(1)
    y = x.roll(n // 8, dims=1)
    return GridDataset(x[..., None].float(), y[..., None].float(), kind="burgers", periodic=True,
                       native_resolution=n, indices=np.arange(first_index, first_index + n_samples))


def tiny_data(n_train=16, n_val=4, n=32):
    train_ds = shift_problem(n_train, n, seed=0)
    val_ds = shift_problem(n_val, n, seed=1, first_index=n_train)
    x_norm = PointwiseGaussianNormalizer.fit(train_ds.x, periodic=True)
    y_norm = PointwiseGaussianNormalizer.fit(train_ds.y, periodic=True)
    return TrainingData(train_ds, val_ds, x_norm, y_norm, noise=0.0)


def tiny_config(**sections):
    raw = {
        "data": {"path": "synthetic", "n_train": 16, "n_val": 4, "n_test": 0},
        "model": {"name": "fno1d", "options": {"width": 8, "modes": 4, "n_layers": 2, "proj_hidden": 16}},
        "optim": {"lr": 1e-2, "epochs": 3, "batch_size": 4, "pct_start": 0.1, "div_factor": 10.0},
        "run": {"device": "cpu", "progress": False},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return config_from_dict(raw)


def test_overfits_a_small_batch(tmp_path):
    torch.set_num_threads(1)
    # 8 samples repeated 8 times: 8 optimizer steps per epoch on the same small set
    small = tiny_data(n_train=8)
    small.train = GridDataset(small.train.x.repeat(8, 1, 1), small.train.y.repeat(8, 1, 1),
                              kind="burgers", periodic=True, native_resolution=32,
                              indices=np.tile(small.train.indices, 8))
    cfg = tiny_config(data={"n_train": 64}, optim={"epochs": 20, "batch_size": 8, "lr": 1e-2},
                      model={"name": "fno1d", "options": {"width": 32, "modes": 4, "n_layers": 2,
                                                          "proj_hidden": 16}})
    data = small
    result = train(cfg, tmp_path / "run", data=data)
    rows = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and result.stopped == "completed"
    assert rows[-1]["train_loss"] < 0.06 and rows[-1]["train_loss"] < rows[0]["train_loss"] / 10
    # the best model is the one with the lowest validation error, and best.pt holds it
    best = min(rows, key=lambda r: r["val_rel_l2"])
    assert result.best_epoch == best["epoch"]
    op = load_operator(tmp_path / "run")
    val = evaluate_relative_l2(op, data.val, batch_size=3)
    assert val.mean().item() == pytest.approx(best["val_rel_l2"], rel=1e-5)
    assert (tmp_path / "run" / "log.csv").read_text().count("\n") == 21
    assert not list((tmp_path / "run").glob(".*tmp*"))  # no temp files left behind


def test_evaluate_matches_a_plain_computation():
    data = tiny_data()
    torch.manual_seed(0)
    from petrov.operators import build_model

    model = build_model("fno1d", width=8, modes=4, n_layers=1)
    op = NormalizedOperator(model, data.x_normalizer, data.y_normalizer).eval()
    per_sample = evaluate_relative_l2(op, data.val, batch_size=3)
    with torch.no_grad():
        pred = data.y_normalizer.decode(model(data.x_normalizer.encode(data.val.x)))
    expected = (pred - data.val.y).flatten(1).norm(dim=1) / data.val.y.flatten(1).norm(dim=1)
    torch.testing.assert_close(per_sample, expected)
    torch.testing.assert_close(per_sample, relative_l2_per_sample(op(data.val.x), data.val.y))


def test_nan_loss_stops_with_epoch_and_batch_and_keeps_last_good_checkpoint(tmp_path):
    def poison_after_first_epoch(trainer, record):
        if record.epoch == 1:
            with torch.no_grad():
                next(trainer.model.parameters()).fill_(float("nan"))
        return False

    with pytest.raises(TrainingDiverged, match=r"epoch 2, batch 1 of 4") as err:
        train(tiny_config(), tmp_path / "run", data=tiny_data(), callbacks=[poison_after_first_epoch])
    assert "last.pt (epoch 1)" in str(err.value)
    from petrov.train.checkpoint import load_run_checkpoint

    last = load_run_checkpoint(tmp_path / "run" / "last.pt")
    assert last["epoch"] == 1
    assert all(torch.isfinite(v).all() for v in last["state_dict"].values())


def test_model_that_does_not_fit_the_data_is_a_clear_error(tmp_path):
    cfg = tiny_config(model={"name": "fno1d", "options": {"in_channels": 2, "width": 8, "modes": 4}})
    with pytest.raises(ValueError, match="cannot take inputs of shape"):
        train(cfg, tmp_path / "run", data=tiny_data())


def test_time_budget_stops_cleanly(tmp_path):
    cfg = tiny_config(run={"device": "cpu", "progress": False, "time_budget_minutes": 1e-6})
    result = train(cfg, tmp_path / "run", data=tiny_data())
    assert result.stopped == "time budget" and result.epochs_completed == 1
    assert (tmp_path / "run" / "last.pt").is_file()


def test_existing_run_dir_is_not_overwritten(tmp_path):
    cfg = tiny_config(optim={"epochs": 1})
    train(cfg, tmp_path / "run", data=tiny_data())
    with pytest.raises(FileExistsError, match="--resume"):
        train(cfg, tmp_path / "run", data=tiny_data())


def test_run_killed_before_its_first_checkpoint_starts_again(tmp_path):
    cfg = tiny_config(optim={"epochs": 1})
    run = tmp_path / "run"
    claim_outputs(run, "train", RUN_FILES, what="run directory")  # what a run killed during epoch 1 leaves behind
    (run / "config.json").write_text("{}")
    (run / "log.jsonl").write_text('{"epoch": 1}\n')
    result = train(cfg, run, data=tiny_data())
    assert result.epochs_completed == 1
    assert [json.loads(line)["epoch"] for line in (run / "log.jsonl").read_text().splitlines()] == [1]
    assert json.loads((run / "config.json").read_text())["optim"]["epochs"] == 1


def test_cli_trains_on_a_generated_file_and_evaluates_at_several_resolutions(tmp_path, capsys):
    data = tmp_path / "burgers.h5"
    generate_dataset("burgers", data, n_samples=14, resolution=64, progress=False)
    config = tmp_path / "config.toml"
    config.write_text(f"""
[data]
path = "{data}"
train_resolution = 32
eval_resolutions = [16, 32, 64]
n_train = 8
n_val = 2
n_test = 4
[model]
name = "fno1d"
[model.options]
width = 8
modes = 4
n_layers = 1
[optim]
epochs = 2
batch_size = 4
[run]
progress = false
""")
    run = tmp_path / "run"
    assert cli_main(["train", str(config), "--out", str(run), "--device", "cpu"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())["rows"]  # the rows of petrov evaluate
    assert [m["resolution"] for m in metrics] == [16, 32, 64]
    assert all(m["n"] == 4 and math.isfinite(m["mean"]) for m in metrics)
    assert "test relL2 at resolution 64" in capsys.readouterr().out
    saved = json.loads((run / "config.json").read_text())
    assert saved["run"]["device"] == "cpu" and saved["data"]["train_resolution"] == 32


def test_input_noise_is_fixed_per_sample():
    data = tiny_data()
    from petrov.operators import build_model

    torch.manual_seed(0)
    op = NormalizedOperator(build_model("fno1d", width=8, modes=4, n_layers=1),
                            data.x_normalizer, data.y_normalizer).eval()
    clean = evaluate_relative_l2(op, data.val, batch_size=4)
    noisy = evaluate_relative_l2(op, data.val, batch_size=4, noise=0.1, noise_seed=3)
    again = evaluate_relative_l2(op, data.val, batch_size=1, noise=0.1, noise_seed=3)  # other batching
    torch.testing.assert_close(noisy, again)
    assert not torch.allclose(noisy, clean)


def test_a_finished_run_continues_from_its_best_weights(tmp_path):
    """``run.init_from`` (``petrov train --continue RUN``): the new run starts at the old one's best
    weights; with a learning rate of 1e-30 it does not leave them."""
    first = train(tiny_config(), tmp_path / "a", data=tiny_data())
    more = train(tiny_config(optim={"lr": 1e-30, "epochs": 1}, run={"init_from": str(tmp_path / "a")}),
                 tmp_path / "b", data=tiny_data())
    assert more.epochs_completed == 1 and first.epochs_completed == 3
    old = torch.load(tmp_path / "a" / "best.pt", weights_only=True)["state_dict"]
    new = torch.load(tmp_path / "b" / "best.pt", weights_only=True)["state_dict"]
    for k in old:
        torch.testing.assert_close(new[k], old[k], rtol=0, atol=1e-20)
    other = tiny_config(run={"init_from": str(tmp_path / "a")},
                        model={"name": "fno1d", "options": {"width": 4, "modes": 4, "n_layers": 2, "proj_hidden": 16}})
    with pytest.raises(ValueError, match="other options"):
        train(other, tmp_path / "c", data=tiny_data())


def test_continue_on_the_command_line_takes_the_runs_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    generate_dataset("burgers", "data/b.h5", 12, 64, progress=False)
    sets = ['data.path="data/b.h5"', "data.n_train=6", "data.n_val=3", "data.n_test=3", "data.train_resolution=32",
            "data.eval_resolutions=[32]", "optim.epochs=1", "model.options.d_model=8", "model.options.modes=4",
            "model.options.decoder_width=8", 'run.device="cpu"', "run.progress=false"]
    assert cli_main(["train", "burgers-quick", "--out", "runs/a", *[a for s in sets for a in ("--set", s)]]) == 0
    assert cli_main(["train", "--continue", "runs/a", "--out", "runs/b", "--set", "optim.epochs=2"]) == 0
    saved = json.loads((tmp_path / "runs/b/config.json").read_text())
    assert saved["run"]["init_from"] == "runs/a" and saved["optim"]["epochs"] == 2
    assert cli_main(["train", "burgers-quick", "--continue", "runs/a", "--out", "runs/c"]) == 2
