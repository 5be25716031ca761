"""``python tests/hooked_petrov.py ARGS`` is ``petrov ARGS`` with hooks the process tests set by environment:

- ``READ_LOG``: every read of a data file's samples, and the trainer's phases, logged to ``READ_LOG.RANK``
  (one JSON object a line: ``{"field", "rows"}`` or ``{"phase", "epoch"}``);
- ``FAIL_RANK``, ``FAIL_EPOCH``: that rank raises ``ValueError("an injected failure")`` at that epoch's start;
- ``SIGNAL_AT = "EPOCH:STEP"`` (and ``SIGNAL_RANK``, default 0): after that step that rank sends SIGTERM to its
  own process group (itself, and under torchrun its launcher, which forwards it), as a scheduler does, at a
  known place in the epoch; the time it sent it is written to ``SIGNAL_LOG``.
"""
import json
import os
import signal
import sys
import time

from petrov.cli.main import main
from petrov.datasets.storage import StoredData
from petrov.train import step, testing, trainer

RANK = int(os.environ.get("RANK", "0"))
LOG = open(f"{os.environ['READ_LOG']}.{RANK}", "a") if "READ_LOG" in os.environ else None
SIGNAL_AT = tuple(int(v) for v in os.environ["SIGNAL_AT"].split(":")) if "SIGNAL_AT" in os.environ else None
_original = {"read": StoredData.read, "epoch": trainer.Trainer.train_epoch, "validate": trainer.Trainer.validate,
             "test": testing.run_test, "step": step.Stepper.step}
_epoch = [0]


def mark(**what) -> None:
    if LOG is not None:
        LOG.write(json.dumps(what) + "\n")
        LOG.flush()


def read(self, name, indices, stride, *args, **kwargs):
    mark(field=name, rows=[int(i) for i in indices])
    return _original["read"](self, name, indices, stride, *args, **kwargs)


def train_epoch(self):
    _epoch[0] = self.epoch + 1
    mark(phase="epoch", epoch=_epoch[0])
    if RANK == int(os.environ.get("FAIL_RANK", "-1")) and _epoch[0] == int(os.environ["FAIL_EPOCH"]):
        raise ValueError("an injected failure")
    return _original["epoch"](self)


def validate(self):
    mark(phase="validation")
    return _original["validate"](self)


def run_test(trainer_):
    mark(phase="test")
    return _original["test"](trainer_)


def stepper_step(self, b, number, totals):
    _original["step"](self, b, number, totals)
    if SIGNAL_AT == (_epoch[0], number) and RANK == int(os.environ.get("SIGNAL_RANK", "0")):
        with open(os.environ["SIGNAL_LOG"], "w") as f:
            f.write(repr(time.time()))
        os.killpg(os.getpgid(0), signal.SIGTERM)


StoredData.read, step.Stepper.step = read, stepper_step
trainer.Trainer.train_epoch, trainer.Trainer.validate, trainer.run_test = train_epoch, validate, run_test

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
