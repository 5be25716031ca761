"""Time budgets on any device: the warm-up (compilation, cuFFT plans, CUDA graph capture) is time spent but
not the pace of later epochs, and a run planned from a probe of itself trains as a run configured with
that many epochs.  The clock is a fake one, advanced by the steps: no test here measures time."""
import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from petrov.train import timing
from petrov.train.checkpoint import load_run_checkpoint
from petrov.train.optimization import OneCycle
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


def steps_taking(monkeypatch, seconds) -> FakeClock:
    """Training step ``k`` of the process (1, 2, ...) takes ``seconds(k)`` of a fake clock; nothing else takes
    time."""
    clock, real_step, calls = FakeClock(), Stepper.step, []

    def step(self, *args):
        calls.append(1)
        real_step(self, *args)
        clock.now += seconds(len(calls))

    monkeypatch.setattr(timing, "clock", clock)
    monkeypatch.setattr(Stepper, "step", step)
    return clock


@pytest.fixture
def slow_first_step(monkeypatch):
    """The process's first training step takes 60 s (a compilation), every other one 1 s."""
    return steps_taking(monkeypatch, lambda k: 60.0 if k == 1 else 1.0)


def test_an_epochs_steady_time_leaves_out_its_warm_up_steps():
    first = EpochTime(train=63.0, validation=0.5, steps=4, warmup=62.0, warmup_steps=3)
    assert first.seconds == 63.5 and first.steady() == 4.5  # 1 s per step after the warm-up
    assert EpochTime(train=8.0, validation=1.0, steps=4).steady() == 9.0  # no warm-up in it
    assert EpochTime(train=70.0, validation=0.0, steps=2, warmup=70.0, warmup_steps=2).steady() == 70.0
    budget = Budget(2.0, torch.device("cpu"))
    assert budget.next_epoch() == 0.0
    budget.record(first)
    assert budget.next_epoch() == 4.5
    assert budget.pace() == (0.0, 0.0) and budget.steps_left(4) is None  # the first epoch alone is no pace
    budget.record(EpochTime(4.0, 0.5, 4))
    budget.record(EpochTime(5.0, 0.5, 4))
    assert budget.next_epoch() == 5.5 and budget.next_epoch(2) == 3.0  # the slowest epoch after the first
    assert budget.pace() == (1.125, 0.5)  # the medians of the epochs after the first: step, validation
    for seconds in (3.5, 3.5, 3.5, 3.5):
        budget.record(EpochTime(seconds, 0.5, 4))
    assert budget.pace() == (0.875, 0.5) and budget.next_epoch() == 5.5  # the last 5: 1.25 and 4 x 0.875 s a step


def test_the_steps_left_are_whole_epochs_then_part_of_one_that_leaves_time_for_its_validation(monkeypatch):
    """A 1-minute budget, epochs of 4 steps of 1 s and a validation of 1 s (5 s): with 38 s left, 7 whole
    epochs (35 s), then 2 steps and a validation (3 s); with 40 s left, 8 whole epochs and nothing more."""
    clock = FakeClock()
    monkeypatch.setattr(timing, "clock", clock)
    budget = Budget(1.0, torch.device("cpu"))
    budget.start()
    for _ in range(3):
        budget.record(EpochTime(4.0, 1.0, 4))
    clock.now = 22.0
    assert budget.steps_left(4) == 7 * 4 + 2
    clock.now = 20.0
    assert budget.steps_left(4) == 8 * 4
    clock.now = 57.0  # an epoch of 2 steps ends at the budget, one of 4 after it
    assert not budget.exhausted(2) and budget.exhausted(4) and budget.exhausted()


def test_a_slow_first_step_does_not_shorten_the_run(tmp_path, slow_first_step):
    """Budget 2 minutes, 4 steps per epoch: epoch 1 takes 63 s (60 of them its first step), the others 4 s.
    After epoch 2, 53 s are left: 13 more epochs fit at 4 s and one more step, so the 50 configured epochs'
    schedule is run in 15 epochs and one step, which end at 120 s.  Counting the first epoch as the pace
    would stop it after epoch 1."""
    cfg = cases.tiny_config(optim={"epochs": 50}, run={"device": "cpu", "progress": False,
                                                      "time_budget_minutes": 2.0})
    result = train(cfg, tmp_path / "run", data=cases.tiny_data())
    assert result.epochs_completed == result.epochs_scheduled == 15.25 and result.stopped == "completed"
    assert result.train_seconds == 120.0


