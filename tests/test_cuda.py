"""The workflows on a CUDA device (skipped where torch sees no GPU; on a GPU machine: ``pytest -m cuda``).

The command-line flows of the README at toy size (``PETROV_QUICK=1``: 32 samples, one epoch) with
``--device cuda``: generate -> train -> evaluate for Burgers, Darcy, an imported cell-centred
(PDEBench-layout) file, meshes and time marching; ``petrov invert`` with every method on runs trained on
the GPU; a GPU-trained checkpoint evaluated on the CPU.  Then the training step itself on the GPU: every
``run.compile`` setting trains and resumes, checkpoints hold the plain model, and the step's own work
does not synchronize with the host.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from petrov.cli import main as cli_main

pytestmark = pytest.mark.cuda
DEVICE = "cuda"

_spec = importlib.util.spec_from_file_location("_trainer_cases", Path(__file__).with_name("test_trainer.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def petrov(*args: str) -> None:
    assert cli_main([str(a) for a in args]) == 0, f"petrov {' '.join(map(str, args))} failed"


def rows(run: Path, folder: str = "eval") -> list[dict]:
    return json.loads((run / folder / "metrics.json").read_text())["rows"]


def finite(rows_: list[dict]) -> bool:
    return bool(rows_) and all(np.isfinite(r["mean"]) for r in rows_)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with the README's data files at quick size, petrov in quick mode, working there."""
    root = tmp_path_factory.mktemp("cuda")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PETROV_QUICK", "1")
        patch.chdir(root)
        petrov("generate", "burgers", "--n-samples", 700, "--resolution", 8192, "-o", "data/burgers-8192.h5",
               "--no-progress")
        petrov("generate", "darcy", "--n-samples", 500, "--resolution", 141, "--workers", 2, "-o", "data/darcy-141.h5",
               "--no-progress")
        yield root


