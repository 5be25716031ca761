"""The release path: a wheel built with ``python -m build`` installs into a fresh virtual environment and
runs there without the source tree.

The wheel is built from a copy of the checkout (its files less what builds, runs and virtual environments
leave there: a stale ``build/`` would put deleted modules into the wheel). A new venv gets the CPU build of
torch pinned first, as the Makefile installs it (pip's configured indexes and find-links), then the wheel and
its dependencies. From a folder outside the checkout, with no PYTHONPATH, the installed ``petrov`` prints its
version and runs the demo's CLI equivalent in quick mode (``PETROV_QUICK=1``: toy sizes, same commands):
``petrov train burgers-quick`` (a preset shipped inside the package) then ``petrov evaluate``.

Minutes of CPU (the build, the install, the run): those tests are marked slow.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from petrov.common.quick import QUICK_ENV

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
# the Makefile's TORCH_PIN: the CPU wheel, installed first so that the dependency range is already met
TORCH_PIN = "torch==2.13.0"
# what builds, runs, docs and tests leave at the checkout's root (as .gitignore lists them), never sources
GENERATED = {".git", "build", "dist", "runs", "data", "site", "bench-results", ".pytest_cache"}
NOT_SHIPPED = ("tests/", "benchmarks/", "examples/", "docs/")


def source_copy_ignore(folder: str, names: list[str]) -> set[str]:
    """shutil.copytree's ignore: generated folders at the root, egg-info, caches and virtual environments."""
    at_root = Path(folder).resolve() == ROOT
    return {n for n in names
            if (at_root and (n in GENERATED or n.endswith(".egg-info")))
            or n == "__pycache__" or (Path(folder, n, "pyvenv.cfg").is_file())}


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (f"{' '.join(map(str, cmd))} exited {done.returncode}:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def package_folders() -> dict[str, Path]:
    """The packages pyproject.toml lists, each with its source folder (petrov.a.b is ROOT/a/b)."""
    return {name: ROOT.joinpath(*name.split(".")[1:]) for name in PYPROJECT["tool"]["setuptools"]["packages"]}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=source_copy_ignore)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # PyPA's front-end in its default isolated mode: setuptools and wheel from pyproject's build-system
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp / "dist"), str(src)], tmp, env)
    wheels = list((tmp / "dist").glob("*.whl"))
    assert [w.name for w in wheels] == [f"petrov-{VERSION}-py3-none-any.whl"]
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh venv holding torch and the wheel; the environment to run it in (no PYTHONPATH, its bin first)."""
    tmp = tmp_path_factory.mktemp("venv")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp, dict(os.environ))
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", QUICK_ENV)}
    env.update(PATH=os.pathsep.join([str(bin_dir), env.get("PATH", "")]), VIRTUAL_ENV=str(venv),
               OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"))
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet"]
    torch = subprocess.run([*pip, TORCH_PIN], cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
    if torch.returncode != 0:
        if "No matching distribution found" in torch.stderr or "Could not find a version" in torch.stderr:
            pytest.skip(f"{TORCH_PIN} cannot be installed from pip's configured indexes here: "
                        f"{torch.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"pip install {TORCH_PIN} exited {torch.returncode}:\n{torch.stderr[-3000:]}")
    run([*pip, str(wheel)], tmp, env, timeout=1800)
    return venv, env


@pytest.mark.slow
def test_wheel_holds_the_package_and_its_data_only(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    dist_info = f"petrov-{VERSION}.dist-info/"
    assert {n for n in names if not n.startswith(("petrov/", dist_info))} == set()
    assert [n for n in names if n.startswith(tuple("petrov/" + p for p in NOT_SHIPPED))] == []
    # every module of every package, the shipped presets, the PEP 561 markers (the top-level one covers all)
    expected = {"petrov/py.typed"}
    for folder in package_folders().values():
        expected |= {f"petrov/{p.relative_to(ROOT).as_posix()}" for p in folder.glob("*.py")}
        expected |= {f"petrov/{p.relative_to(ROOT).as_posix()}" for p in folder.glob("py.typed")}
    configs = sorted((ROOT / "train" / "configs").glob("*.toml"))
    assert configs, "no presets in train/configs/"
    expected |= {f"petrov/train/configs/{p.name}" for p in configs}
    assert sorted(expected - names) == []
    # nothing that is not in the sources (a stale build/ folder ships deleted modules)
    assert sorted(n for n in names if n.startswith("petrov/") and not (ROOT / n[len("petrov/"):]).is_file()) == []
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}entry_points.txt").decode()
    assert "petrov = petrov.__main__:main" in entry_points


def test_every_source_package_is_listed_in_pyproject():
    # a subpackage missing from [tool.setuptools] packages is silently left out of the wheel
    listed = set(package_folders().values())
    tops = [ROOT / p.name for p in listed if p.parent == ROOT]
    found = {init.parent for top in tops for init in top.rglob("__init__.py") if "__pycache__" not in init.parts}
    found |= {init.parent for init in ROOT.glob("*/__init__.py")}  # a new top-level folder
    assert sorted(map(str, found - listed)) == []


@pytest.mark.slow
def test_installed_wheel_runs_outside_the_source_tree(venv, tmp_path):
    venv_dir, env = venv
    python, petrov = (str(venv_dir / "bin" / name) for name in ("python", "petrov"))
    where = run([python, "-c", "import petrov, sys, sysconfig; print(petrov.__file__); "
                 "print(sysconfig.get_paths()['purelib']); print(repr(sys.path))"], tmp_path, env)
    module, purelib, path = where.stdout.splitlines()
    assert Path(module).resolve().is_relative_to(Path(purelib).resolve()), module
    assert not Path(module).resolve().is_relative_to(ROOT), module
    assert str(ROOT) not in path

    version = run([petrov, "--version"], tmp_path, env)
    assert version.stdout.strip() == f"petrov {VERSION}"

    # the demo as a user without the source tree runs it (examples/burgers.py is not in the wheel)
    quick = {**env, QUICK_ENV: "1"}
    run([petrov, "train", "burgers-quick", "--out", "run", "--device", "cpu"], tmp_path, quick)
    for name in ("config.json", "best.pt", "last.pt", "metrics.json"):
        assert (tmp_path / "run" / name).is_file(), name
    assert (tmp_path / "data" / "burgers-8192.h5").is_file()  # generated on first use, relative to the cwd
    run([petrov, "evaluate", "run", "--device", "cpu"], tmp_path, quick)
    for name in ("metrics.json", "metrics.csv"):
        assert (tmp_path / "run" / "eval" / name).is_file(), name
    rows = json.loads((tmp_path / "run" / "eval" / "metrics.json").read_text())["rows"]
    preset = tomllib.loads((ROOT / "train" / "configs" / "burgers-quick.toml").read_text())
    assert [row["resolution"] for row in rows] == preset["data"]["eval_resolutions"]
    assert all(math.isfinite(row["mean"]) for row in rows), rows
    assert list((tmp_path / "run" / "eval").glob("*.png"))
