"""The training step on any device: batches held on the device equal the loader's, a step reads nothing
back to the host, divergence is found on the device and reported at the end of its epoch, static shapes
pad with zero-weight samples."""
import importlib.util
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from petrov.datasets import InputNoise
from petrov.operators import MODELS
from petrov.train import distributed as dist_
from petrov.train.batches import Batches, ResidentSplit, pad_batch
from petrov.train.checkpoint import load_run_checkpoint
from petrov.train.step import BatchLoss, EpochTotals, Stepper
from petrov.train.trainer import TrainingDiverged, train

CASES = Path(__file__).with_name("test_trainer.py")
_spec = importlib.util.spec_from_file_location("_trainer_cases", CASES)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
CPU = torch.device("cpu")


def epoch_batches(dataset, batch, static=False, epoch=3):
    sampler = dist_.sampler(dataset, dist_.Context(), shuffle=True, seed=5)
    sampler.set_epoch(epoch)
    return list(Batches(dataset, batch, sampler, CPU, static=static))


def test_resident_batches_are_the_loaders_batches_with_the_same_noise():
    data = cases.tiny_data(n_train=10)
    split = ResidentSplit(data.train, CPU)
    noise = InputNoise(0.1, 3)
    held, loaded = epoch_batches(split, 4), epoch_batches(data.train, 4)
    assert [b.n for b in held] == [b.n for b in loaded] == [4, 4, 2]
    for a, b in zip(held, loaded):
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and torch.equal(a.positions, b.positions)
        assert torch.equal(a.inputs["pos"], b.inputs["pos"])
        # the resident split draws its noise table once; a sample's noise is the one InputNoise draws for it
        assert torch.equal(split.noise_for(noise).apply(a.x, a.sample_ids), noise.apply(b.x, b.sample_ids))
    assert split.noise_for(InputNoise()) == InputNoise()  # no noise: nothing tabled


def test_static_shapes_pad_the_last_batch_with_zero_weight_copies():
    data = cases.tiny_data(n_train=10)
    for dataset in (ResidentSplit(data.train, CPU), data.train):
        last = epoch_batches(dataset, 4, static=True)[-1]
        assert last.x.shape[0] == 4 and last.n == 2
        assert last.sample_weight.tolist() == [1.0, 1.0, 0.0, 0.0]
        assert torch.equal(last.x[2:], last.x[:2]) and torch.equal(last.positions[2:], last.positions[:2])
    full = epoch_batches(data.train, 4)[0]
    assert pad_batch(full, 4) is full


def test_a_padded_batch_has_the_loss_and_gradient_of_its_real_samples():
    torch.manual_seed(0)
    data = cases.tiny_data(n_train=10)
    from petrov.operators import build_model
    from petrov.train.operator import NormalizedOperator
    from petrov.train.rollout import training_mode

    model = build_model("fno1d", width=8, modes=4, n_layers=1).double()
    op = NormalizedOperator(model, data.x_normalizer.to(dtype=torch.float64), data.y_normalizer.to(dtype=torch.float64))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = BatchLoss(op, model, training_mode("direct"), noise=op.noise, h1_weight=0.5, periodic=True, amp_dtype=None)
    stepper = Stepper(operator=op, loss=loss, optimizer=opt, scheduler=None, scaler=None, grad_clip=0.0,
                      compile_mode="off")
    plain = epoch_batches(data.train, 4)[-1]
    padded = epoch_batches(data.train, 4, static=True)[-1]
    grads = []
    for b in (plain, padded):
        b.x, b.y = b.x.double(), b.y.double()
        b.inputs["pos"] = b.inputs["pos"].double()
        model.zero_grad()
        loss, total = stepper.loss(b)
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        assert total.item() == pytest.approx(loss.item() * 2, rel=1e-12)
    for g_plain, g_padded in zip(*grads):
        torch.testing.assert_close(g_padded, g_plain, rtol=1e-12, atol=1e-14)


def test_the_first_non_finite_batch_is_found_on_the_device():
    totals = EpochTotals(CPU)
    for batch, value in enumerate([1.0, 2.0, float("nan"), float("inf"), 3.0], start=1):
        totals.add_loss(torch.tensor(value), 4, batch)
    totals.flag(torch.tensor(float("inf")), 1, 6)  # a later bad gradient norm does not replace the first
    mean, bad = totals.finish(dist_.Context())
    assert bad.batch == 3 and bad.what == "loss" and np.isnan(bad.value) and np.isnan(mean)
    clean = EpochTotals(CPU)
    clean.add_loss(torch.tensor(2.0), 4, 1)
    clean.add_loss(torch.tensor(6.0), 2, 2)
    clean.flag(torch.tensor(1.5), 1, 2)
    assert clean.finish(dist_.Context()) == (8.0 / 6, None)
    grad = EpochTotals(CPU)
    grad.add_loss(torch.tensor(2.0), 4, 1)
    grad.flag(torch.tensor(float("inf")), 1, 1)
    assert grad.finish(dist_.Context())[1].what == "gradient norm"