@pytest.fixture(scope="module")
def darcy_runs(work):
    """``runs/darcy`` (forward) and ``runs/darcy-inverse`` (learned inverse), trained on the GPU."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PETROV_QUICK", "1")
        patch.chdir(work)
        petrov("train", "darcy-quick", "--out", "runs/darcy", "--device", DEVICE)
        petrov("train", "darcy-inverse-quick", "--out", "runs/darcy-inverse", "--device", DEVICE)
        yield work


def test_burgers_generate_train_evaluate(work, monkeypatch):
    monkeypatch.setenv("PETROV_QUICK", "1")
    monkeypatch.chdir(work)
    petrov("train", "burgers-quick", "--out", "runs/burgers", "--device", DEVICE)
    petrov("evaluate", "runs/burgers", "--resolutions", "256,1024,8192", "--device", DEVICE)
    assert finite(rows(work / "runs/burgers")) and finite(rows(work / "runs/burgers", "."))


def test_darcy_train_evaluate_on_the_gpu_and_on_the_cpu(darcy_runs, monkeypatch):
    monkeypatch.setenv("PETROV_QUICK", "1")
    monkeypatch.chdir(darcy_runs)
    petrov("evaluate", "runs/darcy", "--device", DEVICE, "--out", "runs/darcy/eval-gpu", "--no-plots")
    petrov("evaluate", "runs/darcy", "--device", "cpu", "--out", "runs/darcy/eval-cpu", "--no-plots")
    gpu, cpu = rows(darcy_runs / "runs/darcy", "eval-gpu"), rows(darcy_runs / "runs/darcy", "eval-cpu")
    assert finite(gpu) and [r["resolution"] for r in gpu] == [r["resolution"] for r in cpu]
    for g, c in zip(gpu, cpu):  # the same checkpoint: the same errors, to float32 rounding on two devices
        assert g["mean"] == pytest.approx(c["mean"], rel=1e-3)


def test_a_cell_centred_import_trains_and_evaluates(tmp_path, monkeypatch, pdebench_darcy):
    """The PDEBench case whose evaluation on CUDA once crashed turning a normaliser on the GPU into numpy."""
    monkeypatch.setenv("PETROV_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "2D_DarcyFlow_beta1.0_Train.hdf5"
    pdebench_darcy(src, 32)
    petrov("import", "--x", f"{src}:nu", "--y", f"{src}:tensor", "--y-axes", "NCXY", "--grid", "cells",
           "--coords", f"{src}:x-coordinate", f"{src}:y-coordinate", "--no-progress", "-o", "data/pdebench.h5")
    petrov("train", "darcy-pdebench", "--out", "runs/pb", "--set", 'data.path="data/pdebench.h5"', "--device", DEVICE)
    petrov("evaluate", "runs/pb", "--device", DEVICE)
    assert [r["resolution"] for r in rows(tmp_path / "runs/pb")] == [32, 64, 128] and finite(rows(tmp_path / "runs/pb"))


def test_meshes_generate_train_evaluate(tmp_path, monkeypatch):
    monkeypatch.setenv("PETROV_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    petrov("generate", "darcy-mesh", "--n-samples", 300, "--seed", 0, "--workers", 2, "-o", "data/darcy-mesh-300.h5",
           "--no-progress")
    petrov("train", "darcy-mesh-quick", "--out", "runs/darcy-mesh", "--device", DEVICE)
    petrov("evaluate", "runs/darcy-mesh", "--device", DEVICE)
    assert finite(rows(tmp_path / "runs/darcy-mesh"))
    # CUDA graphs on meshes (every batch of a split padded to its largest mesh): the eager run's figures
    petrov("train", "darcy-mesh-quick", "--out", "runs/darcy-mesh-graphs", "--device", DEVICE,
           "--set", "run.compile=cuda-graphs")
    graphs, eager = (json.loads((tmp_path / "runs" / run / "metrics.json").read_text())
                     for run in ("darcy-mesh-graphs", "darcy-mesh"))
    assert graphs["best_val_rel_l2"] == pytest.approx(eager["best_val_rel_l2"], rel=0.05)


def test_marching_generate_train_evaluate(tmp_path, monkeypatch):
    monkeypatch.setenv("PETROV_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    petrov("generate", "burgers-trajectory", "--n-samples", 700, "--resolution", 8192, "--time-steps", 20,
           "-o", "data/burgers-trajectory-8192.h5", "--no-progress")
    for preset in ("burgers-marching", "burgers-arfno"):
        petrov("train", preset, "--out", f"runs/{preset}", "--device", DEVICE)
        petrov("evaluate", f"runs/{preset}", "--device", DEVICE, "--no-plots")
        assert finite(rows(tmp_path / "runs" / preset))


@pytest.mark.parametrize("method", ["learned", "pde", "refined", "surrogate"])
def test_invert_with_runs_trained_on_the_gpu(darcy_runs, monkeypatch, method):
    monkeypatch.setenv("PETROV_QUICK", "1")
    monkeypatch.chdir(darcy_runs)
    common = ["--indices=-4:", "--noise", "0.01", "--out", f"inv/{method}", "--no-plots"]
    extra = {
        "learned": ["--inverse-run", "runs/darcy-inverse"],
        "pde": ["--resolution", "141", "--noise-stats", "runs/darcy-inverse", "--grid", "36"],
        "refined": ["--inverse-run", "runs/darcy-inverse", "--set", "pde_grid=141", "--set", "optimizer=gauss-newton",
                    "--set", "max_iter=3"],
        "surrogate": ["--forward-run", "runs/darcy", "--start", "learned", "--inverse-run", "runs/darcy-inverse",
                      "--noise-stats", "runs/darcy-inverse"],
    }[method]
    petrov("invert", "data/darcy-141.h5", "--method", method, *extra, *common)
    doc = json.loads((darcy_runs / "inv" / method / "metrics.json").read_text())
    assert doc["mean"]["n"] == 4 and np.isfinite(doc["mean"]["rel_l2_a"])


# --- the training step on the GPU -------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["off", "default", "cuda-graphs"])
def test_every_compile_setting_trains_resumes_and_saves_the_plain_model(tmp_path, mode):
    from petrov.train.checkpoint import load_run_checkpoint
    from petrov.train.trainer import train

    # 18 samples in batches of 4, 5 validation samples in batches of 4: partial batches, padded for CUDA graphs
    def config(compile_mode):
        return cases.tiny_config(data={"n_train": 18, "n_val": 5}, run={
            "device": DEVICE, "progress": False, "compile": compile_mode, "eval_batch_size": 4})

    first = train(config(mode), tmp_path / "run", data=cases.tiny_data(18, 5), callbacks=[lambda t, r: r.epoch == 1])
    assert first.epochs_completed == 1
    done = train(config(mode), tmp_path / "run", data=cases.tiny_data(18, 5), resume=True)
    assert done.epochs_completed == 3 and np.isfinite(done.best_val_rel_l2)
    state = load_run_checkpoint(tmp_path / "run" / "last.pt", map_location="cpu")["state_dict"]
    assert not any(k.startswith("_orig_mod") for k in state) and all(v.device.type == "cpu" for v in state.values())
    eager = train(config("off"), tmp_path / "eager", data=cases.tiny_data(18, 5))
    assert done.best_val_rel_l2 == pytest.approx(eager.best_val_rel_l2, rel=0.05)


def test_the_steps_own_work_does_not_synchronize(tmp_path, monkeypatch):
    """``torch.cuda.set_sync_debug_mode("error")`` around every step after the warm-up, except the model's
    forward (the operators' own concern): noise, loss, device totals, backward, clipping, Adam, schedule."""
    from petrov.datasets import InputNoise
    from petrov.train.step import BatchLoss, Stepper
    from petrov.train.trainer import train

    real_step, real_forward, steps = Stepper.step, BatchLoss._forward_net, [0]

    def step(self, *args):
        torch.cuda.set_sync_debug_mode("error" if steps[0] >= 3 else "default")
        try:
            real_step(self, *args)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        steps[0] += 1

    def forward(self, *args, **kwargs):
        mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("default")
        try:
            return real_forward(self, *args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode(mode)

    monkeypatch.setattr(Stepper, "step", step)
    monkeypatch.setattr(BatchLoss, "_forward_net", forward)
    data = cases.tiny_data()
    data.noise = InputNoise(0.05, 1)
    result = train(cases.tiny_config(run={"device": DEVICE, "progress": False, "compile": "off"}), tmp_path / "run",
                   data=data)
    assert result.epochs_completed == 3 and steps[0] == 12


def test_a_cell_normaliser_on_the_gpu_is_taken_to_a_coarser_grid():
    from petrov.datasets import PointwiseGaussianNormalizer

    mean, std = torch.rand(8, 8, 1), torch.rand(8, 8, 1) + 0.5
    cpu = PointwiseGaussianNormalizer(mean, std, cells=True).at_resolution(4)
    gpu = PointwiseGaussianNormalizer(mean.to(DEVICE), std.to(DEVICE), cells=True).at_resolution(4)
    assert gpu.mean.device.type == "cuda"
    torch.testing.assert_close(gpu.mean.cpu(), cpu.mean)
    torch.testing.assert_close(gpu.std.cpu(), cpu.std)


@pytest.mark.parametrize("preset, grid", [("darcy-gpu", (85, 85)), ("burgers-gpu", (1024,)),
                                          ("darcy-inverse-gpu", (141, 141)), ("navier-stokes-gpu", (64, 64))])
def test_the_gpu_presets_models_compile_to_the_eager_model(preset, grid):
    # inductor on CUDA once computed another latent2d than eager (H200, torch 2.11): the trainer checks
    # this before it trains compiled; this test names the models where it happens
    from petrov.operators import build_model, grid_coordinates
    from petrov.train.compilation import AGREEMENT_TOLERANCE, compiled_agreement
    from petrov.train.config import load_config

    cfg = load_config(preset)
    torch.manual_seed(0)
    model = build_model(cfg.model.name, **cfg.model.options).to(DEVICE).train()
    x = torch.randn(4, *grid, cfg.data.history, device=DEVICE)  # a marching model's given states
    periodic = getattr(model.config, "periodic", len(grid) == 1)
    pos = grid_coordinates(grid, periodic=periodic).expand(4, *grid, len(grid)).to(DEVICE)
    outputs, grads = compiled_agreement(lambda net: net(x, pos), model, torch.compile(model), "default")
    tol_out, tol_grad = AGREEMENT_TOLERANCE[None]
    assert outputs <= tol_out and grads <= tol_grad, f"compiled {cfg.model.name}: {outputs:.2e}, {grads:.2e}"
