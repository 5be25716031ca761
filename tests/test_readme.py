"""The README runs as written: every ``bash`` and ``python`` block, in order, in a fresh folder.

The folder holds only what a fresh clone has at its top level (the Makefile, the examples; links to the
repository's), so every data file and run a block uses must come from an earlier block. The blocks run
with ``PETROV_QUICK=1`` (:mod:`petrov.common.quick`: toy sizes, the same commands), with the ``petrov``
command and ``python`` of the environment running the tests first on ``PATH``; ``make`` uses that
environment too (``VENV``) and is told (``-o``, by a wrapper first on ``PATH``) not to reinstall it.

An HTML comment right before a block says how to treat it:
``<!-- readme-test: skip (why) -->`` leaves it out (installing packages; ``make test`` itself),
``<!-- readme-test: without "COMMAND" (why) -->`` runs it without the lines that start with COMMAND (the
Quickstart's ``make test``), and ``<!-- readme-test: needs FILE -->`` names a user's file that the test
writes first (a small stand-in with the same layout).
"""
from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CLONE_ENTRIES = ("Makefile", "examples", "benchmarks", "pyproject.toml")
BLOCK = re.compile(r"(?:<!-- readme-test: (?P<mark>[^\n]*?) -->\n)?^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$",
                   re.S | re.M)
RUNNABLE = {"bash": ["bash", "-euo", "pipefail"], "python": [sys.executable]}


def readme_blocks(text: str) -> list[tuple[str, str, str]]:
    """``(language, mark, body)`` of every fenced block, in order (``mark``: the readme-test comment)."""
    return [(m["lang"], (m["mark"] or "").strip(), m["body"]) for m in BLOCK.finditer(text)]


def test_readme_blocks_are_found_and_marked_knowingly():
    blocks = readme_blocks(README.read_text())
    assert sum(lang == "bash" for lang, _, _ in blocks) >= 8 and any(lang == "python" for lang, _, _ in blocks)
    for lang, mark, body in blocks:
        assert mark == "" or mark.startswith(("skip (", "needs ", 'without "')), f"unknown readme-test mark {mark!r}"
        if mark.startswith("without "):
            left_out = without(mark)
            assert any(line.startswith(left_out) for line in body.splitlines()), f"no line of the block starts with {left_out!r}"
        assert lang in RUNNABLE or lang in ("toml", "text"), f"a {lang!r} block: run it or say what it is"


def without(mark: str) -> str:
    """The command a ``without "COMMAND" (why)`` mark leaves out of its block."""
    return mark.split('"')[1]


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def provide(name: str, where: Path, writers: dict) -> None:
    """Write the stand-in for a user's file the README assumes."""
    if name not in writers:
        raise AssertionError(f"the README needs {name!r}, for which the test has no stand-in")
    writers[name](where / name)


def test_readme_runs_top_to_bottom_in_a_fresh_folder(tmp_path, pdebench_darcy):
    for entry in CLONE_ENTRIES:
        (tmp_path / entry).symlink_to(ROOT / entry)
    venv = Path(sys.executable).parent.parent
    wrappers = tmp_path / ".bin"
    wrappers.mkdir()
    if shutil.which("make"):
        (wrappers / "make").write_text(f'#!/bin/sh\nexec {shutil.which("make")} -o "{venv}/.installed" "$@"\n')
        (wrappers / "make").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "MAKE"))}
    path = os.pathsep.join([str(wrappers), str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(PETROV_QUICK="1", PATH=path, VENV=str(venv), OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"))
    writers = {"2D_DarcyFlow_beta1.0_Train.hdf5": lambda path: pdebench_darcy(path, 32)}
    ran = 0
    for number, (lang, mark, body) in enumerate(readme_blocks(README.read_text()), 1):
        if lang not in RUNNABLE or mark.startswith("skip"):
            continue
        if mark.startswith("needs "):
            provide(mark.split()[1], tmp_path, writers)
        script = tmp_path / f".readme-block-{number}.{'py' if lang == 'python' else 'sh'}"
        if mark.startswith("without "):
            body = "".join(line for line in body.splitlines(keepends=True) if not line.startswith(without(mark)))
        script.write_text(body)
        start, cpu = time.monotonic(), children_cpu()
        done = subprocess.run([*RUNNABLE[lang], str(script)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            pytest.fail(f"README block {number} ({lang}) exited {done.returncode}:\n{body}\n"
                        f"--- stdout (end) ---\n{done.stdout[-3000:]}\n--- stderr (end) ---\n{done.stderr[-3000:]}")
        ran += 1
        print(f"README block {number} ({lang}): {time.monotonic() - start:.1f} s wall, "
              f"{children_cpu() - cpu:.1f} CPU s: {body.splitlines()[0][:60]}")
    assert ran >= 10
    # what the README says the commands leave behind
    for path in ("runs/demo-burgers/eval/metrics.csv", "runs/burgers/eval/error_vs_resolution.pdf",
                 "runs/burgers-more/best.pt", "inv/pde/metrics.json", "runs/pdebench-darcy/metrics.json",
                 "models/galerkin1d.pt", "obs.npz"):
        assert (tmp_path / path).is_file(), path
