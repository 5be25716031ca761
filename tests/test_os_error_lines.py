"""An operating-system error at the command line is one line naming the file or stream and the real cause.

Each cause a write can meet -- a full disk, a quota, the file-size limit, a read-only file system, no
permission, a failing device, a name too long, a file where a folder must be, a standard output that
cannot be written -- is met by the commands that write (for real where this machine allows it: a small
tmpfs, /dev/full, a read-only mount, root without its permission override; else injected where the write
path calls the system), and each time the command prints one line on stderr that names the user's path
(or the stream and the file it goes to) and the cause, with advice that fits it; no traceback, no
"[Errno N]", and no temporary or half-written file is left behind.
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from petrov.common.os_errors import os_error_message, stream_message
from petrov.datasets import generate_dataset
from petrov.train.config import load_config
from petrov.train.trainer import train

PETROV = Path(sys.executable).parent / "petrov"
COMMANDS = {  # every command that writes files, its output under OUT
    "generate": ("generate", "burgers", "--n-samples", "4", "--resolution", "64", "-o", "OUT/g.h5", "--no-progress"),
    "merge": ("merge", "s0.h5", "s1.h5", "-o", "OUT/m.h5", "--no-progress"),
    "import": ("import", "--x", "b.h5:x", "--y", "b.h5:y", "--grid", "periodic", "-o", "OUT/i.h5", "--no-progress"),
    "train": ("train", "tiny.toml", "--out", "OUT/run"),
    "evaluate": ("evaluate", "run1", "--no-plots", "--out", "OUT/ev"),
    "invert": ("invert", "d.h5", "--method", "pde", "--indices", "0:2", "--set", "max_iter=2", "--out", "OUT/inv",
               "--no-plots", "--no-progress"),
}
TARGET = {"generate": "g.h5", "merge": "m.h5", "import": "i.h5", "train": "run", "evaluate": "ev", "invert": "inv"}


def _in(out: str, args: tuple[str, ...]) -> list[str]:
    return [a.replace("OUT", out) for a in args]


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_fno1d_toml):
    """b.h5 (Burgers, 16 at 64), its two shards s0.h5 and s1.h5, d.h5 (Darcy, 16 at 29), tiny.toml, run1."""
    root = tmp_path_factory.mktemp("oserrors")
    generate_dataset("burgers", root / "b.h5", 16, resolution=64, progress=False)
    for k in range(2):
        generate_dataset("burgers", root / f"s{k}.h5", 4, resolution=64, shard=(k, 2), progress=False)
    generate_dataset("darcy", root / "d.h5", 16, resolution=29, progress=False)
    (root / "tiny.toml").write_text(tiny_fno1d_toml(2))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        train(load_config("tiny.toml"), "run1")
    finally:
        os.chdir(cwd)
    return root


def one_line(err: str, command: str) -> str:
    """The one error line of a failed command: nothing else on stderr, no traceback, no errno number."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"petrov {command}: error: "), err
    assert "Errno" not in err and "Traceback" not in err, err
    return lines[0][len(f"petrov {command}: error: "):]


