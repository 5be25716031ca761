"""Packaging: petrov.* does not collide with top-level packages; the console script works.

The interpreters are started together (one module-scoped fixture) because each one spends
seconds importing torch; the tests then check their outputs.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import petrov
from petrov.operators import list_mixers, list_models

# Run from a temporary directory holding a fake top-level ``datasets`` package (first on
# sys.path as the script's directory): petrov must neither import the bare repository folders
# nor be confused with it.
COLLISION_CHECK = """
import sys
import petrov.operators, petrov.datasets, petrov.train, petrov.cli
bare = sorted(n for n in ("datasets", "operators", "train") if n in sys.modules)
assert not bare, f"importing petrov put bare top-level modules in sys.modules: {bare}"
import importlib
datasets = importlib.import_module("datasets")  # the fake top-level package, not petrov's
assert datasets is not petrov.datasets, "petrov.datasets is the top-level datasets package"
assert datasets.MARKER == "top-level datasets package"
assert not hasattr(petrov.datasets, "MARKER")
assert petrov.datasets.__name__ == "petrov.datasets"
import petrov.datasets as again
assert again is petrov.datasets and sys.modules["datasets"] is datasets
print(datasets.__file__)
"""


def petrov_script() -> Path:
    script = Path(sys.executable).parent / ("petrov.exe" if os.name == "nt" else "petrov")
    if not script.exists():
        pytest.fail(f"console script not found next to {sys.executable}; is petrov installed?")
    return script


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pkg")
    (tmp / "datasets").mkdir()
    (tmp / "datasets" / "__init__.py").write_text("MARKER = 'top-level datasets package'\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    commands = {
        "collision": [sys.executable, "-c", textwrap.dedent(COLLISION_CHECK)],
        "version": [str(petrov_script()), "--version"],
        "mixers": [str(petrov_script()), "mixers", "--options"],
        "models": [str(petrov_script()), "models", "--options"],
    }
    procs = {
        k: subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k, cmd in commands.items()
    }
    results = {}
    for k, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        results[k] = (proc.returncode, out, err)
    results["tmp"] = tmp
    return results


def test_petrov_datasets_and_a_top_level_datasets_do_not_collide(runs):
    code, out, err = runs["collision"]
    assert code == 0, err
    assert out.strip() == str(runs["tmp"] / "datasets" / "__init__.py")


def test_cli_version(runs):
    code, out, err = runs["version"]
    assert code == 0, err
    assert out.strip() == f"petrov {metadata.version('petrov')}" == f"petrov {petrov.__version__}"


def test_cli_lists_registered_mixers_and_models(runs):
    # one unindented header line per entry (its options follow, indented; see tests/test_cli.py)
    code, out, err = runs["mixers"]
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines() if not line.startswith(" ")] == list_mixers()
    assert {"galerkin", "fourier", "softmax", "linear", "performer", "cosformer"} <= set(list_mixers())
    code, out, err = runs["models"]
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines() if not line.startswith(" ")] == list_models()
    assert {"fno1d", "fno2d", "galerkin1d", "galerkin2d", "galerkin2d_inverse"} <= set(list_models())
