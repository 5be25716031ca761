"""Training on two machines, simulated on this one: two torchrun launchers (``--nnodes 2``, one worker each,
c10d rendezvous on the loopback address, gloo), as a cluster's job script starts them.

- the two-node run trains as one process does on the same global batch (the gloo all-reduce sums the
  gradients in another order: a tolerance, not bit-equality), and each rank reads only its own samples;
- SIGTERM to one node stops both workers after the same step, with one checkpoint and status 143, and
  ``--resume`` ends with exactly the weights of an uninterrupted two-node run;
- a rank that is killed, or fails, or stops answering takes the other down with one line naming it,
  within a bounded time, never a hang.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DistributedSampler

from petrov.cli import main as cli_main
from petrov.datasets import generate_dataset
from petrov.train.checkpoint import load_run_checkpoint

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals, /proc")
N_TRAIN, N_VAL, N_TEST, BATCH = 96, 6, 6, 4
CONFIG = f"""
[data]
path = "b.h5"
train_resolution = 32
eval_resolutions = [32, 64]
n_train = {N_TRAIN}
n_val = {N_VAL}
n_test = {N_TEST}
[model]
name = "fno1d"
[model.options]
width = 16
modes = 8
n_layers = 2
[optim]
epochs = 3
batch_size = {BATCH}
[run]
progress = false
device = "cpu"
threads = 1
"""
HOOKED = Path(__file__).with_name("hooked_petrov.py")  # petrov's command line with hooks set by environment


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scratch(folder: Path) -> dict[str, str]:
    """``TMPDIR`` in ``folder``: each torchrun agent leaves a ``torchelastic_*`` folder in the temporary
    directory, which would pile up in the machine's ``/tmp`` run after run."""
    (folder / "tmp").mkdir(exist_ok=True)
    return {"TMPDIR": str(folder / "tmp")}


def launch(cwd: Path, out: str, *extra: str, hooked: bool = False, env: dict | None = None) -> list[subprocess.Popen]:
    """The two launchers of ``petrov train tiny.toml --out OUT`` (``hooked``: the logging worker script)."""
    port = free_port()
    program = [str(HOOKED)] if hooked else ["-m", "petrov"]
    procs = []
    for node in range(2):
        cmd = [str(Path(sys.executable).parent / "torchrun"), "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
               *program, "train", "tiny.toml", "--out", out, *extra]
        procs.append(subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **scratch(cwd), "OMP_NUM_THREADS": "1",
                                                         **(env or {})},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    return procs


def finish(procs: list[subprocess.Popen], timeout: float = 300.0) -> list[tuple[int, str, str]]:
    """Each launcher's ``(status, stdout, stderr)``; both are killed (and the test fails) past ``timeout``."""
    end, results = time.monotonic() + timeout, []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                os.killpg(p.pid, signal.SIGKILL)
            raise AssertionError(f"the launchers did not end within {timeout} s")
        results.append((proc.returncode, out, err))
    return results


def wait_for(condition, timeout: float = 240.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def worker(rank: int, out: str) -> int:
    """The pid of the worker of rank ``rank`` training into ``out`` (from /proc)."""
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"train" in cmd and out.encode() in cmd and f"RANK={rank}".encode() in env and b"-m" in cmd:
            return int(entry.name)
    raise AssertionError(f"no worker of rank {rank}")


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_run_checkpoint(run / "last.pt")["state_dict"]


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def petrov_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("petrov train:")]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """b.h5 (Burgers, 108 samples at 64), tiny.toml, and the reference runs: ``single`` (one process) and
    ``nodes`` (two nodes, every read logged in ``reads.RANK``)."""
    root = tmp_path_factory.mktemp("multinode")
    generate_dataset("burgers", root / "b.h5", N_TRAIN + N_VAL + N_TEST, resolution=64, progress=False)
    (root / "tiny.toml").write_text(CONFIG)
    procs = launch(root, "nodes", hooked=True, env={"READ_LOG": str(root / "reads")})
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert cli_main(["train", "tiny.toml", "--out", "single"]) == 0
    finally:
        os.chdir(cwd)
    for code, _, err in finish(procs):
        assert code == 0, err[-3000:]
    return root


