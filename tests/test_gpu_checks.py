"""``benchmarks/gpu_checks.sh`` hands its settings to the commands it runs: the script is what a short GPU loan
runs, untested there until the loan, so its plumbing is checked here with a stand-in ``PYTHON`` that only
writes down how it was called (no stage computes anything)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_checks.sh"

pytestmark = pytest.mark.skipif(shutil.which("setsid") is None, reason="gpu_checks.sh runs each stage under setsid")


def run_checks(tmp_path, stages, **env):
    """Run ``gpu_checks.sh`` with a ``PYTHON`` that prints its arguments, one per line after a ``call`` line;
    return the output folder."""
    stand_in = tmp_path / "python"
    stand_in.write_text('#!/bin/sh\necho call\nfor a in "$@"; do echo "$a"; done\n')
    stand_in.chmod(0o755)
    out = tmp_path / "out"
    result = subprocess.run(["bash", str(SCRIPT), str(out), *stages], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHON": str(stand_in), **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def calls(log: Path) -> list[list[str]]:
    """The stand-in's calls written into ``log``, each as its argument list."""
    found = []
    for line in log.read_text().splitlines():
        if line == "call":
            found.append([])
        elif found:
            found[-1].append(line)
    return found


def overrides(args: list[str]) -> list[str]:
    """The values of the ``--set`` options in ``args``."""
    return [args[i + 1] for i, a in enumerate(args) if a == "--set"]


def test_the_train_stage_passes_each_word_of_train_set_as_one_override(tmp_path):
    out = run_checks(tmp_path, ["train"], TRAIN_PRESET="darcy-inverse-gpu", TRAIN_MINUTES="6",
                     TRAIN_SET='data.augment="diagonal" model.options.d_model=128', TRAIN_NAME="inverse-diagonal")
    train, evaluate = calls(out / "train.log")
    assert train[:4] == ["-m", "petrov", "train", "darcy-inverse-gpu"]
    assert train[train.index("--out") + 1] == str(out / "inverse-diagonal")
    assert overrides(train) == [f"data.path='{out}/data/darcy-inverse-gpu.h5'", "run.time_budget_minutes=6",
                                f"data.generate.options.workers={len(os.sched_getaffinity(0))}",
                                'data.augment="diagonal"', "model.options.d_model=128"]
    assert evaluate == ["-m", "petrov", "evaluate", str(out / "inverse-diagonal"), "--device", "cuda"]


def test_the_train_stage_without_settings_trains_darcy_gpu_as_it_is(tmp_path):
    out = run_checks(tmp_path, ["train"])
    train, evaluate = calls(out / "train.log")
    assert train[train.index("--out") + 1] == str(out / "darcy-gpu")
    assert overrides(train) == [f"data.path='{out}/data/darcy-gpu.h5'",
                                f"data.generate.options.workers={len(os.sched_getaffinity(0))}"]


def test_the_presets_stage_trains_the_named_presets_each_to_the_one_budget(tmp_path):
    out = run_checks(tmp_path, ["presets"], PRESETS="burgers-gpu darcy-inverse-gpu", PRESET_MINUTES="5")
    assert not (out / "presets-darcy-gpu.log").exists()
    for preset in ("burgers-gpu", "darcy-inverse-gpu"):
        train, evaluate = calls(out / f"presets-{preset}.log")
        assert train[:4] == ["-m", "petrov", "train", preset]
        assert overrides(train) == ["run.time_budget_minutes=5"]
        assert evaluate == ["-m", "petrov", "evaluate", str(out / preset)]


def test_the_presets_stage_keeps_each_presets_own_budget_by_default(tmp_path):
    out = run_checks(tmp_path, ["presets"])
    for preset in ("darcy-gpu", "burgers-gpu", "darcy-inverse-gpu"):
        train, _ = calls(out / f"presets-{preset}.log")
        assert overrides(train) == []


def test_the_mesh_stage_times_the_mesh_presets_step_eager_and_with_cuda_graphs(tmp_path, monkeypatch):
    import importlib.util
    import sys

    out = run_checks(tmp_path, ["mesh"])
    (args,) = calls(out / "mesh.log")
    assert args[0] == "gpu.py"
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # gpu.py imports its neighbours (_common, device_profile)
    for neighbour in ("_common", "device_profile"):  # not the examples' _common, which another test may have imported
        monkeypatch.delitem(sys.modules, neighbour, raising=False)
    spec = importlib.util.spec_from_file_location("_gpu_benchmark", SCRIPT.parent / "gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "_gpu_benchmark", gpu)
    spec.loader.exec_module(gpu)
    parsed = gpu.parse(args[1:])  # what the stage passes is what gpu.py takes
    assert (parsed.part, parsed.step_preset, parsed.compile, parsed.step_amp) == (
        "step", "darcy-mesh-quick", ["off", "cuda-graphs"], 0)
    assert f"data.path='{out}/darcy-mesh-step.h5'" in parsed.step_set


def test_wheels_are_installed_first_without_an_index(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "pyamg-5.4.1-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    stand_in = tmp_path / "python"
    stand_in.write_text('#!/bin/sh\necho call\nfor a in "$@"; do echo "$a"; done\n')
    stand_in.chmod(0o755)
    out = tmp_path / "out"
    result = subprocess.run(["bash", str(SCRIPT), str(out), "nothing"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHON": str(stand_in), "WHEELS": str(wheels)})
    first = result.stdout.split("call\n")[1].split()
    assert first[:3] == ["-m", "pip", "install"] and "--no-index" in first and "--no-deps" in first
    assert first[first.index("--target") + 1] == str(out / ".site")
    assert first[-1] == str(wheels / "pyamg-5.4.1-cp312-cp312-manylinux_2_28_x86_64.whl")


def test_petrov_is_taken_from_the_checkout_where_python_cannot_import_it(tmp_path):
    import sys

    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # a python without petrov: the interpreter running the tests, isolated from its site-packages (-S)
    stand_in = tmp_path / "python"
    stand_in.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    stand_in.chmod(0o755)
    subprocess.run(["bash", str(SCRIPT), str(out), "nothing"], capture_output=True, text=True, timeout=120,
                   env={**env, "PYTHON": str(stand_in)})
    link = out / ".petrov-link" / "petrov"
    assert link.is_symlink() and link.resolve() == SCRIPT.parents[1]


def test_the_accuracy_stage_trains_the_four_contenders_for_one_budget_with_the_data_under_out(tmp_path):
    out = run_checks(tmp_path, ["accuracy"], ACCURACY_MINUTES="1.5")
    (accuracy,) = calls(out / "accuracy.log")
    assert accuracy[:3] == ["gpu.py", "--part", "accuracy"]
    assert accuracy[accuracy.index("--budget-minutes") + 1] == "1.5"
    assert accuracy[accuracy.index("--data-dir") + 1] == str(out / "data")
    assert accuracy[accuracy.index("--out") + 1] == str(out / "gpu.json")


def test_the_accuracy_stage_gives_each_contender_one_minute_by_default(tmp_path):
    (accuracy,) = calls(run_checks(tmp_path, ["accuracy"]) / "accuracy.log")
    assert accuracy[accuracy.index("--budget-minutes") + 1] == "1"