def one_cycle(total: int, lr: float = 1e-2, pct: float = 0.3, div: float = 10.0, final: float = 100.0,
              schedule=OneCycle):
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    return optimizer, schedule(optimizer, max_lr=lr, total_steps=total, pct_start=pct, div_factor=div,
                               final_div_factor=final)


def reference_lr(u: float, total: int, lr: float = 1e-2, pct: float = 0.3, div: float = 10.0, final: float = 100.0):
    """OneCycle's learning rate at position ``u`` of ``total`` steps, written out: a cosine from lr/div up to lr
    until ``pct * total - 1``, then a cosine down to lr/div/final at ``total - 1``."""
    import math

    peak = pct * total - 1
    cos = lambda a, b, t: b + (a - b) / 2 * (math.cos(math.pi * t) + 1)  # noqa: E731
    if u <= peak:
        return cos(lr / div, lr, u / peak)
    return cos(lr, lr / div / final, (u - peak) / (total - 1 - peak))


def lrs(optimizer, scheduler, steps: int, resize: dict[int, int]) -> list[float]:
    out = []
    for t in range(steps):
        if t in resize:
            scheduler.resize(resize[t])
        out.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    return out + [scheduler.get_last_lr()[0]]


def test_a_shortened_schedule_runs_the_rest_of_the_cycle_in_fewer_steps():
    """100 steps shortened at step 10 (in the rise) to 70, then at step 40 (in the fall) to 60: the learning
    rate is torch's OneCycleLR's until step 10, then the same cycle at the positions
    u = 10 + (t - 10) · 89/59 and, from step 40, u = u(40) + (t - 40) · (99 - u(40))/19: the steps left map
    onto what was left of the cycle (99 its last step).  No jump where it is shortened; it peaks once, at lr,
    and step 59, the last, runs at lr/div/final."""
    optimizer, scheduler = one_cycle(100)
    got = lrs(optimizer, scheduler, 60, {10: 70, 40: 60})[:60]
    torch_optimizer, reference = one_cycle(100, schedule=torch.optim.lr_scheduler.OneCycleLR)
    assert got[:10] == pytest.approx(lrs(torch_optimizer, reference, 10, {})[:10], rel=1e-12)
    u40 = 10 + 30 * 89 / 59
    position = lambda t: t if t < 10 else (10 + (t - 10) * 89 / 59 if t < 40 else u40 + (t - 40) * (99 - u40) / 19)  # noqa: E731
    assert got == pytest.approx([reference_lr(position(t), 100) for t in range(60)], rel=1e-9)
    assert got[59] == pytest.approx(1e-2 / 10 / 100, rel=1e-9) and scheduler.steps == 60
    steps = [b - a for a, b in zip(got, got[1:])]
    assert max(abs(d) for d in steps) < 2 * max(abs(d) for d in steps[:10] + steps[41:])  # no jump
    assert max(got) == pytest.approx(1e-2, rel=1e-3) and sum(d > 0 for d in steps) == sum(d > 0 for d in steps[:29])


def test_a_lengthened_schedule_runs_the_rest_of_the_cycle_in_more_steps():
    """40 steps lengthened at step 20 (in the fall) to 80: u = 20 + (t - 20) · 19/59, the last step at the
    final rate."""
    optimizer, scheduler = one_cycle(40)
    got = lrs(optimizer, scheduler, 80, {20: 80})[:80]
    position = lambda t: t if t < 20 else 20 + (t - 20) * 19 / 59  # noqa: E731
    assert got == pytest.approx([reference_lr(position(t), 40) for t in range(80)], rel=1e-9)
    assert got[79] == pytest.approx(1e-2 / 10 / 100, rel=1e-9) and scheduler.steps == 80


def test_a_schedule_is_resized_only_to_more_steps_than_it_has_taken():
    optimizer, scheduler = one_cycle(20)
    lrs(optimizer, scheduler, 5, {})
    for bad in (3, 5):
        with pytest.raises(ValueError, match=f"cannot resize a schedule of 20 steps, 5 taken, to {bad}"):
            scheduler.resize(bad)


@pytest.fixture
def one_second_steps(monkeypatch):
    """Every training step takes 1 s of a fake clock; nothing else takes time."""
    return steps_taking(monkeypatch, lambda k: 1.0)


def budgeted(epochs: int):
    return cases.tiny_config(model={"name": "galerkin1d", "options": {
        "d_model": 8, "n_layers": 1, "decoder_width": 8, "modes": 4, "dropout": 0.1}},
        optim={"epochs": epochs}, run={"device": "cpu", "progress": False, "time_budget_minutes": 1.0})