def test_two_nodes_train_as_one_process_on_the_same_global_batch(project):
    one, two = rows(project / "single"), rows(project / "nodes")
    assert len(one) == len(two) == 3
    for a, b in zip(one, two):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-6)
        assert b["val_rel_l2"] == pytest.approx(a["val_rel_l2"], rel=1e-6)
    single, nodes = weights(project / "single"), weights(project / "nodes")
    for key in single:  # float32 sums in another order: ~1e-7 relative per step (measured 2.6e-7 after 2 epochs)
        torch.testing.assert_close(nodes[key], single[key], rtol=1e-5, atol=1e-6, msg=key)
    metrics = [json.loads((project / run / "metrics.json").read_text())["rows"] for run in ("single", "nodes")]
    assert [r["resolution"] for r in metrics[1]] == [32, 64]
    for a, b in zip(*metrics):
        assert b["n"] == a["n"] == N_TEST and b["mean"] == pytest.approx(a["mean"], rel=1e-5)


def read_log(project: Path, rank: int) -> dict:
    """The rows of each field read by ``rank``, per phase: "before" (the first epoch), "epoch k" (its
    training steps), "validation k", "test"."""
    phases: dict = {}
    phase, epoch = "before", 0
    for line in (project / f"reads.{rank}").read_text().splitlines():
        entry = json.loads(line)
        if "phase" in entry:
            epoch = entry.get("epoch", epoch)
            phase = {"epoch": f"epoch {epoch}", "validation": f"validation {epoch}"}.get(entry["phase"], entry["phase"])
        else:
            phases.setdefault(phase, {}).setdefault(entry["field"], []).extend(entry["rows"])
    return phases


