"""Time budgets on any device: the warm-up (compilation, cuFFT plans, CUDA graph capture) is time spent but
not the pace of later epochs, and a run planned from a probe of itself trains as a run configured with
that many epochs.  The clock is a fake one, advanced by the steps: no test here measures time."""
import importlib.util
from pathlib import Path

import pytest
import torch

from petrov.train import timing
from petrov.train.checkpoint import load_run_checkpoint
from petrov.train.planning import EpochEstimate, epochs_for_budget
from petrov.train.step import Stepper
from petrov.train.timing import Budget, EpochTime
from petrov.train.trainer import train

_spec = importlib.util.spec_from_file_location("_trainer_cases", Path(__file__).with_name("test_trainer.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


class FakeClock:
    """``timing.clock``: seconds that pass only when a step says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self, device) -> float:
        return self.now


@pytest.fixture
def slow_first_step(monkeypatch):
    """The process's first training step takes 60 s (a compilation), every other one 1 s; nothing else
    takes time."""
    clock, real_step, calls = FakeClock(), Stepper.step, []

    def step(self, *args):
        calls.append(1)
        real_step(self, *args)
        clock.now += 60.0 if len(calls) == 1 else 1.0

    monkeypatch.setattr(timing, "clock", clock)
    monkeypatch.setattr(Stepper, "step", step)
    return clock


def test_an_epochs_steady_time_leaves_out_its_warm_up_steps():
    first = EpochTime(train=63.0, validation=0.5, steps=4, warmup=62.0, warmup_steps=3)
    assert first.seconds == 63.5 and first.steady() == 4.5  # 1 s per step after the warm-up
    assert EpochTime(train=8.0, validation=1.0, steps=4).steady() == 9.0  # no warm-up in it
    assert EpochTime(train=70.0, validation=0.0, steps=2, warmup=70.0, warmup_steps=2).steady() == 70.0
    budget = Budget(2.0, torch.device("cpu"))
    assert budget.next_epoch() == 0.0
    budget.record(first)
    assert budget.next_epoch() == 4.5
    budget.record(EpochTime(4.0, 0.5, 4))
    budget.record(EpochTime(5.0, 0.5, 4))
    assert budget.next_epoch() == 5.5  # the slowest epoch after the first


def test_a_slow_first_step_does_not_shorten_the_run(tmp_path, slow_first_step):
    """Budget 2 minutes, 4 steps per epoch: epoch 1 takes 63 s (60 of them its first step), the others 4 s.
    The run goes on while the time spent plus 4 s fits: after epoch 14 (115 s) one more fits, after
    epoch 15 (119 s) none.  Counting the first epoch as the pace would stop it after epoch 1."""
    cfg = cases.tiny_config(optim={"epochs": 50}, run={"device": "cpu", "progress": False,
                                                      "time_budget_minutes": 2.0})
    result = train(cfg, tmp_path / "run", data=cases.tiny_data())
    assert result.stopped == "time budget" and result.epochs_completed == 15
    assert result.train_seconds == 119.0


def test_the_probe_times_steps_after_the_warm_up(tmp_path, slow_first_step):
    seen = []

    def plan(estimate: EpochEstimate) -> int:
        seen.append(estimate)
        return 2

    result = train(cases.tiny_config(), tmp_path / "run", data=cases.tiny_data(), plan_epochs=plan)
    (estimate,) = seen
    assert estimate.step_seconds == 1.0 and estimate.warmup_seconds == 62.0
    assert estimate.steps == 4 and estimate.epoch_seconds == 4.0  # validation takes no fake time
    assert epochs_for_budget(estimate, 1.0, fraction=0.9) == 13 and epochs_for_budget(estimate, 1.0, 0.9, cap=5) == 5
    assert result.epochs_completed == 2
    assert load_run_checkpoint(tmp_path / "run" / "last.pt")["train_config"]["optim"]["epochs"] == 2
    assert estimate.checkpoint_seconds == 0.0 and not list((tmp_path / "run").glob(".probe-*"))  # written, removed


def test_a_planned_run_trains_as_a_run_configured_with_its_epochs(tmp_path):
    torch.set_num_threads(1)
    cfg = cases.tiny_config(model={"name": "galerkin1d", "options": {
        "d_model": 8, "n_layers": 1, "decoder_width": 8, "modes": 4, "dropout": 0.1}})  # dropout: the RNG
    planned = train(cfg, tmp_path / "planned", data=cases.tiny_data(), plan_epochs=lambda estimate: 3)
    configured = train(cfg, tmp_path / "configured", data=cases.tiny_data())
    assert planned.epochs_completed == configured.epochs_completed == 3
    a, b = (load_run_checkpoint(tmp_path / run / "last.pt")["state_dict"] for run in ("planned", "configured"))
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_run_configured_shorter_than_the_probe_is_planned(tmp_path):
    """One epoch of 4 steps is configured, the probe takes more steps than that: the schedule it steps
    through must hold them (OneCycle refuses a step past its end), and the plan still decides the epochs."""
    cfg = cases.tiny_config(optim={"epochs": 1})
    result = train(cfg, tmp_path / "run", data=cases.tiny_data(), plan_epochs=lambda estimate: 2)
    assert result.epochs_completed == 2
    assert load_run_checkpoint(tmp_path / "run" / "last.pt")["train_config"]["optim"]["epochs"] == 2
