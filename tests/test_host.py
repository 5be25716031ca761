"""common.host.to_numpy: the one host transfer, on every device."""
import numpy as np
import pytest
import torch

from petrov.common.host import to_numpy


def test_a_tensor_that_requires_grad_comes_back_detached(device):
    t = torch.arange(6.0, device=device, requires_grad=True).reshape(2, 3) * 2
    a = to_numpy(t)
    assert isinstance(a, np.ndarray) and a.shape == (2, 3) and a.dtype == np.float32
    np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3) * 2)


def test_dtype_casts_and_bfloat16_becomes_float(device):
    t = torch.tensor([1.5, 2.25], device=device, dtype=torch.bfloat16)
    assert to_numpy(t).dtype == np.float32
    assert to_numpy(t, np.float64).dtype == np.float64
    np.testing.assert_array_equal(to_numpy(t, np.float64), [1.5, 2.25])


@pytest.mark.parametrize("value", [[1, 2], 3.0, np.ones(2)])
def test_non_tensors_go_through_asarray(value):
    np.testing.assert_array_equal(to_numpy(value, float), np.asarray(value, dtype=float))
