"""The ``petrov`` command in real subprocesses: exit statuses, one-line errors, --debug, closed pipes,
presets, models/mixers with their options, and models/mixers of other packages found by entry points.

The processes start together (one module-scoped fixture): each spends seconds importing torch.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata, resources
from pathlib import Path

import numpy as np
import pytest

from petrov.datasets import import_arrays
from petrov.operators import list_mixers, list_models
from petrov.operators.models import config_class
from petrov.common.config import asdict
from petrov.train.config import preset_names, read_toml, tomllib  # tomli on Python 3.10

PETROV = Path(sys.executable).parent / ("petrov.exe" if os.name == "nt" else "petrov")

PLUGIN = '''
from dataclasses import dataclass
from torch import nn
from petrov.operators import register_model
from petrov.operators.attention.mixers import MIXERS


@dataclass
class TinyConfig:
    width: int = 3
    act: str = "tanh"


@register_model("fake_tiny", TinyConfig)
class Tiny(nn.Module):
    def __init__(self, cfg):
        super().__init__()


@MIXERS.register("fake_mix")
class FakeMix(nn.Module):
    def __init__(self, head_dim, n_heads, gamma: float = 0.5):
        super().__init__()
'''

ENTRY_POINTS = """
[petrov.models]
fake_tiny = fakeplug
broken = brokenplug
[petrov.mixers]
fake_mix = fakeplug
"""

# broken plugin: warned about once, however often the registry is read; petrov stays usable
LOADED_ONCE = """
import warnings
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    from petrov.operators import MODELS, MIXERS
    for _ in range(3):
        MODELS.names(); "fake_tiny" in MODELS; MIXERS.get("fake_mix")
print(len([w for w in seen if "entry point 'broken'" in str(w.message)]), "fno1d" in MODELS.names())
"""


def fake_distribution(root: Path) -> Path:
    (root / "fakeplug").mkdir()
    (root / "fakeplug" / "__init__.py").write_text(PLUGIN)
    (root / "brokenplug").mkdir()
    (root / "brokenplug" / "__init__.py").write_text("raise ImportError('needs the package frobnicate')\n")
    info = root / "fakeplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not PETROV.exists():
        pytest.fail(f"console script not found next to {sys.executable}; is petrov installed?")
    tmp = tmp_path_factory.mktemp("cli")
    plugins = fake_distribution(tmp_path_factory.mktemp("plugins"))
    rng = np.random.default_rng(0)
    data = import_arrays(tmp / "d.h5", rng.standard_normal((4, 8)), rng.standard_normal((4, 8)), grid="periodic")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with_plugins = {**env, "PYTHONPATH": str(plugins)}
    commands = {
        "usage": ([str(PETROV), "generate", "heat", "--n-samples", "2", "-o", "x.h5"], env),
        "usage_command": ([str(PETROV), "train", "--out", "run"], env),
        "runtime": ([str(PETROV), "info", "missing.h5"], env),
        "debug": ([str(PETROV), "--debug", "info", "missing.h5"], env),
        "pipe": (["sh", "-c", f"'{PETROV}' info '{data}' | head -1"], env),
        "presets": ([str(PETROV), "presets"], env),
        "show": ([str(PETROV), "presets", "show", "burgers-quick"], env),
        "show_unknown": ([str(PETROV), "presets", "show", "burgers-slow"], env),
        "models": ([str(PETROV), "models", "--options"], env),
        "mixers": ([str(PETROV), "mixers", "--options"], env),
        "model_list": ([str(PETROV), "models"], env),
        "mixer_list": ([str(PETROV), "mixers"], env),
        "plugin_models": ([str(PETROV), "models", "fake_tiny", "fno1d"], with_plugins),
        "plugin_mixers": ([str(PETROV), "mixers", "fake_mix"], with_plugins),
        "plugin_broken": ([str(PETROV), "models", "broken"], with_plugins),
        "plugin_once": ([sys.executable, "-c", textwrap.dedent(LOADED_ONCE)], with_plugins),
    }
    procs = {
        k: subprocess.Popen(cmd, cwd=tmp, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k, (cmd, e) in commands.items()
    }
    results = {}
    for k, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        results[k] = (proc.returncode, out, err)
    return results


def test_usage_errors_exit_2(runs):
    code, _, err = runs["usage"]
    assert code == 2 and "invalid choice: 'heat'" in err
    code, _, err = runs["usage_command"]  # parsed, but neither CONFIG nor --resume
    assert code == 2 and "give a CONFIG" in err and "Traceback" not in err


def test_runtime_failure_is_one_line_exit_1_and_debug_shows_the_traceback(runs):
    code, out, err = runs["runtime"]
    assert code == 1 and out == ""
    assert err.strip() == "petrov info: error: no such dataset file: missing.h5"
    code, _, err = runs["debug"]
    assert code == 1 and "Traceback (most recent call last)" in err and "FileNotFoundError" in err


def test_closed_pipe_is_quiet(runs):
    code, out, err = runs["pipe"]
    assert code == 0 and out.startswith("file:") and len(out.splitlines()) == 1
    assert "BrokenPipeError" not in err and "Traceback" not in err and "Exception ignored" not in err


def test_presets_list_and_show(runs):
    code, out, _ = runs["presets"]
    assert code == 0 and list(described(out)) == preset_names()
    code, out, _ = runs["show"]
    assert code == 0 and tomllib.loads(out) == read_toml("burgers-quick")
    code, _, err = runs["show_unknown"]
    assert code == 2 and "no shipped preset 'burgers-slow'; presets: burgers-arfno, burgers-gpu, burgers-latent, burgers-marching" in err


@pytest.mark.parametrize("args, says", [
    (("models", "fno"), "unknown model 'fno'; registered: arfno1d,"),
    (("models", "FNO1D"), "(did you mean 'fno1d'?)"),
    (("models", "fno1d", ""), "unknown model ''"),
    (("mixers", "softmaxx"), "unknown mixer 'softmaxx'; registered: cosformer,"),
    (("mixers", "Galerkin"), "(did you mean 'galerkin'?)"),
    (("presets", "burgers-quik"), "did you mean `petrov presets show burgers-quick`?"),
    (("presets", "burgers-quick.toml"), "did you mean `petrov presets show burgers-quick`?"),
    (("presets", "shwo", "burgers-quick"), "unknown action 'shwo'"),
])
def test_an_unknown_name_in_the_catalog_is_a_usage_error(cli, args, says):
    code, out, err = cli(*args)
    first, *rest = err.strip().splitlines()
    assert code == 2 and not out and first.startswith(f"petrov {args[0]}: error: ") and says in first, err
    assert rest == [f"run 'petrov {args[0]} --help' for usage"]


def test_evaluate_help_says_mesh_levels_go_in_resolutions(capsys):
    from petrov.cli.main import main

    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    out = capsys.readouterr().out
    assert "mesh level names such as level0,level1 (mesh runs)" in " ".join(out.split())


def described(text: str) -> dict[str, str]:
    """``name -> what it is for`` from a plain listing (``petrov presets``/``models``/``mixers``)."""
    rows = [line.split(None, 1) for line in text.splitlines() if line and not line.startswith("petrov ")]
    return {row[0]: row[1] if len(row) > 1 else "" for row in rows}


def test_every_listed_name_says_what_it_is_for(runs):
    for key, names in (("presets", preset_names()), ("model_list", list_models()), ("mixer_list", list_mixers())):
        code, out, err = runs[key]
        assert code == 0, err
        listing = described(out)
        assert list(listing) == names
        for name, text in listing.items():
            assert len(text.split()) >= 4 and "(no description)" not in text, (key, name, text)


def blocks(text: str) -> dict[str, dict[str, str]]:
    """``header -> {option: value text}`` from the models/mixers listing."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if not line.startswith(" "):
            current = out.setdefault(line.split()[0], {})
        elif "=" in line:
            key, _, value = line.partition("=")
            current[key.strip()] = value.strip()
    return out


