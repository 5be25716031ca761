"""What a run records: one row per epoch (``log.csv``, ``log.jsonl``, TensorBoard), its result, and the
files of a run directory (``RUN_FILES``; ``check_run_dir``: what may be done with a folder).

``log.jsonl`` and ``log.csv`` are rewritten whole, atomically, after every epoch (before the checkpoint,
so a resumed run drops the rows its checkpoint does not cover); ``seconds`` is the epoch's wall-clock
time with the device synchronized (``petrov.train.timing``).
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict as dc_asdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.files import atomic_write, write_csv
from ..common.outputs import MANIFEST, check_outputs, read_manifest

log = logging.getLogger(__name__)

# what `petrov train` writes into a run directory (the output-folder rule: petrov.common.outputs)
RUN_FILES = ("config.json", "log.csv", "log.jsonl", "last.pt", "best.pt", "metrics.json", "metrics.csv", "tensorboard")


@dataclass
class EpochRecord:
    epoch: int
    train_loss: float
    val_rel_l2: float
    lr: float
    seconds: float
    best: bool


@dataclass
class TrainResult:
    run_dir: Path
    epochs_completed: float  # a last epoch ended early (optim.epochs with a fraction) counts as its fraction
    best_epoch: int
    best_val_rel_l2: float
    stopped: str  # "completed" | "time budget" | "callback" (a Ctrl-C or SIGTERM raises instead)
    test: list[dict[str, Any]] = field(default_factory=list)  # metrics rows, one per resolution
    train_seconds: float = 0.0  # wall-clock of the epochs run by this call (checkpoints included), synchronized
    epochs_scheduled: float = 0.0  # the schedule's epochs at the end: optim.epochs, or as the time budget refitted them


def summary_writer() -> type:
    """torch's tensorboard ``SummaryWriter`` (``run.tensorboard``); a ValueError saying what to install
    where the tensorboard package is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("run.tensorboard = true needs the tensorboard package "
                         "(pip install tensorboard), or set run.tensorboard = false") from None
    return SummaryWriter


class RunLog:
    """Per-epoch rows in ``log.csv`` and ``log.jsonl`` (rewritten atomically), plus TensorBoard."""

    FIELDS = ["epoch", "train_loss", "val_rel_l2", "lr", "seconds", "best"]

    def __init__(self, run_dir: Path, keep_until: int, tensorboard: bool):
        self.run_dir = run_dir
        self.rows: list[dict[str, Any]] = []
        jsonl = run_dir / "log.jsonl"
        if keep_until > 0 and jsonl.is_file():  # resume: drop epochs the checkpoint does not have
            rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
            self.rows = [r for r in rows if r["epoch"] <= keep_until]
        self.writer = None
        if tensorboard:
            self.writer = summary_writer()(str(run_dir / "tensorboard"), purge_step=keep_until + 1)

    def append(self, record: EpochRecord) -> None:
        row = dc_asdict(record)
        self.rows.append(row)
        atomic_write(self.run_dir / "log.jsonl", "".join(json.dumps(r) + "\n" for r in self.rows))
        write_csv(self.run_dir / "log.csv", self.rows, self.FIELDS)
        if self.writer is not None:
            for key in ("train_loss", "val_rel_l2", "lr", "seconds"):
                self.writer.add_scalar(key, row[key], record.epoch)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def run_outputs(run_dir: Path) -> list[str]:
    """The outputs of an earlier run in ``run_dir`` that are worth keeping: ``best.pt``, ``metrics.json`` and a
    ``log.jsonl`` of more than one epoch, as far as the folder's manifest says the training wrote them (a
    user's file of the same name is theirs: the output rule speaks of it).  A run killed before its first
    checkpoint has none of them: its log may hold the first epoch's row, written just before that checkpoint."""
    owners = read_manifest(run_dir)
    found = [name for name in ("best.pt", "metrics.json")
             if (run_dir / name).exists() and owners.get(name) == "train"]
    log_jsonl = run_dir / "log.jsonl"
    try:
        if owners.get("log.jsonl") == "train" and log_jsonl.is_file() and sum(
                1 for line in log_jsonl.read_text(errors="replace").splitlines() if line.strip()) > 1:
            found.append("log.jsonl")
    except OSError:
        found.append("log.jsonl")
    return found


def resume_or_start(run_dir: Path, resume: bool, overwrite: bool = False) -> bool:
    """``resume``, unless there is nothing to resume (no ``run_dir/last.pt``): then the run starts, with a
    notice -- a job script that always passes ``--resume`` starts its run the first time and continues it
    after every requeue.  A run without ``last.pt`` that has outputs ([`run_outputs`][]) is not started
    over (FileNotFoundError)."""
    if resume and not overwrite and not (run_dir / "last.pt").exists():
        kept = run_outputs(run_dir)
        if kept:
            raise FileNotFoundError(
                f"cannot resume {str(run_dir)!r}: its last.pt is missing, though the run has {', '.join(kept)}; "
                f"to train on from its best.pt use --continue {run_dir} --out NEW_DIR, or pass --overwrite "
                f"(instead of --resume) to replace the run")
        log.info("nothing to resume in %s (no last.pt): starting the run", run_dir)
        return False
    return resume


def check_run_dir(run_dir: Path, resume: bool, overwrite: bool = False) -> None:
    """What may be done with ``run_dir``: resume needs its ``last.pt``, a new run must not find one
    (unless ``overwrite``), and the output-folder rule must allow it."""
    if resume and overwrite:
        raise ValueError("choose one of resume (--resume: continue the run) and overwrite (--overwrite: replace it)")
    if resume:
        if not (run_dir / "last.pt").is_file():
            raise FileNotFoundError(
                f"cannot resume: {run_dir / 'last.pt'} does not exist (no completed epoch in "
                f"{str(run_dir)!r}); start the run without --resume"
            )
    # config.json alone (no last.pt, no outputs) is a run killed before its first epoch ended: nothing to
    # keep, so it starts again from scratch
    elif (run_dir / "last.pt").exists() or run_outputs(run_dir):
        if not overwrite:
            if (run_dir / "last.pt").exists():
                raise FileExistsError(
                    f"{str(run_dir)!r} already holds a run; pass --resume to continue it, --overwrite to replace "
                    f"it, or choose another --out"
                )
            raise FileExistsError(
                f"{str(run_dir)!r} already holds a run ({', '.join(run_outputs(run_dir))}; no last.pt to resume); "
                f"pass --overwrite to replace it, --continue {run_dir} --out NEW_DIR to train on from its best.pt, "
                f"or choose another --out"
            )
        nested = sorted(p.name for p in run_dir.iterdir() if p.is_dir() and (p / MANIFEST).is_file())
        if nested:  # e.g. RUN/eval: the results of the run being replaced would stay beside the new one
            raise FileExistsError(f"{str(run_dir)!r} holds outputs of other commands for the run being replaced "
                                  f"({', '.join(nested)}); remove them first, or choose another --out")
    check_outputs(run_dir, "train", RUN_FILES, overwrite=overwrite, what="run directory")


__all__ = ["EpochRecord", "RUN_FILES", "RunLog", "TrainResult", "check_run_dir", "resume_or_start", "run_outputs"]
