"""Run checkpoints: plain contents, RNG round trip, resume == uninterrupted, clear errors."""
import importlib.util
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from petrov.operators import build_model, load_model, save_model
from petrov.train.checkpoint import load_run_checkpoint, rng_state, save_run_checkpoint, set_rng_state
from petrov.cli import main as cli_main
from petrov.train.trainer import train

# the synthetic problem and tiny config of test_trainer.py
_spec = importlib.util.spec_from_file_location("_trainer_cases", Path(__file__).with_name("test_trainer.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def draws():
    return torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)]


def test_rng_state_round_trips_through_a_weights_only_file(tmp_path):
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    np.random.randn()  # leaves a cached gaussian in numpy's state
    torch.save(rng_state(), tmp_path / "rng.pt")
    first = draws()
    torch.manual_seed(99), np.random.seed(99), random.seed(99)
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    second = draws()
    assert torch.equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert first[2] == second[2]


def test_run_checkpoint_is_a_model_file_with_normalizers(tmp_path):
    data = cases.tiny_data()
    model = build_model("fno1d", width=8, modes=4)
    path = tmp_path / "best.pt"
    save_run_checkpoint(path, model, {"x": data.x_normalizer, "y": None}, epoch=3, best_metric=0.5)
    state = load_run_checkpoint(path)
    assert state["epoch"] == 3 and state["normalizers"]["y"] is None
    torch.testing.assert_close(state["normalizers"]["x"]["mean"], data.x_normalizer.mean)
    # petrov.operators.load_model reads it too (an ordinary model file)
    again = load_model(path)
    for k, v in model.state_dict().items():
        assert torch.equal(again.state_dict()[k], v)


def test_missing_and_foreign_checkpoints_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoints"):
        load_run_checkpoint(tmp_path / "last.pt")
    model = build_model("fno1d", width=8, modes=4)
    save_model(model, tmp_path / "plain.pt")
    with pytest.raises(ValueError, match="without training state"):
        load_run_checkpoint(tmp_path / "plain.pt")
    with pytest.raises(FileNotFoundError, match="found: plain.pt"):
        load_run_checkpoint(tmp_path / "last.pt")


def weights(run_dir):
    return load_run_checkpoint(Path(run_dir) / "last.pt")["state_dict"]


def test_resume_ends_with_the_same_weights_as_an_uninterrupted_run(tmp_path):
    torch.set_num_threads(1)
    # dropout draws from the torch RNG, shuffling depends on the epoch: both must be restored
    cfg = cases.tiny_config(model={"name": "galerkin1d", "options": {
        "d_model": 8, "n_layers": 1, "decoder_width": 8, "modes": 4, "dropout": 0.1}})
    straight = train(cfg, tmp_path / "straight", data=cases.tiny_data())
    assert straight.epochs_completed == 3

    kill_after_first = lambda trainer, record: record.epoch == 1  # noqa: E731
    first = train(cfg, tmp_path / "resumed", data=cases.tiny_data(), callbacks=[kill_after_first])
    assert first.epochs_completed == 1
    torch.manual_seed(12345), np.random.seed(1), random.seed(1)  # a fresh process would differ too
    resumed = train(cfg, tmp_path / "resumed", data=cases.tiny_data(), resume=True)
    assert resumed.epochs_completed == 3

    a, b = weights(tmp_path / "straight"), weights(tmp_path / "resumed")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    rows = lambda d: [json.loads(x) for x in (tmp_path / d / "log.jsonl").read_text().splitlines()]  # noqa: E731
    assert [r["epoch"] for r in rows("resumed")] == [1, 2, 3]
    assert [r["val_rel_l2"] for r in rows("resumed")] == [r["val_rel_l2"] for r in rows("straight")]


def test_resume_refuses_a_changed_config(tmp_path):
    cfg = cases.tiny_config(optim={"epochs": 1})
    train(cfg, tmp_path / "run", data=cases.tiny_data())
    changed = cases.tiny_config(optim={"epochs": 1, "lr": 5e-3})
    with pytest.raises(ValueError, match="optim.lr"):
        train(changed, tmp_path / "run", data=cases.tiny_data(), resume=True)


def test_resume_with_nothing_to_resume_starts_the_run_with_a_notice(tmp_path, capsys, caplog):
    """A job script that always passes --resume: the first run starts; without a config there is nothing to
    start from, which is said."""
    with caplog.at_level("INFO", logger="petrov.train"):
        result = train(cases.tiny_config(optim={"epochs": 1}), tmp_path / "empty", data=cases.tiny_data(), resume=True)
    assert result.epochs_completed == 1 and (tmp_path / "empty" / "last.pt").is_file()
    assert "nothing to resume in" in caplog.text and "starting the run" in caplog.text
    assert cli_main(["train", "--out", str(tmp_path / "none"), "--resume"]) == 1
    assert "config.json" in capsys.readouterr().err