def poison_forward_from(call: int):
    """A callback that, after epoch 1, makes the model's ``call``-th training forward return NaN."""
    def callback(trainer, record):
        if record.epoch == 1:
            calls = []

            def hook(module, args, out):
                if module.training:
                    calls.append(1)
                    return out * float("nan") if len(calls) >= call else out
            trainer.model.register_forward_hook(hook)
        return False
    return callback


def test_a_later_bad_batch_is_named_and_the_last_good_checkpoint_kept(tmp_path):
    with pytest.raises(TrainingDiverged, match=r"non-finite loss \(nan\) at epoch 2, batch 3 of 4") as err:
        train(cases.tiny_config(), tmp_path / "run", data=cases.tiny_data(), callbacks=[poison_forward_from(3)])
    assert "last.pt (epoch 1)" in str(err.value)
    last = load_run_checkpoint(tmp_path / "run" / "last.pt")
    assert last["epoch"] == 1 and all(torch.isfinite(v).all() for v in last["state_dict"].values())


HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy")


def test_a_training_step_reads_nothing_back_to_the_host(tmp_path, monkeypatch):
    """After the run's first step (which moves the normalisers to the device once), a step -- input noise,
    loss, device totals, backward, gradient clipping, the schedule -- reads no tensor on the host; the
    epoch's totals are read once at its end.  Not watched: the model's forward (the operators' own
    concern) and Adam (its step counter is a CPU tensor on every device)."""
    inside, steps, reads, finishes = [False], [0], [], []
    for name in HOST_READS:
        real = getattr(torch.Tensor, name)

        def spy(self, *args, _real=real, _name=name, **kwargs):
            if inside[0]:
                reads.append(_name)
            return _real(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, spy)

    def watched(fn, watch=True):
        def run(*args, **kwargs):
            before, inside[0] = inside[0], watch and steps[0] > 0
            try:
                return fn(*args, **kwargs)
            finally:
                inside[0] = before
        return run

    step = watched(Stepper.step)
    monkeypatch.setattr(Stepper, "step", lambda *a: (step(*a), steps.__setitem__(0, steps[0] + 1)))
    model_class = MODELS.get(cases.tiny_config().model.name)
    monkeypatch.setattr(model_class, "forward", watched(model_class.forward, watch=False))
    monkeypatch.setattr(torch.optim.Adam, "step", watched(torch.optim.Adam.step, watch=False))
    real_finish = EpochTotals.finish
    monkeypatch.setattr(EpochTotals, "finish", lambda self, ctx: finishes.append(1) or real_finish(self, ctx))
    data = cases.tiny_data()
    data.noise = InputNoise(0.05, 1)  # the tabled noise must not read either
    result = train(cases.tiny_config(optim={"epochs": 2}), tmp_path / "run", data=data)
    assert result.epochs_completed == 2 and steps[0] == 8
    assert reads == [] and len(finishes) == 2


