"""SIGTERM (a scheduler's preemption) and Ctrl-C in the middle of an epoch: ``last.pt`` with the place in the
epoch, exit 143 (130), and ``--resume`` ends with exactly the weights of an uninterrupted run; a job script
that always passes ``--resume`` starts its run the first time.  Two nodes: ``test_multinode.py``."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from petrov.cli import main as cli_main
from petrov.common.interrupts import Terminated, deferred_interrupts, interrupt_pending, stop_on_signals
from petrov.datasets import generate_dataset
from petrov.train import metrics, step
from petrov.train.checkpoint import load_run_checkpoint
from petrov.train.preemption import Position
from petrov.train.trainer import TrainingDiverged, train

_spec = importlib.util.spec_from_file_location("_trainer_cases", Path(__file__).with_name("test_trainer.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
HOOKED = Path(__file__).with_name("hooked_petrov.py")
GRACE_S = 30  # Kubernetes' default grace period between its SIGTERM and its SIGKILL
# dropout draws from torch's generator in every step: a resumed run must have it exactly where it was
DROPOUT = {"name": "galerkin1d",
           "options": {"d_model": 8, "n_layers": 1, "decoder_width": 8, "modes": 4, "dropout": 0.1}}


def last(run: Path) -> dict:
    return load_run_checkpoint(run / "last.pt")


def assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = last(a)["state_dict"], last(b)["state_dict"]
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


def log_rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def signal_at(monkeypatch, where: str, number: int, epoch: int = 2) -> None:
    """SIGTERM to this process after step ``number`` of epoch ``epoch`` (``where="step"``), or after the run's
    validation batch ``number`` (``"validation"``)."""
    seen = {"epoch": 0, "validation": 0}
    original_step, original_score = step.Stepper.step, metrics.score_batch

    def stepper_step(self, b, n, totals):
        seen["epoch"] += n == 1
        original_step(self, b, n, totals)
        if where == "step" and (seen["epoch"], n) == (epoch, number):
            os.kill(os.getpid(), signal.SIGTERM)

    def score_batch(*args, **kwargs):
        out = original_score(*args, **kwargs)
        seen["validation"] += 1
        if where == "validation" and seen["validation"] == number:
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(step.Stepper, "step", stepper_step)
    monkeypatch.setattr(metrics, "score_batch", score_batch)


@pytest.fixture
def lazy_file(tmp_path):
    path = tmp_path / "b.h5"
    generate_dataset("burgers", path, 24, resolution=32, progress=False)
    return path


def run_config(source: str, lazy_file: Path, **sections):
    """The tiny config on the in-memory synthetic data (``"memory"``: the device-resident path) or on a file
    read lazily (``"file"``: the loader path)."""
    if source == "memory":
        return cases.tiny_config(model=DROPOUT, **sections), dict(data=cases.tiny_data())
    data = {"path": str(lazy_file), "lazy": True, "n_train": 16, "n_val": 4, "n_test": 4}
    return cases.tiny_config(model=DROPOUT, data=data, **sections), {}


@LINUX
@pytest.mark.parametrize("source", ["memory", "file"])
@pytest.mark.parametrize("where, number", [("step", 2), ("validation", 2)])  # validation: epoch 2's (1 batch each)
@pytest.mark.parametrize("epochs", [3, 1.75])  # 1.75: stopped in the shorter last epoch (3 of its 4 batches)
def test_a_run_stopped_within_an_epoch_continues_bit_identically(tmp_path, monkeypatch, lazy_file, source, where,
                                                                  number, epochs):
    torch.set_num_threads(1)
    cfg, data = run_config(source, lazy_file, optim={"epochs": epochs})
    train(cfg, tmp_path / "straight", **data)
    with monkeypatch.context() as patch:
        signal_at(patch, where, number)
        with pytest.raises(Terminated), stop_on_signals():
            train(cfg, tmp_path / "resumed", **data)
    state = last(tmp_path / "resumed")
    steps = 16 // 4 if epochs == 3 else 3
    position = Position.from_state(state["position"])
    assert state["epoch"] == 1 and position.steps == (number if where == "step" else steps)
    assert [r["epoch"] for r in log_rows(tmp_path / "resumed")] == [1]
    torch.manual_seed(12345)  # a fresh process would have other states
    result = train(cfg, tmp_path / "resumed", resume=True, **data)
    assert result.epochs_completed == epochs
    assert_same_weights(tmp_path / "straight", tmp_path / "resumed")
    timeless = lambda run: [{k: v for k, v in r.items() if k != "seconds"} for r in log_rows(run)]  # noqa: E731
    assert timeless(tmp_path / "resumed") == timeless(tmp_path / "straight")


@LINUX
def test_an_epoch_that_diverged_before_the_signal_is_reported_not_saved(tmp_path, monkeypatch):
    def poison(trainer, record):
        if record.epoch == 1:
            with torch.no_grad():
                next(trainer.model.parameters()).fill_(float("nan"))
        return False

    signal_at(monkeypatch, "step", 2)
    with pytest.raises(TrainingDiverged, match=r"epoch 2, batch 1 of 4"), stop_on_signals():
        train(cases.tiny_config(), tmp_path / "run", data=cases.tiny_data(), callbacks=[poison])
    state = last(tmp_path / "run")  # the last good epoch, finite
    assert state["epoch"] == 1 and state["position"] is None


def test_deferred_interrupts_record_the_first_signal_and_a_second_ctrl_c_stops_at_once(monkeypatch):
    # a suite started in the background (`cmd &`) inherits SIGINT ignored, which stop_on_signals keeps
    monkeypatch.setattr(signal, "getsignal", lambda s: signal.default_int_handler)
    with pytest.raises(Terminated), stop_on_signals():  # the block raises the recorded SIGTERM when it ends
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # a launcher's and a scheduler's: changes nothing
            assert interrupt_pending()
            with pytest.raises(KeyboardInterrupt) as err:  # a second Ctrl-C: now
                os.kill(os.getpid(), signal.SIGINT)
            assert not isinstance(err.value, Terminated)
    assert not interrupt_pending()


TOML = """
[data]
path = "b.h5"
train_resolution = 32
n_train = 32
n_val = 4
n_test = 4
[model]
name = "galerkin1d"
[model.options]
d_model = 8
n_layers = 1
decoder_width = 8
modes = 4
dropout = 0.1
[optim]
epochs = 3
batch_size = 2
[run]
progress = false
device = "cpu"
threads = 1
num_workers = 1
"""


@LINUX
def test_a_job_script_that_always_passes_resume_starts_stops_on_sigterm_and_continues(tmp_path, capsys):
    """``petrov train CONFIG --out RUN --resume`` as a requeued job runs it: the first run starts (nothing to
    resume, said so); SIGTERM after step 7 of epoch 2 writes last.pt there and exits 143 within seconds; the
    requeued command continues and ends with exactly the weights of an uninterrupted run."""
    generate_dataset("burgers", tmp_path / "b.h5", 40, resolution=64, progress=False)
    (tmp_path / "job.toml").write_text(TOML)
    command = ["train", "job.toml", "--out", "run", "--resume"]
    sent = tmp_path / "sent"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SIGNAL_AT": "2:7", "SIGNAL_LOG": str(sent)}
    with open(tmp_path / "out", "w") as stdout, open(tmp_path / "err", "w") as stderr:
        proc = subprocess.Popen([sys.executable, str(HOOKED), *command], cwd=tmp_path, env=env, stdout=stdout,
                                stderr=stderr, start_new_session=True)
    try:  # the events: the hook's record of its SIGTERM, then the job's exit within a scheduler's grace period
        end = time.monotonic() + 300  # (guards against a hang only)
        while not sent.exists() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        proc.wait(timeout=GRACE_S)
    finally:
        if proc.poll() is None:  # still running: killed, as the scheduler would (wait raised)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert proc.returncode == 143, err
    assert "nothing to resume in run (no last.pt): starting the run" in out
    assert "stopped at batch 7 of 16 in epoch 2; saved run/last.pt" in out
    # one line, the DataLoader worker quiet (it ignores the signal sent to the process group)
    assert err.strip().splitlines() == ["petrov train: terminated; continue with `petrov train --out run --resume`"]
    seconds = time.time() - float(sent.read_text())
    with capsys.disabled():  # the figure (the target is 5 s: a few tenths to save, the rest is the interpreter's
        print(f"SIGTERM to exit: {seconds:.2f} s")  # exit), shown with pytest -s

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert cli_main(command) == 0  # the requeued job
        assert "resuming run/last.pt after epoch 1, at batch 7 of epoch 2" in capsys.readouterr().out
        assert cli_main(["train", "job.toml", "--out", "straight"]) == 0
    finally:
        os.chdir(cwd)
    assert_same_weights(tmp_path / "straight", tmp_path / "run")