def test_epochs_slower_than_planned_end_the_run_at_the_end_of_its_schedule(tmp_path, one_second_steps):
    """Planned for 20 epochs of 4 s in a 1-minute budget: after epoch 2 (8 s; the first epoch is not taken
    as the pace), 13 more fit, so the schedule is run in 15 epochs, which end with the budget (60 s), at the schedule's last learning rate, where the
    stop rule alone would have stopped epoch 15 of 20 mid-schedule."""
    result = train(budgeted(20), tmp_path / "run", data=cases.tiny_data(), plan_epochs=lambda estimate: 20)
    assert (result.epochs_completed, result.epochs_scheduled, result.stopped) == (15, 15, "completed")
    assert result.train_seconds == 60.0
    rows = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    # the rate after the last step (the log's): annealed (lr 1e-2); after epoch 15 of 20 it would be 1.6e-3
    assert rows[-1]["lr"] < 1e-5
    last = load_run_checkpoint(tmp_path / "run" / "last.pt")
    assert last["scheduled_steps"] == 15 * 4 and last["train_config"]["optim"]["epochs"] == 20


def test_a_slow_first_epoch_does_not_shorten_the_schedule(tmp_path, monkeypatch):
    """Every step of epoch 1 takes 2 s (caches met for the first time, after the warm-up steps too), later
    ones 1 s: 13 planned epochs take 8 + 12 x 4 = 56 s of the 60.  Taken as the pace, epoch 1's 8 s would
    have shortened the schedule to 7 epochs after it."""
    steps_taking(monkeypatch, lambda k: 2.0 if k <= 4 else 1.0)
    result = train(budgeted(13), tmp_path / "run", data=cases.tiny_data())
    assert (result.epochs_completed, result.epochs_scheduled, result.stopped) == (13, 13, "completed")
    assert result.train_seconds == 56.0


def test_a_run_resumed_after_its_schedule_was_shortened_continues_it(tmp_path, one_second_steps):
    """Stopped after epoch 5 of the shortened 15 and resumed (with a fresh budget, in which the 10 epochs
    left fit): the same 15 epochs, the same weights as the run that was not stopped."""
    torch.set_num_threads(1)
    plan = lambda estimate: 20  # noqa: E731
    straight = train(budgeted(20), tmp_path / "straight", data=cases.tiny_data(), plan_epochs=plan)
    stop_after_five = lambda trainer, record: record.epoch == 5  # noqa: E731
    train(budgeted(20), tmp_path / "resumed", data=cases.tiny_data(), plan_epochs=plan, callbacks=[stop_after_five])
    resumed = train(budgeted(20), tmp_path / "resumed", data=cases.tiny_data(), resume=True)
    assert straight.epochs_completed == resumed.epochs_completed == resumed.epochs_scheduled == 15
    a, b = (load_run_checkpoint(tmp_path / run / "last.pt")["state_dict"] for run in ("straight", "resumed"))
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_the_probe_times_steps_after_the_warm_up(tmp_path, slow_first_step):
    seen = []

    def plan(estimate: EpochEstimate) -> int:
        seen.append(estimate)
        return 2

    result = train(cases.tiny_config(), tmp_path / "run", data=cases.tiny_data(), plan_epochs=plan)
    (estimate,) = seen
    assert estimate.step_seconds == 1.0 and estimate.warmup_seconds == 64.0  # 5 steps: the 5 batches timed
    assert estimate.steps == 4 and estimate.epoch_seconds == 4.0  # validation takes no fake time
    assert epochs_for_budget(estimate, 1.0, fraction=0.9) == 13.5 and epochs_for_budget(estimate, 1.0, 0.9, cap=5) == 5
    assert result.epochs_completed == 2
    assert load_run_checkpoint(tmp_path / "run" / "last.pt")["train_config"]["optim"]["epochs"] == 2
    assert estimate.checkpoint_seconds == 0.0 and not list((tmp_path / "run").glob(".probe-*"))  # written, removed


def test_the_probe_times_batches_it_has_met_before(tmp_path, monkeypatch):
    """A step on a batch met for the first time takes 3 s (a cache built per batch), later ones 1 s: the
    probe's warm-up goes through the batches it then times, so it measures the later epochs' 1 s."""
    clock, real_step, seen, estimates = FakeClock(), Stepper.step, set(), []

    def step(self, batch, *args):
        real_step(self, batch, *args)
        key = tuple(batch.sample_ids.tolist())
        clock.now += 1.0 if key in seen else 3.0
        seen.add(key)

    monkeypatch.setattr(timing, "clock", clock)
    monkeypatch.setattr(Stepper, "step", step)
    train(cases.tiny_config(data={"n_train": 40}), tmp_path / "run", data=cases.tiny_data(40),  # 10 batches
          plan_epochs=lambda estimate: estimates.append(estimate) or 2)
    assert estimates[0].step_seconds == 1.0


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


