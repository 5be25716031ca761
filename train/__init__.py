"""petrov.train: losses, trainer, checkpoints, distributed runs, evaluation and plots."""
from .config import TrainConfig, load_config
from .data import NormalizedOperator
from .trainer import evaluate_relative_l2, load_operator, train

__all__ = ["NormalizedOperator", "TrainConfig", "evaluate_relative_l2", "load_config", "load_operator", "train"]
