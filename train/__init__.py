"""petrov.train: training configs, the training loop, checkpoints and the trained operator.

- [`config`][]: ``TrainConfig`` and its tables, TOML presets (``configs/``), ``--set`` overrides;
- [`data`][]: splits, normalisers, the input noise and batches of a data file;
- [`trainer`][]: ``train`` (one run into a run directory, resumable), built from ``step`` (the sync-free
  training step and its batch loss, what a compiled run compiles), ``batches`` (batches on the device),
  ``compilation`` (``run.compile``), ``precision`` (``run.amp``, ``run.matmul_precision``), ``timing`` and
  ``planning`` (clocks, warm-up, time budgets), ``optimization``, ``runlog`` and ``memory`` (out-of-memory
  advice);
- [`losses`][], [`rollout`][]: the loss and the training modes (direct, marching);
- [`metrics`][]: per-sample test errors and the metrics files (validation, test, ``petrov evaluate``);
- [`operator`][]: ``NormalizedOperator``, what ``load_operator`` gives back for inference;
- [`checkpoint`][]: run checkpoints; [`distributed`][]: torchrun.
"""
from .checkpoint import load_operator
from .config import load_config
from .config_tables import TrainConfig
from .metrics import evaluate_relative_l2
from .operator import NormalizedOperator
from .trainer import train

__all__ = ["NormalizedOperator", "TrainConfig", "evaluate_relative_l2", "load_config", "load_operator", "train"]
