"""Data-parallel training with torch.distributed, launched by ``torchrun`` (or nothing).

``torchrun --nproc-per-node=N -m petrov train ...`` sets RANK/WORLD_SIZE/LOCAL_RANK and
MASTER_ADDR/PORT; [`setup`][] then joins the group (``env://``; gloo on CPU, nccl on CUDA).
Several machines: the same command on each, ``torchrun --nnodes M --nproc-per-node N --rdzv-backend
c10d --rdzv-endpoint HOST:PORT -m petrov train ...`` (HOST: one of them, e.g. the first node of the
job).  Run with plain ``python`` the same code sees a world of one process and no collective is called.

Conventions: the batch size in the config is the global batch (each rank takes batch/N samples);
rank 0 alone writes logs and checkpoints; metrics are gathered per sample with their dataset index
so the padding that ``DistributedSampler`` adds to equalise ranks is removed, and every rank gets
the same full result.

Waiting: a collective waits at most ``run.collective_timeout_minutes`` (default 10; torch's own
defaults are 30 minutes for gloo and 10 for NCCL) for the other processes, then fails, and the run
stops with a line saying so (``petrov.train.failures``).  Work that rank 0 does alone for longer
(generating a missing data file) is waited for in a group without that bound (``run_on_main(...,
patient=True)``).  Flags read on the host (the stop request of ``petrov.train.preemption``) travel
through a gloo group on the host, also in an NCCL run, so reading them never waits for the GPU.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler


@dataclass(frozen=True)
class Context:
    """Where this process sits: ``rank`` of ``world_size``; ``device`` it computes on."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``"auto" | "cpu" | "cuda"`` -> a device (``cuda:LOCAL_RANK`` under torchrun)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' requested but CUDA is not available; use --device cpu")
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    if name == "cpu":
        return torch.device("cpu")
    raise ValueError(f"unknown device {name!r}; use auto, cpu or cuda")


DEFAULT_TIMEOUT_MINUTES = 10.0  # run.collective_timeout_minutes
PATIENT = timedelta(days=7)  # rank 0 generating a data file while the others wait
# the groups besides the default one (None: the default one serves)
_groups: dict[str, Any] = {"host": None, "patient": None}


