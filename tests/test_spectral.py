"""SpectralConv against a dense DFT written out here, on even and odd grids; gradients; errors; the truncated
transforms of the periodic grid maps, eager and compiled."""
from __future__ import annotations

import math

import pytest
import torch

from petrov.operators import SpectralConv
from petrov.grids.fourier_modes import irfft_modes, rfft_modes
from petrov.grids.transfer import band_limit, fourier_resample


def kept_frequencies(m: int, last_axis: bool) -> list[int]:
    """The documented convention: 0..m-1 on the last axis, 0..m-1 then -m..-1 elsewhere."""
    return list(range(m)) if last_axis else list(range(m)) + list(range(-m, 0))


def dense_spectral_conv(x: torch.Tensor, layer: SpectralConv) -> torch.Tensor:
    """Reference in complex128 with explicit DFT matrices (no torch.fft).

    Forward: X[k] = sum_j x[j] exp(-2πi k·j/n) over the full spectrum.  Multiply the kept modes
    by W.  Inverse of the half spectrum of a real signal (what irfftn computes):
    y[j] = (1/N) Re sum_{k_1..k_{d-1} all, k_d = 0..n_d//2} c(k_d) Y[k] exp(+2πi k·j/n),
    c = 1 for k_d = 0 and for the Nyquist k_d = n_d/2 (n_d even), else 2.
    """
    grid = x.shape[2:]
    d = len(grid)
    w = torch.view_as_complex(layer.weight.detach().double().contiguous())  # (ci, co, *mode_shape)
    X = x.to(torch.complex128)
    for axis, n in enumerate(grid):  # full forward DFT, axis by axis
        j = torch.arange(n, dtype=torch.float64)
        F = torch.exp(-2j * math.pi * torch.outer(j, j) / n)  # F[k, j]
        X = torch.movedim(torch.tensordot(X, F, dims=([2 + axis], [1])), -1, 2 + axis)
    half = grid[-1] // 2 + 1
    Y = torch.zeros(x.shape[0], layer.out_channels, *grid[:-1], half, dtype=torch.complex128)
    freq_lists = [kept_frequencies(m, axis == d - 1) for axis, m in enumerate(layer.modes)]
    for idx in torch.cartesian_prod(*[torch.arange(len(f)) for f in freq_lists]).reshape(-1, d).tolist():
        k = tuple(freq_lists[a][i] % grid[a] for a, i in enumerate(idx))
        Y[(slice(None), slice(None), *k)] = torch.einsum(
            "bi,io->bo", X[(slice(None), slice(None), *k)], w[(slice(None), slice(None), *idx)]
        )
    y = Y
    for axis, n in enumerate(grid):  # inverse, axis by axis
        j = torch.arange(n, dtype=torch.float64)
        if axis < d - 1:
            G = torch.exp(2j * math.pi * torch.outer(torch.arange(n, dtype=torch.float64), j) / n)
        else:
            k = torch.arange(half, dtype=torch.float64)
            c = torch.full((half,), 2.0, dtype=torch.float64)
            c[0] = 1.0
            if n % 2 == 0:
                c[-1] = 1.0
            G = c[:, None] * torch.exp(2j * math.pi * torch.outer(k, j) / n)  # G[k, j]
        y = torch.movedim(torch.tensordot(y, G.to(torch.complex128), dims=([2 + axis], [0])), -1, 2 + axis)
    return y.real / math.prod(grid)


