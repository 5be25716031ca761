"""Data-parallel training with torch.distributed, launched by ``torchrun`` (or nothing).

``torchrun --nproc-per-node=N -m petrov train ...`` sets RANK/WORLD_SIZE/LOCAL_RANK and
MASTER_ADDR/PORT; [`setup`][] then joins the group (``env://``; gloo on CPU, nccl on CUDA).
Run with plain ``python`` the same code sees a world of one process and no collective is called.

Conventions: the batch size in the config is the global batch (each rank takes batch/N samples);
rank 0 alone writes logs and checkpoints; metrics are gathered per sample with their dataset index
so the padding that ``DistributedSampler`` adds to equalise ranks is removed, and every rank gets
the same full result.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

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


def setup(device: str = "auto") -> Context:
    """Join the process group if launched by torchrun; otherwise a single-process context."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = resolve_device(device, local_rank)
    if world_size > 1:
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        if not dist.is_initialized():
            backend = "nccl" if dev.type == "cuda" else "gloo"
            dist.init_process_group(backend=backend, init_method="env://")
        rank, world_size = dist.get_rank(), dist.get_world_size()
    return Context(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def teardown(ctx: Context) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


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


def all_sum(value: torch.Tensor, ctx: Context) -> torch.Tensor:
    """Sum of ``value`` over ranks (identity on one process)."""
    if ctx.distributed:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


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


def broadcast_object(obj: Any, ctx: Context) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


_ERRORS = {e.__name__: e for e in (ValueError, KeyError, FileNotFoundError, FileExistsError, RuntimeError)}


def run_on_main(fn, ctx: Context) -> Any:
    """``fn()`` on rank 0 only; if it raises, every rank raises (no rank waits at a barrier forever)."""
    result, error = None, None
    if ctx.is_main:
        try:
            result = fn()
        except Exception as err:  # re-raised below, on every rank
            error = err
    if ctx.distributed:
        info = broadcast_object(None if error is None else (type(error).__name__, str(error)), ctx)
        if error is None and info is not None:
            raise _ERRORS.get(info[0], RuntimeError)(f"on rank 0: {info[1]}")
    if error is not None:
        raise error
    return result