def setup(device: str = "auto", timeout_minutes: float = DEFAULT_TIMEOUT_MINUTES) -> Context:
    """Join the process group if launched by torchrun (collectives wait at most ``timeout_minutes``);
    otherwise a single-process context."""
    world_size, rank, local_rank = (_environment_int(name, default) for name, default in
                                    (("WORLD_SIZE", 1), ("RANK", 0), ("LOCAL_RANK", 0)))
    dev = resolve_device(device, local_rank)
    if world_size > 1:
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        timeout = timedelta(minutes=timeout_minutes)
        if not dist.is_initialized():
            backend = "nccl" if dev.type == "cuda" else "gloo"
            try:
                dist.init_process_group(backend=backend, init_method="env://", timeout=timeout)
            except (ValueError, RuntimeError) as err:
                raise DistributedSetupError(_rendezvous_failure(err, world_size, rank, timeout_minutes)) from err
        if _groups["patient"] is None:  # every rank creates the same groups in the same order
            if dist.get_backend() != "gloo":
                _groups["host"] = dist.new_group(backend="gloo", timeout=timeout)
            _groups["patient"] = dist.new_group(backend="gloo", timeout=PATIENT)
        rank, world_size = dist.get_rank(), dist.get_world_size()
    return Context(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


class DistributedSetupError(RuntimeError):
    """The process group of a distributed run could not be joined (a misused environment: WORLD_SIZE set
    without the other processes or without a rendezvous address); the message says what to do."""


_RENDEZVOUS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _environment_int(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return int(text)
    except ValueError:
        raise DistributedSetupError(f"the environment variable {name}={text!r} is not a whole number; torchrun sets it "
                                    f"for each process it starts: run under torchrun, or unset {name} to train in "
                                    f"one process") from None


def _what_to_do(world_size: int) -> str:
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # started by torchrun: the others are its business
        return "check that torchrun started every process of the run (the same command on every node)"
    return (f"start all {world_size} processes with torchrun (e.g. torchrun --nproc-per-node={world_size} -m petrov "
            f"train ...), or unset {', '.join(n for n in _RENDEZVOUS if n in os.environ)} to train in one process")


def _rendezvous_failure(err: BaseException, world_size: int, rank: int, timeout_minutes: float) -> str:
    """One line for a failed ``init_process_group``: what is wrong with the rendezvous and what to do."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    where = f"WORLD_SIZE={world_size} is set (this process: rank {rank} of {world_size})"
    missing = [n for n in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(n)]
    if missing and "expected, but not set" in text:
        return (f"{where} but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: the processes "
                f"have no address to meet at; {_what_to_do(world_size)}")
    address = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
    waited = f"within run.collective_timeout_minutes = {timeout_minutes:g}"
    joined = re.search(r"(\d+)/(\d+) clients joined", text)
    if joined:  # rank 0, which holds the rendezvous, waited for the others
        n, total = int(joined.group(1)), int(joined.group(2))
        absent = "rank 1 did not join" if total == 2 else f"{total - n} of the other {total - 1} processes did not join"
        return f"{where}: {absent} at {address} {waited}; {_what_to_do(world_size)}"
    if "timed out" in text.lower():  # a rank > 0 that found no rank 0 to join
        return f"{where}: rank 0 could not be reached at {address} {waited}; {_what_to_do(world_size)}"
    return (f"{where}: cannot join the process group at {address} ({type(err).__name__}: {text}); "
            f"{_what_to_do(world_size)}")


def teardown(ctx: Context) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()  # the other groups with it
    _groups.update(host=None, patient=None)


def barrier(ctx: Context) -> None:
    if ctx.distributed:
        dist.barrier()


def wrap_model(model: torch.nn.Module, ctx: Context) -> torch.nn.Module:
    """DDP wrapper in a distributed run (parameters broadcast from rank 0), else the model."""
    if not ctx.distributed:
        return model
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


def sampler(dataset, ctx: Context, shuffle: bool, seed: int = 0) -> DistributedSampler:
    """The sampler for every loader, one process or many: order = f(seed, epoch) only."""
    return DistributedSampler(
        dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=shuffle, seed=seed,
        drop_last=False,
    )


def local_batch_size(global_batch: int, ctx: Context) -> int:
    if global_batch % ctx.world_size:
        raise ValueError(
            f"optim.batch_size {global_batch} must be divisible by the number of processes "
            f"{ctx.world_size} (it is the global batch)"
        )
    return global_batch // ctx.world_size


def all_gather_tensor(value: torch.Tensor, ctx: Context) -> torch.Tensor:
    """``(world_size, *value.shape)``: every rank's ``value``, on every rank (one process: ``value[None]``)."""
    if not ctx.distributed:
        return value.unsqueeze(0)
    out = [torch.empty_like(value) for _ in range(ctx.world_size)]
    dist.all_gather(out, value.contiguous())
    return torch.stack(out)


def gather_per_sample(
    values: torch.Tensor, indices: torch.Tensor, n: int, ctx: Context
) -> torch.Tensor:
    """Assemble per-sample values ``(m, *extra)`` with dataset indices ``(m,)`` into ``(n, *extra)`` on every rank.

    Padding duplicates from the sampler carry an index already seen and are dropped; a missing
    index is an error (never a silently shorter metric).
    """
    values, indices = values.detach().float(), indices.long()
    if ctx.distributed:
        # ranks hold equal counts (the sampler pads), so a tensor all_gather is enough
        vs = [torch.empty_like(values) for _ in range(ctx.world_size)]
        ix = [torch.empty_like(indices) for _ in range(ctx.world_size)]
        dist.all_gather(vs, values)
        dist.all_gather(ix, indices)
        values, indices = torch.cat(vs), torch.cat(ix)
    out = torch.full((n, *values.shape[1:]), float("nan"), dtype=values.dtype, device=values.device)
    seen = torch.zeros(n, dtype=torch.bool, device=values.device)
    out[indices] = values  # duplicates hold the same sample's value
    seen[indices] = True
    if not bool(seen.all()):
        missing = (~seen).nonzero().flatten()[:5].tolist()
        raise RuntimeError(f"per-sample metrics missing for dataset indices {missing}...")
    return out.cpu()


def all_gather_objects(obj: Any, ctx: Context) -> list[Any]:
    """``[obj from rank 0, obj from rank 1, ...]`` on every rank (small picklable objects)."""
    if not ctx.distributed:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, ctx: Context, patient: bool = False) -> Any:
    """Rank 0's ``obj`` on every rank (``patient``: without the collective timeout)."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=_groups["patient"] if patient else None)
    return box[0]


def any_rank(flag: bool, ctx: Context) -> bool:
    """Whether ``flag`` is true on any rank: one collective of one number on the host (no device
    synchronization, also in an NCCL run)."""
    if not ctx.distributed:
        return flag
    value = torch.tensor([int(flag)], dtype=torch.int32)
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=_groups["host"])
    return bool(value.item())


def shard(n: int, ctx: Context) -> slice:
    """This rank's contiguous share of ``n`` items (shares differ by at most one item)."""
    return slice(ctx.rank * n // ctx.world_size, (ctx.rank + 1) * n // ctx.world_size)


_ERRORS = {e.__name__: e for e in (ValueError, KeyError, FileNotFoundError, FileExistsError, RuntimeError)}


def _raise_shared(errors: list, prefix: Callable[[int], str]) -> None:
    """Raise the first of the ranks' ``(type name, message)`` errors (None: no error) on this rank."""
    for rank, info in enumerate(errors):
        if info is not None:
            raise _ERRORS.get(info[0], RuntimeError)(f"{prefix(rank)}{info[1]}")


def _caught(fn: Callable[[], Any]) -> tuple[Any, Exception | None]:
    try:
        return fn(), None
    except Exception as err:  # re-raised by the caller, on every rank
        return None, err


def _info(error: Exception | None) -> tuple[str, str] | None:
    return None if error is None else (type(error).__name__, str(error))


def run_on_main(fn, ctx: Context, patient: bool = False) -> Any:
    """``fn()`` on rank 0 only; if it raises, every rank raises (no rank waits at a barrier forever).
    ``patient``: the others wait for it without the collective timeout (long work, e.g. a generation)."""
    result, error = _caught(fn) if ctx.is_main else (None, None)
    if ctx.distributed:
        info = broadcast_object(_info(error), ctx, patient=patient)
        if error is None:
            _raise_shared([info], lambda rank: "on rank 0: ")
    if error is not None:
        raise error
    return result


def on_every_rank(fn, ctx: Context) -> Any:
    """``fn()`` on every rank (each its own share of some work); if it raises on any rank, every rank
    raises: a rank that failed its own error, the others the lowest failing rank's ("on rank R: ...")."""
    result, error = _caught(fn)
    if ctx.distributed:
        infos = all_gather_objects(_info(error), ctx)
        if error is None:
            _raise_shared(infos, lambda rank: f"on rank {rank}: ")
    if error is not None:
        raise error
    return result
