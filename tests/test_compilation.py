"""``run.compile`` and ``run.matmul_precision``: what "auto" chooses on each device, what is refused, and
that the run leaves the process's matmul precision as it found it."""
import importlib.util
from pathlib import Path

import pytest
import torch

from petrov.train.compilation import compile_module, compiled_agreement, resolve_compile, static_shapes
from petrov.train.precision import resolve_matmul_precision
from petrov.train.trainer import train

_spec = importlib.util.spec_from_file_location("_trainer_cases", Path(__file__).with_name("test_trainer.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


def test_auto_is_eager_on_the_cpu_and_cuda_graphs_on_one_gpu_for_grids():
    assert resolve_compile("auto", CPU) == "off"
    assert resolve_compile("auto", CUDA) == "cuda-graphs" and static_shapes("cuda-graphs")
    assert resolve_compile("auto", CUDA, point_data=True) == "off"  # meshes: a new shape every batch
    assert resolve_compile("auto", CUDA, distributed=True) == "off"
    assert resolve_compile("default", CPU) == "default" and not static_shapes("default")
    with pytest.raises(ValueError, match="needs a CUDA device"):
        resolve_compile("cuda-graphs", CPU)
    # meshes: every batch of a split padded to its largest mesh (tests/test_mesh_training.py)
    assert resolve_compile("cuda-graphs", CUDA, point_data=True) == "cuda-graphs"
    model = torch.nn.Linear(2, 2)
    assert compile_module(model, "off") is model


def test_compile_and_matmul_precision_are_checked_config_keys():
    with pytest.raises(ValueError, match="run.compile.*'fast' is not one of"):
        cases.tiny_config(run={"compile": "fast"})
    with pytest.raises(ValueError, match="run.matmul_precision"):
        cases.tiny_config(run={"matmul_precision": "tf32"})
    assert resolve_matmul_precision("auto") == "highest" and resolve_matmul_precision("high") == "high"


def test_the_run_sets_the_matmul_precision_and_restores_it(tmp_path):
    before, seen = torch.get_float32_matmul_precision(), []
    cfg = cases.tiny_config(optim={"epochs": 1}, run={"device": "cpu", "progress": False, "matmul_precision": "medium"})
    train(cfg, tmp_path / "run", data=cases.tiny_data(),
          callbacks=[lambda trainer, record: seen.append(torch.get_float32_matmul_precision()) or False])
    assert seen == ["medium"] and torch.get_float32_matmul_precision() == before


class _Shifted(torch.nn.Module):
    """A stand-in for a miscompiled module: the module's own parameters, outputs (each of a tuple) off by
    ``shift``."""

    def __init__(self, model: torch.nn.Module, shift: float):
        super().__init__()
        self.model, self.shift = model, shift

    def forward(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        return tuple(o + self.shift for o in out) if isinstance(out, tuple) else out + self.shift


def test_compiled_agreement_measures_outputs_and_gradients_against_the_eager_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    x = torch.randn(5, 3, dtype=torch.float64)
    assert compiled_agreement(lambda net: net(x), model, model, "off") == (0.0, 0.0)
    outputs, grads = compiled_agreement(lambda net: net(x), model, _Shifted(model, 1.0), "off")
    assert outputs > 0.1 and grads == 0.0  # a shift leaves the gradients of Σ r·out alone
    wrong = torch.nn.Sequential(model[0], torch.nn.ReLU(), model[2])  # another function of the same weights
    outputs, grads = compiled_agreement(lambda net: net(x), model, wrong, "off")
    assert outputs > 0.1 and grads > 0.1
    assert all(p.grad is None for p in model.parameters())  # nothing left behind


def _miscompiled(monkeypatch, shift: float) -> None:
    """The run 'compiles' on the CPU ("default"), and compiling shifts the outputs by ``shift``."""
    import petrov.train.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "resolve_compile", lambda setting, *a, **k: "default")
    monkeypatch.setattr(trainer_module, "compile_module", lambda module, mode: _Shifted(module, shift))


def test_a_run_that_asked_for_compilation_stops_when_the_compiled_model_is_another(tmp_path, monkeypatch):
    _miscompiled(monkeypatch, 0.5)
    cfg = cases.tiny_config(optim={"epochs": 1}, run={"device": "cpu", "progress": False, "compile": "default"})
    with pytest.raises(ValueError, match=r"computes another .* outputs differ by .*run.compile = 'off'"):
        train(cfg, tmp_path / "run", data=cases.tiny_data())
    assert not (tmp_path / "run").exists()  # refused before the run directory was made


def test_auto_falls_back_to_eager_when_the_compiled_model_is_another(tmp_path, monkeypatch, caplog):
    _miscompiled(monkeypatch, 0.5)
    cfg = cases.tiny_config(optim={"epochs": 1}, run={"device": "cpu", "progress": False, "compile": "auto"})
    seen = []
    with caplog.at_level("WARNING"):
        train(cfg, tmp_path / "run", data=cases.tiny_data(),
              callbacks=[lambda trainer, r: seen.append((trainer.compile_mode, trainer.stepper.batch_loss)) or False])
    assert seen[0][0] == "off" and not isinstance(seen[0][1], _Shifted)
    assert "training eager" in caplog.text


def test_a_compiled_model_that_agrees_trains_compiled(tmp_path, monkeypatch):
    _miscompiled(monkeypatch, 0.0)
    cfg = cases.tiny_config(optim={"epochs": 1}, run={"device": "cpu", "progress": False, "compile": "default"})
    seen = []
    train(cfg, tmp_path / "run", data=cases.tiny_data(),
          callbacks=[lambda trainer, record: seen.append(trainer.compile_mode) or False])
    assert seen == ["default"]


class _GradientsOff(torch.nn.Module):
    """A stand-in for a module compiled into the right values with wrong gradients: each floating output the
    module's own, the gradient through it ``1 + off`` times the true one (every parameter's gradient off by
    ``off``, pooled: how torch 2.11 once differentiated galerkin1d, 4.8e-2 apart)."""

    def __init__(self, model: torch.nn.Module, off: float):
        super().__init__()
        self.model, self.off = model, off

    def forward(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        scaled = [o * (1 + self.off) - o.detach() * self.off if torch.is_tensor(o) and o.is_floating_point() else o
                  for o in (out if isinstance(out, tuple) else (out,))]
        return tuple(scaled) if isinstance(out, tuple) else scaled[0]


def test_a_compiled_model_with_the_right_values_and_gradients_a_few_per_cent_off_is_refused(tmp_path, monkeypatch):
    import petrov.train.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "resolve_compile", lambda setting, *a, **k: "default")
    monkeypatch.setattr(trainer_module, "compile_module", lambda module, mode: _GradientsOff(module, 0.03))
    cfg = cases.tiny_config(optim={"epochs": 1}, run={"device": "cpu", "progress": False, "compile": "default"})
    with pytest.raises(ValueError, match=r"outputs differ by \d\.\d\de-0[5-9] and its gradients by 3\.00e-02"):
        train(cfg, tmp_path / "run", data=cases.tiny_data())


class _OtherStream(torch.nn.Module):
    """A stand-in for a compiled module whose dropout draws its masks from another random stream than eager's
    (inductor's own generator): the module run on a stream of its own, the caller's left as it was."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        with torch.random.fork_rng():
            torch.manual_seed(12345)
            return self.model(*args, **kwargs)


# dropout 0.5 behind attention weights of O(1) (init_gain 1): what the masks drop moves the output
DROPPING = {"name": "galerkin1d", "options": {"d_model": 8, "n_layers": 2, "n_heads": 2, "decoder_width": 4,
                                              "modes": 3, "dropout": 0.5, "init_gain": 1.0}}


def test_dropout_is_left_out_of_the_comparison_of_a_compiled_model():
    """Other masks make a model with dropout 'another model' to the comparison; its copy without dropout
    (the model the trainer compares) is the same model, and the model itself keeps its dropout."""
    from petrov.operators import build_model
    from petrov.train.compilation import drops, without_dropout

    torch.manual_seed(0)
    model = build_model("galerkin1d", **DROPPING["options"]).double().train()
    x = torch.randn(3, 32, 1, dtype=torch.float64)
    outputs, grads = compiled_agreement(lambda net: net(x), model, _OtherStream(model), "off")
    assert outputs > 1e-2 and grads > 1e-2  # the masks alone: beyond the tolerance for a compiler fault
    twin = without_dropout(model)
    assert drops(model) and not drops(twin) and not drops(build_model("galerkin1d", **{**DROPPING["options"],
                                                                                     "dropout": 0.0}))
    assert compiled_agreement(lambda net: net(x), twin, _OtherStream(twin), "off") == (0.0, 0.0)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), twin.state_dict().values()))


# a compiled training run (minutes on a CPU): with the slow tests (CI); the fast suite keeps the comparison that
# leaves dropout out and the compiled runs of the tests above
@pytest.mark.slow
def test_a_model_with_dropout_trains_compiled(tmp_path, monkeypatch):
    import petrov.train.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "resolve_compile", lambda setting, *a, **k: "default")
    monkeypatch.setattr(trainer_module, "compile_module", lambda module, mode: _OtherStream(module))
    cfg = cases.tiny_config(model=DROPPING, optim={"epochs": 1},
                            run={"device": "cpu", "progress": False, "compile": "default"})
    seen = []
    train(cfg, tmp_path / "run", data=cases.tiny_data(),
          callbacks=[lambda trainer, record: seen.append(trainer.compile_mode) or False])
    assert seen == ["default"]  # not refused as a compiler fault
