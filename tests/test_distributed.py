"""Data parallel training: a 2-process gloo run (torchrun's env:// set-up) equals one process on the
same global batch."""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from petrov.train import distributed as dist_
from petrov.train.checkpoint import load_run_checkpoint
from petrov.train.trainer import train

CASES = Path(__file__).with_name("test_trainer.py")
# global batch 4 = 2 processes x 2; 5 validation samples: the sampler pads one duplicate
SETTINGS = {"data": {"n_train": 16, "n_val": 5}, "optim": {"epochs": 2, "batch_size": 4}}

WORKER = textwrap.dedent("""
    import importlib.util, json, sys
    import torch
    spec = importlib.util.spec_from_file_location("cases", sys.argv[1])
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    from petrov.train import distributed
    from petrov.train.trainer import train
    torch.set_num_threads(1)
    ctx = distributed.setup("cpu")  # joins the group from the torchrun-style environment
    print(f"rank {ctx.rank} of {ctx.world_size}")
    settings = json.loads(sys.argv[3])
    cfg = cases.tiny_config(**settings)
    train(cfg, sys.argv[2], data=cases.tiny_data(settings["data"]["n_train"], settings["data"]["n_val"]))
    distributed.teardown(ctx)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_rows(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "log.jsonl").read_text().splitlines()]


def test_two_process_gloo_run_equals_one_process(tmp_path):
    torch.set_num_threads(1)
    cases = {}
    exec(compile(CASES.read_text(), str(CASES), "exec"), cases)
    single = tmp_path / "single"
    cfg = cases["tiny_config"](**SETTINGS)
    train(cfg, single, data=cases["tiny_data"](16, 5))

    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    ddp = tmp_path / "ddp"
    # the environment torchrun gives each worker (env:// rendezvous), without the launcher process
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank))
        cmd = [sys.executable, str(script), str(CASES), str(ddp), json.dumps(SETTINGS)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for rank, proc in enumerate(procs):
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        assert f"rank {rank} of 2" in out

    a = load_run_checkpoint(single / "last.pt")["state_dict"]
    b = load_run_checkpoint(ddp / "last.pt")["state_dict"]
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-5, atol=1e-6, msg=key)
    one, two = log_rows(single), log_rows(ddp)
    assert len(one) == len(two) == 2
    for r1, r2 in zip(one, two):
        # validation over all 5 samples exactly once (the padded duplicate dropped)
        assert r2["val_rel_l2"] == pytest.approx(r1["val_rel_l2"], rel=1e-5)
        assert r2["train_loss"] == pytest.approx(r1["train_loss"], rel=1e-5)


def test_single_process_helpers():
    ctx = dist_.Context()
    assert dist_.local_batch_size(8, ctx) == 8
    with pytest.raises(ValueError, match="divisible"):
        dist_.local_batch_size(5, dist_.Context(rank=0, world_size=2))
    values = torch.tensor([0.3, 0.1, 0.2, 0.3])
    indices = torch.tensor([2, 0, 1, 2])  # index 2 twice: a padding duplicate
    torch.testing.assert_close(dist_.gather_per_sample(values, indices, 3, ctx), torch.tensor([0.1, 0.2, 0.3]))
    with pytest.raises(RuntimeError, match="missing"):
        dist_.gather_per_sample(values, indices, 4, ctx)
    with pytest.raises(FileExistsError):
        dist_.run_on_main(lambda: (_ for _ in ()).throw(FileExistsError("x")), ctx)
    assert dist_.run_on_main(lambda: 7, ctx) == 7


# --- multi-node pieces: sharded statistics, lazily read splits, epochs started later, failures ---------------

def test_normalisers_fitted_on_shares_merge_to_the_whole_splits(tmp_path):
    from petrov.datasets import fit_normalizer, generate_dataset
    from petrov.train.datapass import _merged

    path = tmp_path / "b.h5"
    generate_dataset("burgers", path, 13, resolution=32, progress=False)
    whole = fit_normalizer(path, "x", range(13))
    shares = [(k.stop - k.start, fit_normalizer(path, "x", k)) for k in (range(0, 6), range(6, 13))]
    merged = _merged(shares)
    torch.testing.assert_close(merged.mean, whole.mean, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(merged.std, whole.std, rtol=1e-6, atol=1e-7)
    assert merged.periodic == whole.periodic and merged.eps == whole.eps


def test_a_lazily_read_split_copied_to_the_device_equals_the_split_in_memory(tmp_path, monkeypatch, device):
    from petrov.datasets import InputNoise, generate_dataset, open_dataset
    from petrov.train import batches

    path = tmp_path / "b.h5"
    generate_dataset("burgers", path, 9, resolution=32, progress=False)
    monkeypatch.setattr(batches, "RESIDENT_BLOCK", 4)  # blocks of 4, 4 and 1
    lazy = open_dataset(path, indices=range(2, 9), lazy=True)
    memory = open_dataset(path, indices=range(2, 9))
    a, b = batches.ResidentSplit(lazy, device), batches.ResidentSplit(memory, device)
    assert a.x.device.type == device.type
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and list(a.indices) == list(b.indices)
    noise = InputNoise(0.1, 3)
    assert torch.equal(a.noise_for(noise).table, b.noise_for(noise).table)
    on_device = batches.resident(lazy, device)  # on the CPU a lazily read split stays on the file
    assert on_device is None if device.type == "cpu" else torch.equal(on_device.x, b.x)


def test_an_epoch_started_later_leaves_its_first_batches_out_unread(tmp_path, monkeypatch):
    from petrov.datasets import generate_dataset, open_dataset
    from petrov.datasets.storage import StoredData
    from petrov.train.batches import Batches, ResidentSplit

    path = tmp_path / "b.h5"
    generate_dataset("burgers", path, 10, resolution=32, progress=False)
    lazy = open_dataset(path, lazy=True)
    order = dist_.sampler(lazy, dist_.Context(), shuffle=True, seed=4)
    order.set_epoch(2)
    cpu = torch.device("cpu")
    for source in (lazy, ResidentSplit(open_dataset(path), cpu)):
        loader = Batches(source, 3, order, cpu)
        whole = [b.sample_ids.tolist() for b in loader]
        assert [b.sample_ids.tolist() for b in loader.iterate(2)] == whole[2:] and len(whole) == 4
    reads = []
    monkeypatch.setattr(StoredData, "read", lambda self, name, idx, stride, _read=StoredData.read:
                        reads.append(list(idx)) or _read(self, name, idx, stride))
    list(Batches(lazy, 3, order, cpu).iterate(3))
    assert sorted(i for r in reads for i in r) == sorted(2 * list(order)[9:])  # x and y of the last batch only


def test_a_collective_that_failed_because_of_another_process_is_told_from_other_errors():
    from petrov.train.failures import collective_failure

    lost = RuntimeError("[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:65179")
    late = RuntimeError("[../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 6000ms for recv operation")
    assert collective_failure(lost) == "lost" and collective_failure(late) == "timeout"
    assert collective_failure(torch.distributed.DistNetworkError("Failed to recv, got 0 bytes")) == "lost"
    assert collective_failure(ValueError("Connection closed by peer")) is None
    assert collective_failure(RuntimeError("shape mismatch")) is None


STUCK = """
[data]
path = "b.h5"
n_train = 32
n_val = 4
n_test = 4
[model]
name = "fno1d"
[model.options]
width = 8
modes = 4
[optim]
epochs = 50
batch_size = 4
[run]
progress = false
device = "cpu"
collective_timeout_minutes = 0.1
"""


# waits out a collective timeout (tens of seconds): with the slow tests (CI); the fast suite keeps the timeout of
# a world whose other processes never came
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGSTOP")
def test_a_rank_that_stops_answering_is_given_up_after_the_collective_timeout(tmp_path):
    """run.collective_timeout_minutes bounds the wait for a stuck process (torch's default for gloo: 30 min)."""
    from petrov.datasets import generate_dataset

    generate_dataset("burgers", tmp_path / "b.h5", 40, resolution=32, progress=False)
    (tmp_path / "t.toml").write_text(STUCK)
    port, procs = free_port(), []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                   RANK=str(rank), LOCAL_RANK=str(rank))
        cmd = [sys.executable, "-m", "petrov", "train", "t.toml", "--out", "run"]
        procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    try:
        end = time.monotonic() + 240
        while not (tmp_path / "run" / "last.pt").exists():
            assert time.monotonic() < end and procs[0].poll() is None, procs[0].communicate()[1][-2000:]
            time.sleep(0.05)
        os.kill(procs[1].pid, signal.SIGSTOP)
        start = time.monotonic()
        _, err = procs[0].communicate(timeout=60)  # rank 0 ends (the bound guards against a hang)
        seconds = time.monotonic() - start
    finally:
        for proc in procs[::-1]:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    lines = [line for line in err.splitlines() if line.startswith("petrov train:")]
    assert procs[0].returncode == 1 and lines == [
        "petrov train: error: rank 0 of 2 stopped: rank 1 did not answer within run.collective_timeout_minutes = 0.1 "
        "(stuck, stopped or unreachable); continue with the same command and --resume (from run/last.pt)"], err[-2000:]
    assert seconds >= 6  # it waited the 0.1 minutes (a lower bound: a busy machine only lengthens the wait)


def test_a_world_size_without_the_other_processes_waits_the_timeout_then_says_what_to_do(monkeypatch):
    """WORLD_SIZE/RANK set by hand (no torchrun): the rendezvous waits run.collective_timeout_minutes as
    before, then one line names the rank that did not come and the two ways out."""
    port = free_port()
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "0"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", str(port))):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as caught:  # dist_.DistributedSetupError
        dist_.setup("cpu", timeout_minutes=0.02)
    seconds = time.monotonic() - start
    assert str(caught.value) == (
        f"WORLD_SIZE=2 is set (this process: rank 0 of 2): rank 1 did not join at 127.0.0.1:{port} within "
        f"run.collective_timeout_minutes = 0.02; start all 2 processes with torchrun (e.g. torchrun "
        f"--nproc-per-node=2 -m petrov train ...), or unset WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT "
        f"to train in one process")
    # it waited the 0.02 minutes (a lower bound: a busy machine only lengthens the wait)
    assert seconds >= 1 and not torch.distributed.is_initialized()