def test_models_show_their_config_defaults(runs):
    code, out, err = runs["models"]
    assert code == 0, err
    listed = blocks(out)
    assert list(listed) == list_models()
    for name in list_models():
        defaults = asdict(config_class(name)())
        assert listed[name] == {k: "(unset)" if v is None else json.dumps(v) for k, v in defaults.items()}


def test_mixers_show_their_options(runs):
    from petrov.operators.attention.mixers import mixer_options

    code, out, err = runs["mixers"]
    assert code == 0, err
    listed = blocks(out)
    assert list(listed) == list_mixers()
    for name in list_mixers():
        assert list(listed[name]) == (mixer_options(name) or [])
    assert listed["performer"]["redraw_interval"] == "1000"


def test_plugins_are_found_by_entry_points(runs):
    code, out, err = runs["plugin_models"]
    assert code == 0, err
    listed = blocks(out)
    assert listed["fake_tiny"] == {"width": "3", "act": '"tanh"'} and "fno1d" in listed
    # the broken entry point is named with its distribution and error, as a warning
    assert "entry point 'broken' = 'brokenplug' of fakeplug failed to load" in err
    assert "ImportError: needs the package frobnicate" in err
    code, out, err = runs["plugin_mixers"]
    assert code == 0 and blocks(out) == {"fake_mix": {"gamma": "0.5"}}
    code, _, err = runs["plugin_broken"]
    assert code == 2 and "unknown model 'broken'" in err
    assert "entry point 'broken' failed to load (ImportError: needs the package frobnicate)" in err
    code, out, err = runs["plugin_once"]
    assert code == 0, err
    assert out.split() == ["1", "True"]


def test_installed_metadata_declares_what_the_code_imports():
    requires = metadata.requires("petrov")
    assert any(r.replace(" ", "").startswith('tomli>=1.1;python_version<"3.11"') for r in requires)
    extras = set(metadata.metadata("petrov").get_all("Provides-Extra"))
    assert {"test", "dev", "tensorboard"} <= extras
    for package in ("petrov.operators", "petrov.operators.attention.mixers", "petrov.operators.models",
                    "petrov.datasets", "petrov.train"):
        assert (resources.files(package) / "py.typed").is_file(), package


# Ctrl-C while the command starts (seconds of importing torch on a busy machine): a real SIGINT, sent by the
# process to itself when the import of torch begins (so no timing to race), as a terminal sends it
CTRL_C_AT_TORCH = '''
import os, signal, sys


class CtrlCAtTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None


signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal, even under a launcher ignoring it
sys.meta_path.insert(0, CtrlCAtTorch())
'''


def test_ctrl_c_while_torch_is_imported_is_one_line_and_status_130(tmp_path):
    import petrov

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(CTRL_C_AT_TORCH)
    root = Path(__file__).resolve().parent.parent
    module, _, func = read_toml(root / "pyproject.toml")["project"]["scripts"]["petrov"].partition(":")
    console_script = f"import sys; from {module} import {func}; sys.exit({func}())"  # what pip's wrapper runs
    package_parent = str(Path(petrov.__file__).parent.parent)  # the petrov these tests import
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hooks), package_parent, os.environ.get("PYTHONPATH", "")])}
    commands = {"python -m petrov": [sys.executable, "-m", "petrov", "info", "x.h5"],
                "console script": [sys.executable, "-c", console_script, "info", "x.h5"]}
    procs = {k: subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, cmd in commands.items()}
    for what, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert (proc.returncode, out, err) == (130, "", "petrov: interrupted\n"), what