def leftovers(folder: Path) -> list[str]:
    """Temporary and partial files under ``folder`` (none may stay after a failed write)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.endswith((".tmp", ".partial")))


def shell(here: Path, line: str, *prefix: str) -> tuple[int, str]:
    """``petrov LINE`` run by bash in ``here`` (for redirections): its exit status and stderr."""
    done = subprocess.run([*prefix, "bash", "-c", f'"{PETROV}" {line}'], cwd=here, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    return done.returncode, done.stderr


# --- each cause in words ----------------------------------------------------------------------------------

CAUSES = [
    (errno.EDQUOT, "disk quota exceeded: cannot write out/m.json; remove some of your files (`quota -s` shows the "
                   "quota), ask for a larger quota or choose another location, then run the command again"),
    (errno.EFBIG, "file size limit reached writing out/m.json (the shell's `ulimit -f`); raise the limit or write "
                  "smaller files, then run the command again"),
    (errno.EROFS, "cannot write out/m.json: the file system holding it is read-only; choose a writable location"),
    (errno.EACCES, "cannot access out/m.json: permission denied; check the permissions of out/m.json and of its "
                   "folders (ls -ld), or choose another location"),
    (errno.EPERM, "cannot access out/m.json: operation not permitted; check the permissions of out/m.json and of "
                  "its folders (ls -ld), or choose another location"),
    (errno.EIO, "cannot read or write out/m.json: input/output error (the disk or network file system under it "
                "failed or went away); check the device (dmesg) and run the command again"),
    (errno.EISDIR, "out/m.json is a directory, not a file; give a file's path"),
    (errno.ENOENT, "out/m.json does not exist; check the path"),
    (errno.EMFILE, "cannot open out/m.json: too many open files; raise the limit (`ulimit -n`) or close other "
                   "programs, then run the command again"),
    (errno.ELOOP, "cannot use out/m.json: too many levels of symbolic links"),
]


@pytest.mark.parametrize("code, line", CAUSES, ids=[errno.errorcode[c] for c, _ in CAUSES])
def test_each_cause_is_said_with_the_file(code, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert os_error_message(OSError(code, os.strerror(code), "out/m.json")) == line


def test_a_full_disk_says_what_is_free_where(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    free = shutil.disk_usage(tmp_path).free
    line = os_error_message(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out/m.json"))
    assert line.startswith("disk full: cannot write out/m.json (") and line.endswith(
        " free in out); free some space or choose another location, then run the command again")
    assert abs(float(line.split("(")[1].split()[0]) - float(f"{free / 1e9:.3g}")) < 1 or free < 1e9


def test_a_file_in_the_way_and_a_name_too_long_are_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").write_text("mine")
    assert os_error_message(OSError(errno.ENOTDIR, "Not a directory", "notes/m.json")) == (
        "cannot use notes/m.json: 'notes' is a file, not a folder; choose another path")
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    long = "a" * (limit + 1)
    assert os_error_message(OSError(errno.ENAMETOOLONG, "File name too long", f"{long}/m.json")) == (
        f"cannot use {'a' * 40}...{'a' * 33}/m.json: the name {'a' * 24 + '...' + 'a' * 24!r} is {limit + 1} bytes "
        f"long, the file system allows {limit}; choose a shorter name")


def test_an_absolute_path_inside_the_working_folder_is_said_as_the_user_wrote_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert os_error_message(OSError(errno.EIO, "Input/output error", str(tmp_path / "out" / "m.json"))).startswith(
        "cannot read or write out/m.json: input/output error")


def test_a_stream_is_named_with_where_it_goes():
    full = OSError(errno.ENOSPC, "No space left on device")
    assert stream_message(full, "standard output", "/dev/full") == (
        "cannot write the standard output to /dev/full: no space left on the device; send it to a file on a disk "
        "with free space, or to /dev/null to discard it")
    assert stream_message(OSError(errno.EIO, "Input/output error"), "standard error", None) == (
        "cannot write the standard error: input/output error (the terminal, disk or network file system it goes "
        "to failed or went away); send it to a file and run the command again")


# --- the commands, for real ---------------------------------------------------------------------------------

def _mount(here: Path, name: str, options: str) -> Path:
    disk = here / name
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(disk)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (not root?): {done.stderr.decode().strip()}")
    return disk


@pytest.fixture
def full_disk(here):
    """A 1 MiB tmpfs at ./fs with no byte free."""
    disk = _mount(here, "fs", "size=1m")
    with open(disk / "filler", "wb") as fh:
        fh.write(b"\0" * shutil.disk_usage(disk).free)
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def read_only_disk(here):
    """A read-only tmpfs at ./ro."""
    disk = _mount(here, "ro", "size=1m,ro")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("command", ["generate", "merge"])
def test_a_full_disk_is_said_with_the_file_before_any_work(full_disk, cli, command):
    code, _, err = cli(*_in("fs", COMMANDS[command]))
    line = one_line(err, command)
    name = TARGET[command]
    assert code == 1 and line.startswith(f"disk full: cannot write fs/{name} (") and "needed, 0 bytes free in fs)" in line
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


@pytest.mark.parametrize("command", ["train", "invert"])
def test_a_disk_without_a_byte_free_is_said_with_the_file_the_command_writes(full_disk, cli, command):
    # the lock taken first holds without its pid; the first file written names the disk full
    code, _, err = cli(*_in("fs", COMMANDS[command]))
    line = one_line(err, command)
    assert code == 1 and line.startswith(f"disk full: cannot write fs/{TARGET[command]}/"), line
    assert " free in fs/" in line and leftovers(full_disk) == []


@pytest.mark.parametrize("command", ["info b.h5", "presets", "train tiny.toml --out run"])
def test_a_standard_output_that_cannot_be_written_is_named(here, command):
    code, err = shell(here, f"{command} > /dev/full")
    word = command.split()[0]
    assert code == 1 and one_line(err, word) == (
        "cannot write the standard output to /dev/full: no space left on the device; send it to a file on a disk "
        "with free space, or to /dev/null to discard it")
    assert leftovers(here) == []


def test_a_standard_output_on_a_full_disk_says_so(full_disk, here):
    code, err = shell(here, "info b.h5 > fs/info.txt")
    assert code == 1 and one_line(err, "info") == (
        "disk full: cannot write the standard output to fs/info.txt (0 bytes free in fs); free some space or send "
        "the output elsewhere, then run the command again")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_read_only_file_system_is_said_with_the_path(read_only_disk, cli, command):
    code, _, err = cli(*_in("ro", COMMANDS[command]))
    line = one_line(err, command)
    name = TARGET[command]
    assert code == 1 and f"ro/{name}: ro is on a read-only file system; choose a writable location" in line, line
    assert list(read_only_disk.iterdir()) == []


@pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0, reason="needs root and setpriv")
@pytest.mark.parametrize("command", ["generate", "train"])
def test_a_folder_without_permission_is_said_with_the_path(here, command):
    (here / "locked").mkdir(mode=0o555)
    # root without its permission override meets the folder's mode as any user would
    line = " ".join(_in("locked", COMMANDS[command]))
    code, err = shell(here, line, "setpriv", "--bounding-set=-dac_override,-dac_read_search")
    name = TARGET[command]
    assert code == 1 and f"locked/{name}: you have no permission to create anything in locked; " in one_line(
        err, command)
    assert list((here / "locked").iterdir()) == []


@pytest.mark.parametrize("command", ["train", "evaluate", "invert"])
def test_an_output_folder_inside_a_file_is_said_with_the_path(here, cli, command):
    code, _, err = cli(*_in("tiny.toml", COMMANDS[command]))
    name = TARGET[command]
    what = "run directory" if command == "train" else "output directory"
    assert code == 1 and one_line(err, command) == (
        f"cannot create the {what} tiny.toml/{name}: 'tiny.toml' is a file, not a folder; choose a writable "
        f"location with --out")


MANIFEST = "ev/.petrov-outputs.json"  # the first file evaluate writes


@pytest.mark.parametrize("code, cause", [
    (errno.EIO, f"cannot read or write {MANIFEST}: input/output error (the disk or network file system under it "
                f"failed or went away); check the device (dmesg) and run the command again"),
    (errno.EDQUOT, f"disk quota exceeded: cannot write {MANIFEST} ("),
    (errno.EFBIG, f"file size limit reached writing {MANIFEST} (the shell's `ulimit -f`); raise the limit or "
                  f"write smaller files, then run the command again"),
], ids=["EIO", "EDQUOT", "EFBIG"])
def test_a_failing_write_is_said_with_the_file_and_leaves_nothing(here, cli, monkeypatch, code, cause):
    def failing(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", failing)  # where the write path hands the file to the disk
    status, _, err = cli(*COMMANDS["evaluate"][:-1], "ev")
    assert status == 1 and one_line(err, "evaluate").startswith(cause)
    assert leftovers(here) == [] and list((here / "ev").iterdir()) == []


def test_a_name_too_long_is_said_with_the_name(here, cli):
    limit = os.pathconf(here, "PC_NAME_MAX")
    code, _, err = cli("train", "tiny.toml", "--out", "a" * (limit + 1) + "/run")
    line = one_line(err, "train")
    assert code == 1 and f"is {limit + 1} bytes long, the file system allows {limit}; choose a shorter" in line