@pytest.mark.parametrize("n, modes", [(16, 5), (17, 5), (21, 11), (20, 11), (9, 5)])
def test_1d_matches_dense_dft(n, modes):
    torch.manual_seed(0)
    layer = SpectralConv(3, 2, modes).double()
    with torch.no_grad():  # a generic complex weight (the init is uniform positive)
        layer.weight.normal_()
    x = torch.randn(2, 3, n, dtype=torch.float64)
    torch.testing.assert_close(layer(x), dense_spectral_conv(x, layer), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "grid, modes", [((8, 10), (3, 4)), ((9, 11), (4, 3)), ((7, 6), (3, 4)), ((11, 9), (2, 5))]
)
def test_2d_matches_dense_dft(grid, modes):
    torch.manual_seed(1)
    layer = SpectralConv(2, 3, modes).double()
    with torch.no_grad():
        layer.weight.normal_()
    x = torch.randn(2, 2, *grid, dtype=torch.float64)
    torch.testing.assert_close(layer(x), dense_spectral_conv(x, layer), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("grid, modes", [((16,), (5,)), ((16,), (9,)), ((17,), (9,)), ((8, 10), (3, 6)),
                                         ((9, 11), (4, 3)), ((7, 6, 5), (2, 3, 3))])
def test_the_real_arithmetic_path_is_the_dense_dft_in_values_and_gradients(grid, modes):
    # what a compiled SpectralConv runs (no complex tensors), against the dense reference and the FFT path
    from petrov.operators.spectral import spectral_real

    torch.manual_seed(2)
    layer = SpectralConv(2, 3, modes).double()
    with torch.no_grad():
        layer.weight.normal_()
    x = torch.randn(2, 2, *grid, dtype=torch.float64, requires_grad=True)
    real, fft = spectral_real(x, layer.weight, layer.modes), layer(x)
    torch.testing.assert_close(real, dense_spectral_conv(x.detach(), layer), rtol=1e-10, atol=1e-10)
    g = torch.randn_like(fft)
    for a, b in zip(torch.autograd.grad(real, (x, layer.weight), g), torch.autograd.grad(fft, (x, layer.weight), g)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("modes", [(5,), (4, 3), (2, 3, 2)])
def test_the_mode_product_is_the_complex_product_summed_over_input_channels(modes):
    from petrov.operators.spectral import mode_product

    torch.manual_seed(3)
    z = torch.randn(2, 3, *modes, 2, dtype=torch.float64)
    w = torch.randn(3, 4, *modes, 2, dtype=torch.float64)
    zc, wc = torch.view_as_complex(z), torch.view_as_complex(w)
    want = torch.view_as_real((zc[:, :, None] * wc[None]).sum(1))  # Y_o(k) = sum_i Z_i(k) W_io(k)
    torch.testing.assert_close(mode_product(z, w), want, rtol=1e-13, atol=1e-13)


def test_a_compiled_spectral_conv_holds_no_complex_tensor():
    from torch._dynamo.testing import EagerAndRecordGraphs

    layer = SpectralConv(2, 3, (3, 4))
    backend = EagerAndRecordGraphs()
    x = torch.randn(2, 2, 9, 10)
    torch.testing.assert_close(torch.compile(layer, backend=backend, fullgraph=True)(x), layer(x),
                               rtol=1e-5, atol=1e-6)
    (graph,) = backend.graphs
    values = [n.meta["example_value"] for n in graph.graph.nodes if torch.is_tensor(n.meta.get("example_value"))]
    assert values and not any(v.is_complex() for v in values)


@pytest.mark.parametrize("grid, modes", [((16,), (5,)), ((9, 10), (3, 4)), ((7, 6, 5), (2, 3, 3))])
def test_a_compiled_spectral_conv_takes_one_product_per_transform_and_one_for_the_modes(grid, modes):
    # each complex product one real product (2 x 2 blocks), not four of its real and imaginary parts: on a
    # GPU every product is a kernel of its own, and these are small.  d axes: 1 forward transform of the
    # last axis, d - 1 of the others, the modes, d - 1 and 1 inverse transforms
    import operator

    products = {torch.matmul, operator.matmul, torch.tensordot, torch.einsum, torch.bmm, torch.mm}
    layer = SpectralConv(2, 3, modes)
    backend = record_graphs()
    x = torch.randn(2, 2, *grid)
    torch.testing.assert_close(torch.compile(layer, backend=backend, fullgraph=True)(x), layer(x),
                               rtol=1e-5, atol=1e-6)
    (graph,) = backend.graphs
    assert sum(node.target in products for node in graph.graph.nodes) == 2 * len(grid) + 1


@pytest.mark.parametrize("grid, modes", [((20, 21), (4, 5)), ((33,), (6,))])
def test_the_cpu_takes_the_truncated_dft_where_it_pays_with_the_fft_numbers(monkeypatch, grid, modes):
    # the cheaper path on the CPU (every axis keeping at most a quarter of its frequencies): the same map
    import petrov.operators.spectral as spectral
    from petrov.operators.spectral import spectral_fft, spectral_real, truncated_dft_pays

    cpu = torch.device("cpu")
    assert truncated_dft_pays(cpu, (85, 85), (12, 12)) and truncated_dft_pays(cpu, (8192,), (16,))
    assert not truncated_dft_pays(cpu, (2048,), (1024,)) and not truncated_dft_pays(cpu, (40, 40), (8, 11))
    assert not truncated_dft_pays(torch.device("meta"), (85, 85), (12, 12))  # other devices: the FFT
    torch.manual_seed(3)
    layer = SpectralConv(2, 3, modes, ndim=len(grid)).double()
    x = torch.randn(2, 2, *grid, dtype=torch.float64, requires_grad=True)
    assert truncated_dft_pays(cpu, grid, layer.modes)
    calls = []
    monkeypatch.setattr(spectral, "spectral_real", lambda *args: calls.append(1) or spectral_real(*args))
    out = layer(x)
    assert calls == [1]
    fft = spectral_fft(x, layer.weight, layer.modes)
    torch.testing.assert_close(out, fft, rtol=1e-10, atol=1e-12)
    g = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (x, layer.weight), g), torch.autograd.grad(fft, (x, layer.weight), g)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def record_graphs():
    from torch._dynamo.testing import EagerAndRecordGraphs

    torch._dynamo.reset()
    return EagerAndRecordGraphs()


def holds_complex(backend) -> bool:
    values = [n.meta["example_value"] for g in backend.graphs for n in g.graph.nodes
              if torch.is_tensor(n.meta.get("example_value"))]
    assert values
    return any(v.is_complex() for v in values)


@pytest.mark.parametrize("n, keep", [(9, 1), (9, 5), (10, 3), (10, 6)])
def test_truncated_transforms_are_the_dense_dft_eager_and_compiled(n, keep):
    """``rfft_modes`` / ``irfft_modes`` (FFT when eager, real DFT matrices when compiled) against the
    written-out sums ``U_k = (1/n) Σ_j u_j e^{-2πijk/n}`` and ``u_j = Re Σ_k c_k U_k e^{2πijk/n}``
    (c = 1 at k = 0 and at the Nyquist k = n/2, else 2); the compiled graphs hold no complex tensor."""
    torch.manual_seed(0)
    u = torch.randn(2, 3, n, dtype=torch.float64)
    j, k = torch.arange(n, dtype=torch.float64), torch.arange(keep, dtype=torch.float64)
    phase = torch.exp(-2j * math.pi * torch.outer(j, k) / n)  # (n, keep)
    want = torch.view_as_real((u.to(torch.complex128) @ phase) / n)
    spec = torch.randn(2, 3, keep, 2, dtype=torch.float64)
    c = torch.where((k == 0) | (2 * k == n), 1.0, 2.0)
    want_inverse = (torch.view_as_complex(spec) * c) @ phase.conj().T
    for compile_it in (False, True):
        backend = record_graphs()
        forward, inverse = ((torch.compile(f, backend=backend, fullgraph=True) if compile_it else f)
                            for f in (rfft_modes, irfft_modes))
        torch.testing.assert_close(forward(u, keep), want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(inverse(spec, n), want_inverse.real, rtol=1e-12, atol=1e-12)
        if compile_it:
            assert not holds_complex(backend)


@pytest.mark.parametrize("n, m", [(16, 9), (9, 16), (12, 12)])
def test_fourier_resample_and_band_limit_compile_to_real_graphs_with_the_eager_values(n, m):
    torch.manual_seed(0)
    u = torch.randn(2, 3, n, dtype=torch.float64)
    for f, args in ((fourier_resample, ((m,),)), (band_limit, (3,))):
        backend = record_graphs()
        got = torch.compile(f, backend=backend, fullgraph=True)(u, *args)
        torch.testing.assert_close(got, f(u, *args), rtol=1e-12, atol=1e-12)
        if f is band_limit or n != m:  # fourier_resample to the same size is the identity: no graph
            assert not holds_complex(backend)


@pytest.mark.parametrize("n", [15, 16])
def test_band_limited_input_is_resolution_invariant(n):
    """A signal with frequencies below the kept modes gives the same output at shared points on n and 2n."""
    torch.manual_seed(2)
    layer = SpectralConv(1, 1, (3, 3)).double()
    with torch.no_grad():
        layer.weight.normal_()

    def sample(m):
        t = torch.arange(m, dtype=torch.float64) / m
        X, Y = torch.meshgrid(t, t, indexing="ij")
        f = torch.cos(2 * math.pi * (X + 2 * Y)) + torch.sin(2 * math.pi * (2 * X - Y)) + 0.5
        return f[None, None]

    coarse, fine = layer(sample(n)), layer(sample(2 * n))
    torch.testing.assert_close(fine[..., ::2, ::2], coarse, rtol=1e-10, atol=1e-10)


def test_frequencies_outside_the_modes_are_removed():
    layer = SpectralConv(1, 1, 3).double()
    t = torch.arange(32, dtype=torch.float64) / 32
    high = torch.cos(2 * math.pi * 5 * t)[None, None]
    assert layer(high).abs().max() < 1e-12


def test_gradcheck_float64():
    torch.manual_seed(3)
    layer = SpectralConv(2, 2, (2, 2)).double()
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64, requires_grad=True)
    w = layer.weight.detach().clone().normal_().requires_grad_(True)

    def f(inp, weight):
        return torch.func.functional_call(layer, {"weight": weight}, (inp,))

    assert torch.autograd.gradcheck(f, (x, w))


def test_weight_shape_and_init_scale():
    layer = SpectralConv(4, 5, (3, 6))
    assert layer.weight.shape == (4, 5, 6, 6, 2)
    assert layer.weight.min() >= 0 and layer.weight.max() <= 1 / 20


@pytest.mark.parametrize(
    "grid, modes, match",
    [
        ((10,), 7, "last grid axis"),
        ((9,), 6, "last grid axis"),
        ((9, 16), (5, 3), "grid axis 0"),
        ((8, 6), (4, 5), "last"),
    ],
)
def test_modes_larger_than_grid_raise(grid, modes, match):
    layer = SpectralConv(1, 1, modes)
    with pytest.raises(ValueError, match=match):
        layer(torch.randn(1, 1, *grid))


def test_largest_allowed_modes_work():
    SpectralConv(1, 1, 6)(torch.randn(1, 1, 10))  # 10 // 2 + 1
    SpectralConv(1, 1, (4, 5))(torch.randn(1, 1, 8, 8))  # 2*4 <= 8


def test_bad_input_shape_raises():
    layer = SpectralConv(2, 2, (2, 2))
    with pytest.raises(ValueError, match="2 grid axes"):
        layer(torch.randn(1, 2, 8))
    with pytest.raises(ValueError, match="2 channels"):
        layer(torch.randn(1, 3, 8, 8))
    with pytest.raises(ValueError, match="positive"):
        SpectralConv(1, 1, 0)