def test_each_rank_reads_only_its_own_samples(project):
    train, val, test = range(N_TRAIN), range(N_TRAIN, N_TRAIN + N_VAL), range(N_TRAIN + N_VAL, N_TRAIN + N_VAL + N_TEST)
    firsts = {train[0], val[0], test[0]}  # a lazily read split reads its first sample for its shapes
    epoch_reads = []
    for rank in range(2):
        log = read_log(project, rank)
        share = lambda split: set(split[rank * len(split) // 2:(rank + 1) * len(split) // 2])  # noqa: E731
        # before training: the normalisers from its half of train, the NaN check of its half of val and test
        before = set(log["before"]["x"]) | set(log["before"]["y"])
        assert before - firsts == (share(train) | share(val) | share(test)) - firsts
        for epoch in (1, 2, 3):
            sampler = DistributedSampler(range(N_TRAIN), num_replicas=2, rank=rank, shuffle=True, seed=0)
            sampler.set_epoch(epoch)
            steps = log[f"epoch {epoch}"]
            assert sorted(steps["x"]) == sorted(steps["y"]) == sorted(sampler), epoch  # its batches, each once
            epoch_reads.append(set(steps["x"]))
            assert set(log[f"validation {epoch}"]["x"]) == set(val[rank::2])
        assert set(log["test"]["x"]) - firsts == set(test[rank::2]) - firsts
    for epoch in range(3):  # the two ranks' batches of an epoch: disjoint halves of the training split
        assert not epoch_reads[epoch] & epoch_reads[3 + epoch]
        assert epoch_reads[epoch] | epoch_reads[3 + epoch] == set(train)


# two launchers trained, stopped and resumed (a minute or more): with the slow tests (CI); the fast suite keeps
# two nodes training as one, a killed rank, and one node's SIGTERM and resume (tests/test_preemption.py)
@pytest.mark.slow
@LINUX
def test_sigterm_to_one_node_stops_both_and_resume_is_bit_identical(project):
    """A scheduler's SIGTERM may reach one node first: both ranks stop after the same step, rank 0 writes
    the place in the epoch, both workers end with 143; resumed, the run ends as the uninterrupted one."""
    sent = project / "sent"  # rank 1 signals its node (itself and its launcher) after step 5 of epoch 2
    procs = launch(project, "stopped", hooked=True, env={"SIGNAL_AT": "2:5", "SIGNAL_RANK": "1",
                                                         "SIGNAL_LOG": str(sent)})
    wait_for(sent.exists, what="rank 1's SIGTERM")
    results = finish(procs, timeout=60)  # both launchers end after the signal (the bound guards against a hang)
    seconds = time.time() - float(sent.read_text())
    assert all(code != 0 for code, _, _ in results)
    lines = [petrov_lines(err) for _, _, err in results]
    assert sorted(map(len, lines)) == [1, 1], lines  # one line per worker
    assert all(ls[0] == "petrov train: terminated; continue with `petrov train --out stopped --resume`" for ls in lines)
    assert all("exitcode  : 143" in err for _, _, err in results if "ChildFailedError" in err)
    position = load_run_checkpoint(project / "stopped" / "last.pt")["position"]
    steps = N_TRAIN // BATCH
    assert position is not None and 5 <= position["steps"] < steps and len(position["totals"]) == 2
    print(f"SIGTERM to both launchers' exit: {seconds:.1f} s; stopped after step {position['steps']} of {steps}")

    for code, _, err in finish(launch(project, "stopped", "--resume")):
        assert code == 0, err[-3000:]
    resumed, straight = weights(project / "stopped"), weights(project / "nodes")
    for key in straight:
        assert torch.equal(resumed[key], straight[key]), key
    assert [r["train_loss"] for r in rows(project / "stopped")] == [r["train_loss"] for r in rows(project / "nodes")]


@LINUX
def test_a_killed_rank_ends_both_launchers_with_one_line_naming_it(project):
    procs = launch(project, "killed")
    wait_for((project / "killed" / "last.pt").exists, what="the first epoch's checkpoint")
    os.kill(worker(1, "killed"), signal.SIGKILL)
    results = finish(procs, timeout=60)  # both launchers end (the bound guards against a hang)
    assert all(code != 0 for code, _, _ in results)
    lines = [line for _, _, err in results for line in petrov_lines(err)]
    assert lines == ["petrov train: error: rank 0 of 2 stopped: rank 1 ended without a word (killed, out of memory, "
                     "or its machine went down: see its launcher's log); continue with the same command and --resume "
                     "(from killed/last.pt)"]


@LINUX
@pytest.mark.slow  # the same path as the kill, with a message
def test_an_error_on_one_rank_is_named_by_the_other(project):
    results = finish(launch(project, "failed", hooked=True, env={"FAIL_RANK": "1", "FAIL_EPOCH": "2"}), timeout=240)
    assert all(code != 0 for code, _, _ in results)
    lines = sorted(line for _, _, err in results for line in petrov_lines(err))
    assert lines == ["petrov train: error: an injected failure",
                     "petrov train: error: rank 0 of 2 stopped: rank 1 failed (ValueError: an injected failure); "
                     "continue with the same command and --resume (from failed/last.pt)"]


# the job script stopped, requeued and continued on two nodes (a minute or more): with the slow tests (CI); one
# node's job script that stops and continues is in the fast suite (tests/test_preemption.py)
@pytest.mark.slow
@LINUX
def test_the_slurm_job_script_stops_requeues_and_continues(project, tmp_path):
    """examples/slurm/train.sbatch under stand-ins of srun (runs its command) and scontrol (one node;
    a requeue is recorded): SIGTERM to the script, as --signal=B:TERM sends it, stops the training and
    requeues the job; the requeued script continues the run to the weights of an uninterrupted one."""
    script = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.sbatch"
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "srun").write_text('#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nexec "$@"\n')
    (bin_ / "scontrol").write_text('#!/bin/bash\nif [ "$1" = show ]; then echo 127.0.0.1; '
                                   'else echo "$*" >> "$REQUEUED"; fi\n')
    for tool in bin_.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, **scratch(tmp_path), "OMP_NUM_THREADS": "1",
           "PATH": f"{bin_}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node1", "SLURM_NNODES": "1", "SLURM_GPUS_ON_NODE": "1",
           "PETROV_RDZV_PORT": str(free_port()), "REQUEUED": str(tmp_path / "requeued")}

    def job() -> subprocess.Popen:
        return subprocess.Popen(["bash", str(script), "tiny.toml", "job"], cwd=project, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    first = job()
    wait_for((project / "job" / "last.pt").exists, what="the first epoch's checkpoint")
    os.kill(first.pid, signal.SIGTERM)
    (code, out, err), = finish([first], timeout=120)
    assert code == 0 and (tmp_path / "requeued").read_text() == "requeue 42\n", out + err
    assert "nothing to resume in job" in out and "petrov train: terminated" in err
    assert len(rows(project / "job")) < 3
    (code, out, err), = finish([job()], timeout=240)
    assert code == 0, err[-3000:]
    assert "resuming job/last.pt" in out and len(rows(project / "job")) == 3
    resumed, straight = weights(project / "job"), weights(project / "single")
    for key in straight:
        assert torch.equal(resumed[key], straight[key]), key