WORKER = textwrap.dedent("""
    import importlib.util, json, sys
    import torch
    spec = importlib.util.spec_from_file_location("cases", sys.argv[1])
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    from petrov.train import distributed
    from petrov.train.trainer import TrainingDiverged, train
    torch.set_num_threads(1)
    ctx = distributed.setup("cpu")

    def poison(trainer, record):  # rank 1 only: its second training forward of epoch 2 returns NaN
        if record.epoch == 1 and ctx.rank == 1:
            calls = []
            def hook(module, args, out):
                if module.training:
                    calls.append(1)
                    return out * float("nan") if len(calls) == 2 else out
            trainer.model.register_forward_hook(hook)
        return False

    try:
        train(cases.tiny_config(optim={"epochs": 3, "batch_size": 4}), sys.argv[2], data=cases.tiny_data(16, 4),
              callbacks=[poison])
    except TrainingDiverged as err:
        print("DIVERGED", err)
    distributed.teardown(ctx)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_rank_stops_together_when_one_rank_diverges(tmp_path):
    """Two gloo processes; only rank 1 sees a NaN (its 2nd batch of epoch 2): both report that batch at the
    end of the epoch, neither waits for the other, and last.pt stays at epoch 1."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port, procs = free_port(), []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(script), str(CASES), str(tmp_path / "run")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        assert "DIVERGED non-finite loss (nan) at epoch 2, batch 2 of 4" in out, out + err[-2000:]
    assert load_run_checkpoint(tmp_path / "run" / "last.pt")["epoch"] == 1


def test_a_compiled_run_captures_its_whole_batch_loss_as_one_graph_with_the_eager_numbers(tmp_path, eager_compile):
    """In one process a compiled run compiles the step's whole batch loss, not the model alone: input
    normalisation, the tabled input noise, the model, decoding and relL2 + γ·relH1 trace as one graph
    (dynamo with fullgraph: a graph break raises), and that graph gives the eager per-sample losses and
    gradients."""
    torch.set_num_threads(1)
    eager_compile("default")
    data = cases.tiny_data()
    data.noise = InputNoise(0.05, 1)
    seen = []
    train(cases.tiny_config(optim={"epochs": 1}), tmp_path / "run", data=data,
          callbacks=[lambda trainer, record: seen.append(trainer) or False])
    trainer = seen[0]
    assert getattr(trainer.stepper.batch_loss, "_orig_mod", None) is trainer.batch_loss
    assert trainer.batch_loss.net is trainer.model  # the model inside it is the plain one
    b = next(iter(trainer.train_batches.iterate()))
    params = list(trainer.model.parameters())
    results = []
    for loss in (trainer.batch_loss, torch.compile(trainer.batch_loss, backend="eager", fullgraph=True)):
        per_sample, pred = loss(b.x, b.y, b.sample_ids, b.weights, **b.inputs)
        results.append((per_sample.detach(), pred.detach(), torch.autograd.grad(per_sample.sum(), params)))
    (loss_e, pred_e, grads_e), (loss_c, pred_c, grads_c) = results
    assert loss_e.shape == (4,) and torch.all(loss_e > 0)
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-6, atol=0)
    torch.testing.assert_close(pred_c, pred_e, rtol=1e-6, atol=1e-7)
    for got, want in zip(grads_c, grads_e):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_static_shapes_train_as_an_eager_run_does(tmp_path, eager_compile):
    """The cuda-graphs code path on the CPU (padded batches, marked steps; compiled by dynamo's eager
    backend): 18 training samples in batches of 4 and 5 validation samples in batches of 4 end in
    partial batches, padded; the run ends where the eager run ends, to rounding."""
    torch.set_num_threads(1)
    cfg = cases.tiny_config(data={"n_train": 18, "n_val": 5}, run={"device": "cpu", "progress": False,
                                                                 "eval_batch_size": 4})
    eager = train(cfg, tmp_path / "eager", data=cases.tiny_data(18, 5))
    seen = []
    eager_compile("cuda-graphs")
    graphs = train(cfg, tmp_path / "graphs", data=cases.tiny_data(18, 5),
                   callbacks=[lambda trainer, record: seen.append(type(trainer.stepper.batch_loss).__name__) or False])
    assert seen == ["OptimizedModule"] * 3
    a, b = (load_run_checkpoint(tmp_path / run / "last.pt")["state_dict"] for run in ("eager", "graphs"))
    assert set(a) == set(b)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5)
    assert graphs.best_val_rel_l2 == pytest.approx(eager.best_val_rel_l2, rel=1e-4)


def test_a_compiled_run_saves_the_plain_model_and_resumes_exactly(tmp_path, eager_compile):
    torch.set_num_threads(1)
    eager_compile("default")
    cfg = cases.tiny_config()
    train(cfg, tmp_path / "straight", data=cases.tiny_data())
    train(cfg, tmp_path / "resumed", data=cases.tiny_data(), callbacks=[lambda trainer, record: record.epoch == 1])
    train(cfg, tmp_path / "resumed", data=cases.tiny_data(), resume=True)
    a, b = (load_run_checkpoint(tmp_path / run / "last.pt") for run in ("straight", "resumed"))
    assert not any(k.startswith("_orig_mod") for k in a["state_dict"])
    for key in a["state_dict"]:
        assert torch.equal(a["state_dict"][key], b["state_dict"][key]), key
    from petrov.train import load_operator
    assert load_operator(tmp_path / "straight").model.state_dict().keys() == a["state_dict"].keys()


def test_a_compiled_run_redraws_the_performer_features_as_an_eager_run_does(tmp_path, eager_compile):
    """A compiled forward leaves the Performer's call count out; the step counts instead, so the
    features are redrawn at the same steps and the run ends with the eager run's weights."""
    torch.set_num_threads(1)
    model = {"name": "galerkin1d", "options": {"mixer": "performer", "d_model": 8, "n_layers": 1, "n_heads": 2,
                                               "dim_feedforward": 8, "decoder_width": 8, "modes": 4,
                                               "mixer_options": {"redraw_interval": 3}}}
    cfg = cases.tiny_config(model=model, optim={"epochs": 2})
    train(cfg, tmp_path / "eager", data=cases.tiny_data())
    eager_compile("default")
    train(cfg, tmp_path / "compiled", data=cases.tiny_data())
    a, b = (load_run_checkpoint(tmp_path / run / "last.pt")["state_dict"] for run in ("eager", "compiled"))
    calls = [k for k in a if k.endswith("mixer.calls")]
    assert calls and all(int(a[k]) == int(b[k]) == 8 for k in calls)  # 2 epochs x 4 steps
    assert all(int(a[k.replace("calls", "draw")]) == int(b[k.replace("calls", "draw")]) == 2 for k in calls)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5)
