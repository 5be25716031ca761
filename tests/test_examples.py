"""The demo script end to end with tiny settings, and how it continues or refuses an existing --out."""
import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from petrov.datasets import generate_dataset

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name):
    """The example script as a module, importing examples/_common.py: benchmarks/_common.py, which other
    tests in this process may have imported under the same name, is set aside meanwhile."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    held = sys.modules.pop("_common", None)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop("_common", None)
        if held is not None:
            sys.modules["_common"] = held
    return module


TINY = ["--set", "data.n_train=8", "--set", "data.n_val=4", "--set", "data.n_test=4",
        "--set", "optim.epochs=1", "--set", "optim.batch_size=4"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("demo")
    data = root / "burgers-512.h5"
    generate_dataset("burgers", data, 16, resolution=512, seed=1, progress=False)
    argv = ["--quick", "--out", str(root / "out"), "--data", str(data), "--device", "cpu",
            "--resolutions", "256,512", *TINY]
    return load_example("burgers"), argv, root / "out"


def test_demo_trains_evaluates_and_plots(demo):
    burgers, argv, out = demo
    rows = burgers.main(argv)
    assert [r["resolution"] for r in rows] == [256, 512]
    assert all(math.isfinite(r["mean"]) and r["n"] == 4 for r in rows)
    for name in ("best.pt", "last.pt", "log.jsonl", "eval/metrics.csv", "eval/metrics.json",
                 "eval/predictions.png", "eval/error_vs_resolution.png", "eval/training_curves.png"):
        assert (out / name).is_file(), name


def test_demo_rerun_continues_or_refuses(demo, capsys):
    burgers, argv, out = demo
    if not (out / "eval" / "metrics.json").exists():
        burgers.main(argv)
    capsys.readouterr()
    # finished: nothing is redone, the saved table is shown
    stamp = (out / "last.pt").stat().st_mtime_ns
    assert burgers.main(argv) is None
    assert "already holds a finished run" in capsys.readouterr().out
    # trained but not evaluated (killed during evaluation): evaluates without retraining
    for f in (out / "eval").iterdir():
        f.unlink()
    rows = burgers.main(argv)
    assert len(rows) == 2 and (out / "last.pt").stat().st_mtime_ns == stamp
    # a different config in the same --out is refused, naming the difference
    (out / "eval" / "metrics.json").unlink()
    with pytest.raises(SystemExit, match="optim.epochs"):
        burgers.main(argv + ["--set", "optim.epochs=3"])


@pytest.fixture(scope="module")
def darcy_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("darcy") / "darcy-41.h5"
    generate_dataset("darcy", path, 16, resolution=41, seed=1, progress=False)
    return path


# the inverse example trains the longest: with the slow tests (CI); the fast suite runs the forward one, and the
# README's test the inverse commands
@pytest.mark.parametrize("example, resolutions", [("darcy", [11, 21, 41]),
                                                  pytest.param("darcy_inverse", [21, 41], marks=pytest.mark.slow)])
def test_darcy_examples_train_and_evaluate_at_every_resolution(example, resolutions, darcy_data, tmp_path):
    torch.set_num_threads(1)
    argv = ["--quick", "--out", str(tmp_path / "out"), "--data", str(darcy_data), "--device", "cpu", *TINY]
    rows = load_example(example).main(argv)
    assert [r["resolution"] for r in rows] == resolutions
    assert all(math.isfinite(r["mean"]) and r["n"] == 4 for r in rows)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["model"]["name"] == {"darcy": "latent2d", "darcy_inverse": "latent2d_inverse"}[example]
