"""petrov.train: training configs, the training loop, checkpoints and the trained operator.

- :mod:`.config`: ``TrainConfig`` and its tables, TOML presets (``configs/``), ``--set`` overrides;
- :mod:`.data`: splits, normalisers, the input noise and batches of a data file;
- :mod:`.trainer`: ``train`` (one run into a run directory, resumable);
- :mod:`.losses`, :mod:`.rollout`: the loss and the training modes (direct, marching);
- :mod:`.metrics`: per-sample test errors and the metrics files (validation, test, ``petrov evaluate``);
- :mod:`.operator`: ``NormalizedOperator``, what ``load_operator`` gives back for inference;
- :mod:`.checkpoint`: run checkpoints; :mod:`.distributed`: torchrun.
"""
import warnings

from .checkpoint import load_operator
from .config import TrainConfig, load_config
from .metrics import evaluate_relative_l2
from .operator import NormalizedOperator
from .trainer import train

__all__ = ["NormalizedOperator", "TrainConfig", "evaluate_relative_l2", "load_config", "load_operator", "train"]


def __getattr__(name: str):
    # petrov 0.1 exported the inverse problems from here; they moved to petrov.inverse
    if name == "invert":
        warnings.warn("petrov.train.invert moved to petrov.inverse.invert; import it from there (the old "
                      "name goes away in the next release)", DeprecationWarning, stacklevel=2)
        from petrov.inverse import invert

        return invert
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