def test_the_planned_epochs_end_in_the_share_of_one_more_epoch_that_fits():
    """Epochs of 10 steps of 1 s, validation 2 s and checkpoints 1 s (13 s): in 60 s, 4 whole epochs (52 s),
    then the 8 s left hold a validation and checkpoints (3 s) and 5 steps."""
    estimate = EpochEstimate(step_seconds=1.0, eval_seconds=1.0, steps=10, eval_batches=2, warmup_seconds=5.0,
                             checkpoint_seconds=1.0)
    assert epochs_for_budget(estimate, 1.0, fraction=1.0) == 4.5
    assert epochs_for_budget(estimate, 52 / 60, fraction=1.0) == 4  # nothing after the whole epochs
    assert epochs_for_budget(estimate, 55 / 60, fraction=1.0) == 4  # not even one step after another validation
    assert epochs_for_budget(estimate, 0.1, fraction=1.0) == 0.3  # 6 s: less than one epoch
    assert epochs_for_budget(estimate, 0.01, fraction=1.0) == 0.1  # not even a step: one step all the same
    assert epochs_for_budget(estimate, 1.0, fraction=1.0, cap=3) == 3


@pytest.mark.parametrize("epochs", [2.5, 0.75])
def test_a_fraction_of_an_epoch_ends_the_last_one_early(tmp_path, epochs):
    """``optim.epochs = 2.5`` with 4 batches per epoch: 10 steps (the schedule's, annealed at the end), the
    third epoch after its first 2 batches; 0.75: one epoch of 3 steps."""
    torch.set_num_threads(1)
    steps = []
    result = train(cases.tiny_config(optim={"epochs": epochs}), tmp_path / "run", data=cases.tiny_data(),
                   callbacks=[lambda trainer, record: steps.append(trainer.scheduler.last_epoch) and False])
    assert result.epochs_completed == result.epochs_scheduled == epochs and result.stopped == "completed"
    assert steps[-1] == round(4 * epochs) and len(steps) == math.ceil(epochs)
    rows = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == list(range(1, math.ceil(epochs) + 1))
    last = load_run_checkpoint(tmp_path / "run" / "last.pt")
    assert last["scheduler"]["total_steps"] == round(4 * epochs)  # the schedule ends with the last step


def test_a_run_resumed_before_a_shorter_last_epoch_ends_as_the_run_that_was_not_stopped(tmp_path):
    torch.set_num_threads(1)
    cfg = cases.tiny_config(model={"name": "galerkin1d", "options": {
        "d_model": 8, "n_layers": 1, "decoder_width": 8, "modes": 4, "dropout": 0.1}}, optim={"epochs": 2.5})
    straight = train(cfg, tmp_path / "straight", data=cases.tiny_data())
    train(cfg, tmp_path / "resumed", data=cases.tiny_data(), callbacks=[lambda trainer, record: record.epoch == 2])
    resumed = train(cfg, tmp_path / "resumed", data=cases.tiny_data(), resume=True)
    assert straight.epochs_completed == resumed.epochs_completed == 2.5
    a, b = (load_run_checkpoint(tmp_path / run / "last.pt")["state_dict"] for run in ("straight", "resumed"))
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_epochs_are_a_positive_number():
    from petrov.train.config import config_from_dict, config_to_dict, quick_config
    from petrov.train.optimization import schedule_steps

    def _raw(epochs):
        plain = config_to_dict(cases.tiny_config())
        plain["optim"]["epochs"] = epochs
        return plain

    assert config_from_dict(_raw(epochs=2.5)).optim.epochs == 2.5
    assert isinstance(config_from_dict(_raw(epochs=3)).optim.epochs, int)
    for bad in (0, -1.5):
        with pytest.raises(ValueError, match=f"optim.epochs must be > 0 .*got {bad}"):
            config_from_dict(_raw(epochs=bad))
    with pytest.raises(ValueError, match="optim.epochs: expected"):
        config_from_dict(_raw(epochs="many"))
    assert quick_config(_raw(epochs=0.5))["optim"]["epochs"] == 0.5
    assert schedule_steps(2.5, 4) == 10 and schedule_steps(0.01, 4) == 1 and schedule_steps(1 / 3, 3) == 1
    with pytest.raises(ValueError, match="cannot schedule"):
        schedule_steps(float("nan"), 4)


