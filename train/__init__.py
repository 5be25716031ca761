"""petrov.train: losses, trainer, checkpoints, distributed runs, evaluation and plots."""
from .config import TrainConfig, load_config
from .data import NormalizedOperator
from .checkpoint import load_operator
from .evaluate import evaluate_relative_l2
from .inverse import invert
from .trainer import train

__all__ = ["NormalizedOperator", "TrainConfig", "evaluate_relative_l2", "invert", "load_config", "load_operator", "train"]
