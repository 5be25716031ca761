"""``run.compile`` and ``run.matmul_precision``: what "auto" chooses on each device, what is refused, and
that the run leaves the process's matmul precision as it found it."""
import importlib.util
from pathlib import Path

import pytest
import torch

from petrov.train.compilation import compile_module, resolve_compile, static_shapes
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
    with pytest.raises(ValueError, match="point-set batches"):
        resolve_compile("cuda-graphs", CUDA, point_data=True)
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
