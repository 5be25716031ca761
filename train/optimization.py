"""The optimizer and its schedule: Adam/AdamW and OneCycleLR stepped once per (global) batch.

The OneCycle warm-up starts at ``lr/div_factor`` and lasts at least ``optim.min_warmup_steps``
batches (at most 90% of the run), so a schedule compressed into few epochs does not ramp to the maximum
lr within a handful of steps.  Seeding: ``seed_all`` seeds torch, numpy and Python's ``random``.
"""
from __future__ import annotations

import random

import numpy as np
import torch

from .config import TrainConfig


def seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def make_optimizer(cfg: TrainConfig, params) -> torch.optim.Optimizer:
    o = cfg.optim
    cls = torch.optim.AdamW if o.optimizer == "adamw" else torch.optim.Adam
    params = list(params)
    # torch's fused kernel (one pass over all tensors) where it has one: the same update, on a CPU ~5x
    # faster than the default loop over the tensors (8.9 -> 1.7 ms a step for darcy-mesh-quick's 70)
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params) or None
    return cls(params, lr=o.lr, weight_decay=o.weight_decay, fused=fused)


def make_scheduler(cfg: TrainConfig, optimizer: torch.optim.Optimizer, steps_per_epoch: int):
    o = cfg.optim
    total = o.epochs * steps_per_epoch
    pct = min(max(o.pct_start, o.min_warmup_steps / total), 0.9)
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=o.lr, total_steps=total, pct_start=pct, div_factor=o.div_factor,
        final_div_factor=o.final_div_factor,
    )


__all__ = ["make_optimizer", "make_scheduler", "seed_all"]