def test_a_planned_run_whose_epochs_are_faster_than_its_probe_fills_the_time_it_was_planned_for(tmp_path,
                                                                                                 monkeypatch):
    """The probe's steps (its 10) take 2 s, the run's 1 s; a 1-minute budget planned to 90%: 6.75 epochs of
    4 steps (27 steps of 2 s: 54 s).  After epoch 2 (8 s) the pace says 46 steps fit by 54 s, where 19 were
    left: the schedule is lengthened to 54 steps (13.5 epochs), which end at 54 s, as planned."""
    steps_taking(monkeypatch, lambda k: 2.0 if k <= 10 else 1.0)
    plans = []
    result = train(budgeted(20), tmp_path / "run", data=cases.tiny_data(),
                   plan_epochs=lambda estimate: plans.append(epochs_for_budget(estimate, 1.0, 0.9)) or plans[-1])
    assert plans == [6.75]
    assert (result.epochs_completed, result.epochs_scheduled, result.stopped) == (13.5, 13.5, "completed")
    assert result.train_seconds == 54.0
    rows = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert rows[-1]["lr"] < 1e-5  # annealed: the schedule ended with the run


@pytest.mark.parametrize("cap, planned", [(20, 14.25), (5, 5)])
def test_fill_budget_plans_the_epochs_that_fill_the_budget(tmp_path, monkeypatch, cap, planned):
    """``run.fill_budget`` (``petrov train --budget-minutes``): steps of 1 s, 4 an epoch, a 1-minute budget, of
    which 95% is 57 steps: 14 epochs and one step (14.25), which the run trains in 57 s; ``optim.epochs`` caps
    the plan.  The planned epochs are the run's config (``config.json``, what a resume continues)."""
    steps_taking(monkeypatch, lambda k: 1.0)
    cfg = budgeted(cap)
    cfg.run.fill_budget = True
    result = train(cfg, tmp_path / "run", data=cases.tiny_data())
    assert (result.epochs_completed, result.epochs_scheduled, result.stopped) == (planned, planned, "completed")
    assert result.train_seconds == planned * 4
    assert json.loads((tmp_path / "run" / "config.json").read_text())["optim"]["epochs"] == planned


@pytest.mark.parametrize("older", [{"scheduled_epochs": 3}, {}])
def test_a_last_pt_written_before_scheduled_steps_resumes(tmp_path, older):
    """A ``last.pt`` holding the schedule's epochs (as written before this version), or nothing of it (0.2.0),
    resumes to the weights of the run that was not stopped."""
    torch.set_num_threads(1)
    straight = train(cases.tiny_config(), tmp_path / "straight", data=cases.tiny_data())
    train(cases.tiny_config(), tmp_path / "resumed", data=cases.tiny_data(),
          callbacks=[lambda trainer, record: record.epoch == 1])
    path = tmp_path / "resumed" / "last.pt"
    raw = torch.load(path, weights_only=True)
    del raw["extra"]["scheduled_steps"]
    raw["extra"].update(older)
    torch.save(raw, path)
    resumed = train(cases.tiny_config(), tmp_path / "resumed", data=cases.tiny_data(), resume=True)
    assert straight.epochs_completed == resumed.epochs_completed == 3
    a, b = (load_run_checkpoint(tmp_path / run / "last.pt")["state_dict"] for run in ("straight", "resumed"))
    for key in a:
        assert torch.equal(a[key], b[key]), key


BUDGET_CASES = ([(script, "0", "minutes > 0") for script in ("compare_accuracy.py", "mesh_operators.py", "gpu.py")]
                + [("marching.py", value, says) for value, says in (("0", "minutes > 0"), ("-5", "minutes > 0"),
                                                                    ("nan", "minutes > 0"), ("ten", "as a number"))])


@pytest.mark.parametrize("script, value, says", BUDGET_CASES)
def test_a_budget_benchmark_refuses_an_impossible_budget_before_any_work(script, value, says, tmp_path):
    """One line from argparse, no traceback, nothing generated (``marching.py`` read 0 as its default)."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / script
    run = subprocess.run([sys.executable, str(path), "--budget-minutes", value], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2
    assert "--budget-minutes: " in run.stderr and says in run.stderr and "Traceback" not in run.stderr
    assert not any(tmp_path.iterdir())
