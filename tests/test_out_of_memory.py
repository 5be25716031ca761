"""Out of device memory in training or evaluation: one line naming the batch size and what to lower.

``torch.cuda.OutOfMemoryError`` is raised here by a monkeypatched step (the class exists on every torch
build), so the CPU checks what a GPU user would see."""
import importlib.util
from pathlib import Path

import pytest
import torch

from petrov.cli import main as cli_main
from petrov.datasets import generate_dataset
from petrov.train import metrics
from petrov.train.memory import DeviceOutOfMemory
from petrov.train.step import Stepper
from petrov.train.trainer import train

_spec = importlib.util.spec_from_file_location("_trainer_cases", Path(__file__).with_name("test_trainer.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def out_of_memory(*args, **kwargs):
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total)")


def test_a_training_step_out_of_memory_names_the_batch_and_what_to_lower(tmp_path, monkeypatch):
    monkeypatch.setattr(Stepper, "step", out_of_memory)
    with pytest.raises(DeviceOutOfMemory) as err:
        train(cases.tiny_config(), tmp_path / "run", data=cases.tiny_data())
    text = str(err.value)
    assert "in training at batch size 4" in text and "lower optim.batch_size (now 4)" in text
    assert "run.amp = true" in text and "checkpoint_layers" not in text  # fno1d has no such option
    assert "\n" not in text and err.value.__cause__ is None
    for k, recompute in enumerate((False, "ffn")):  # "ffn" recomputes the feed-forward branches only
        options = {"d_model": 8, "n_layers": 1, "decoder_width": 8, "modes": 4, "checkpoint_layers": recompute}
        galerkin = cases.tiny_config(model={"name": "galerkin1d", "options": options},
                                     run={"device": "cpu", "progress": False, "amp": True})
        with pytest.raises(DeviceOutOfMemory, match="checkpoint_layers = true") as err:
            train(galerkin, tmp_path / f"run{k + 2}", data=cases.tiny_data())
        assert "run.amp" not in str(err.value)  # already on


def test_validation_out_of_memory_names_the_evaluation_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics, "score_batch", out_of_memory)
    cfg = cases.tiny_config(run={"device": "cpu", "progress": False, "eval_batch_size": 2})
    with pytest.raises(DeviceOutOfMemory, match=r"in validation at batch size 2; .*lower run.eval_batch_size \(now 2\)"):
        train(cfg, tmp_path / "run", data=cases.tiny_data())


def test_the_command_line_says_it_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    generate_dataset("burgers", "b.h5", 12, 64, progress=False)
    sets = ['data.path="b.h5"', "data.n_train=6", "data.n_val=3", "data.n_test=3", "data.train_resolution=32",
            "data.eval_resolutions=[32]", "optim.epochs=1", "optim.batch_size=3", "model.options.d_model=8",
            "model.options.modes=4", "model.options.decoder_width=8", 'run.device="cpu"', "run.progress=false"]
    args = ["train", "burgers-quick", *[a for s in sets for a in ("--set", s)]]
    assert cli_main([*args, "--out", "runs/ok"]) == 0
    with monkeypatch.context() as patch:
        patch.setattr(Stepper, "step", out_of_memory)
        assert cli_main([*args, "--out", "runs/oom"]) == 1
    (line,) = errors(capsys)
    assert line.startswith("petrov train: error: out of memory on cpu in training at batch size 3;")
    monkeypatch.setattr(metrics, "score_batch", out_of_memory)
    assert cli_main(["evaluate", "runs/ok", "--no-plots", "--batch-size", "2"]) == 1
    (line,) = errors(capsys)
    assert line.startswith("petrov evaluate: error: out of memory on cpu in the evaluation at resolution 32 at "
                           "batch size 2;") and "--batch-size" in line


def errors(capsys) -> list[str]:
    """The lines on stderr other than warnings (the preset's [data.generate] table is not this file's)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if not line.startswith("warning:")]
