"""What petrov writes to the terminal: the API is silent until logging is configured; the CLI shows
INFO lines by default, hides them with -q, adds DEBUG lines with -v; progress bars are drawn only on a
terminal, never into a redirected output."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from petrov.common.progress import progress_bar, progress_disable
from petrov.datasets import generate_dataset
from petrov.cli import main as cli_main
from petrov.train.config import load_config
from petrov.train.trainer import train

PETROV = Path(sys.executable).parent / "petrov"

CONFIG = """
[data]
path = "{data}"
train_resolution = 32
eval_resolutions = [32]
n_train = 8
n_val = 2
n_test = 2
[model]
name = "fno1d"
[model.options]
width = 4
modes = 4
n_layers = 1
proj_hidden = 8
[optim]
epochs = 1
batch_size = 4
[run]
progress = true
"""


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("logging")
    data = root / "burgers.h5"
    generate_dataset("burgers", data, n_samples=12, resolution=64, progress=False)
    path = root / "config.toml"
    path.write_text(CONFIG.format(data=data.as_posix()))
    return path


def test_api_is_silent_by_default(config_file, tmp_path, capsys):
    """Generation and a training run through the API (progress bars asked for) print nothing: no
    epoch lines, no bars (stderr is not a terminal here), no notices."""
    generate_dataset("burgers", tmp_path / "more.h5", n_samples=2, resolution=32, progress=True)
    result = train(load_config(str(config_file), ['run.device="cpu"']), tmp_path / "run")
    assert result.stopped == "completed" and result.test
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_api_logs_through_module_loggers(config_file, tmp_path, caplog):
    """The messages exist, as records of petrov.<package>.<module> loggers, for an application to show."""
    caplog.set_level(logging.DEBUG, logger="petrov")
    train(load_config(str(config_file), ['run.device="cpu"']), tmp_path / "run")
    epoch = [r for r in caplog.records if r.getMessage().startswith("epoch 1/1:")]
    assert len(epoch) == 1 and epoch[0].name == "petrov.train.trainer" and epoch[0].levelno == logging.INFO
    assert any(r.levelno == logging.DEBUG and r.name == "petrov.train.trainer" for r in caplog.records)


@pytest.mark.parametrize("flags, info, debug", [([], True, False), (["-q"], False, False),
                                                (["-v"], True, True), (["--quiet"], False, False)])
def test_cli_verbosity(config_file, tmp_path, capsys, flags, info, debug):
    before = list(logging.getLogger("petrov").handlers)
    code = cli_main([*flags, "train", str(config_file), "--out", str(tmp_path / "run"), "--device", "cpu"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "test relL2 at resolution 32" in out  # the command's result is printed whatever the level
    assert ("epoch 1/1: train loss" in out) is info
    assert ("debug: petrov.train.trainer: model fno1d" in out) is debug
    assert err == ""
    # the command's handlers are gone afterwards: the library is quiet again in this process
    assert logging.getLogger("petrov").handlers == before


def test_cli_verbose_and_quiet_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as stop:
        cli_main(["-q", "-v", "presets"])
    assert stop.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_progress_helper_rules():
    assert progress_disable(False) is True  # --no-progress / run.progress = false: always off
    assert progress_disable(True) is None  # tqdm's rule: off unless stderr is a terminal
    bar = progress_bar(range(3), enabled=True)  # pytest captures stderr: not a terminal
    assert bar.disable and list(bar) == [0, 1, 2]


def _generate(tmp_path: Path, name: str, stderr) -> subprocess.CompletedProcess:
    cmd = [str(PETROV), "generate", "burgers", "--n-samples", "4", "--resolution", "64", "--chunk-size", "1",
           "-o", str(tmp_path / name)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, env=env, timeout=300)


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX")
def test_progress_only_on_a_terminal(tmp_path):
    """Piped stdout/stderr (a redirected log): no bar at all. The same command with stderr on a
    pseudo-terminal draws one (so the first assertion is not vacuous)."""
    import fcntl  # POSIX only, as the test
    import pty
    import struct
    import termios

    piped = _generate(tmp_path, "piped.h5", subprocess.PIPE)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == b"" and piped.stdout.decode().strip() == f"wrote {tmp_path / 'piped.h5'}"

    master, slave = pty.openpty()
    # a window size: a fresh pseudo-terminal reports 0 columns, and tqdm fits the bar into them
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        tty = _generate(tmp_path, "tty.h5", slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    assert tty.returncode == 0
    drawn = b"".join(chunks).decode(errors="replace")
    assert "burgers n=64" in drawn and "4/4" in drawn
