"""Data parallel training: a 2-process gloo run (torchrun's env:// set-up) equals one process on the
same global batch."""
import json
import os
import socket
import subprocess
import sys
import textwrap
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
