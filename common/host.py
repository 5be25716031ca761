"""The one way a tensor that may live on a device comes back to the host.

Every conversion of a model output, a normalizer statistic or a metric to numpy (plots, metrics files,
inverse solvers, HDF5 writes) goes through [`to_numpy`][]: ``Tensor.numpy()`` on a CUDA tensor raises
"can't convert cuda:0 device type tensor to numpy", and on a tensor that requires grad it raises too.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch


def to_numpy(value: Any, dtype: Any = None) -> np.ndarray:
    """``value`` as a numpy array on the host: a tensor is detached and copied from its device (a CPU
    tensor shares its memory where ``dtype`` does not ask for a cast); anything else goes through
    ``np.asarray``. ``dtype``: the numpy dtype wanted (``None``: the tensor's own)."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.dtype == torch.bfloat16:  # numpy has no bfloat16
            value = value.float()
        value = value.cpu().numpy()
    return np.asarray(value, dtype=dtype)
