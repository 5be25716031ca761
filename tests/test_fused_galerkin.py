"""The fused Galerkin path (query projection folded into the output one, K, V normalization recomputed
in backward) against the plain composition of torch ops: values, gradients, float64 gradchecks, and
what it keeps for backward.  The comparisons and gradchecks run on every device (the ``device``
fixture: CUDA where there is one, TF32 off)."""
from __future__ import annotations

import pytest
import torch

from petrov.common import dtypes
from petrov.operators import Attention
from petrov.operators.attention import fused
from petrov.operators.attention.fused import Normalized, column_normalized_outer, normalized_outer, outer_blocks
from petrov.operators.attention.norms import build_norm

DT = torch.float64


def _layer(norm, pos_dim, n_heads, d_model=4, head_dim=3):
    layer = Attention(d_model, n_heads=n_heads, head_dim=head_dim, mixer="galerkin", norm=norm, pos_dim=pos_dim)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.5)  # O(1) parameters: the default init is deliberately tiny
    return layer.double()


def _plain(layer: Attention, x, pos, weights):
    """The layer written out: Q, K, V projections, K̃, Ṽ normalized, coordinates concatenated,
    ``z = Q (K̃ᵀ diag(w) Ṽ)`` per head, heads concatenated, output projection."""
    b, n, _ = x.shape
    h, d = layer.n_heads, layer.head_dim
    if weights is None:
        w = torch.full((b, n), 1.0 / n, dtype=x.dtype, device=x.device)
    else:
        w = weights / weights.sum(-1, keepdim=True)
    weights = None if weights is None else w  # the layer normalizes the weights to sum 1
    heads = [p(x).view(b, n, h, d).transpose(1, 2) for p in (layer.q_proj, layer.k_proj, layer.v_proj)]
    q, k, v = (layer.norms[name](t, weights) if name in layer.norms else t for name, t in zip("qkv", heads))
    if pos is not None:
        coords = pos.expand(b, n, -1)[:, None].expand(b, h, n, pos.shape[-1])
        q, k, v = (torch.cat([t, coords], dim=-1) for t in (q, k, v))
    s = torch.einsum("bhni,bn,bhnj->bhij", k, w, v)
    z = (q @ s).transpose(1, 2).reshape(b, n, -1)
    return layer.out_proj(z)


def _pattern(out: torch.Tensor) -> torch.Tensor:
    """A fixed weighting of the output, so every output entry's gradient path is tested."""
    return torch.linspace(-1, 2, out.numel(), dtype=out.dtype, device=out.device).view_as(out)


CASES = [(norm, pos_dim, heads, weighted) for norm in ("layer", "column", None) for pos_dim in (0, 1, 2)
         for heads in (1, 2) for weighted in (False, True)]


@pytest.mark.parametrize("norm, pos_dim, n_heads, weighted", CASES)
def test_fused_layer_matches_plain_composition_in_values_and_gradients(norm, pos_dim, n_heads, weighted, device):
    layer = _layer(norm, pos_dim, n_heads).to(device).train()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 7, 4, generator=g, dtype=DT).to(device)
    pos = torch.rand(2, 7, pos_dim, generator=g, dtype=DT).to(device) if pos_dim else None
    weights = (torch.rand(2, 7, generator=g, dtype=DT) + 0.1).to(device) if weighted else None
    outs, grads = [], []
    for fn in (layer, lambda *a: _plain(layer, *a)):
        layer.zero_grad()
        xi = x.clone().requires_grad_()
        out = fn(xi, pos, weights)
        (out * _pattern(out)).sum().backward()
        outs.append(out.detach())
        grads.append([xi.grad] + [p.grad for p in layer.parameters()])
    torch.testing.assert_close(outs[0], outs[1])
    for (name, _), a, b in zip([("x", None)] + list(layer.named_parameters()), *grads):
        torch.testing.assert_close(a, b, msg=lambda m: f"gradient of {name}: {m}")


@pytest.mark.parametrize("norm", ["layer", "column", None])
@pytest.mark.parametrize("weighted", [False, True])
def test_normalized_outer_passes_gradcheck(norm, weighted, device):
    norm_k, norm_v = (build_norm(norm, 2, 3).to(device, DT) for _ in range(2))
    torch.manual_seed(2)
    for m in (norm_k, norm_v):
        for p in m.parameters():
            p.data.normal_(1.0, 0.5)
    g = torch.Generator().manual_seed(3)
    k = torch.randn(2, 2, 6, 3, generator=g, dtype=DT).to(device).requires_grad_()
    v = torch.randn(2, 2, 6, 3, generator=g, dtype=DT).to(device).requires_grad_()
    pos = torch.rand(2, 6, 1, generator=g, dtype=DT).to(device)
    weights = (torch.rand(2, 6, generator=g, dtype=DT) + 0.1).to(device) if weighted else None
    if weights is not None:
        weights = weights / weights.sum(-1, keepdim=True)
    params = [p for m in (norm_k, norm_v) for p in m.parameters()]

    def outer(k, v, *ps):
        return normalized_outer(Normalized(norm_k, k, norm_k.parameters), Normalized(norm_v, v, norm_v.parameters),
                                pos, weights)

    assert torch.autograd.gradcheck(outer, (k, v, *params))

    # the recompute form: both sides made from one source x through their projections
    x = torch.randn(2, 2, 6, 4, generator=g, dtype=DT).to(device).requires_grad_()
    w_k, w_v = (torch.randn(4, 3, generator=g, dtype=DT).to(device).requires_grad_() for _ in range(2))

    def outer_from_x(x, *ps):
        return normalized_outer(Normalized(lambda x, w: norm_k(x @ w_k, w), x, lambda: [*norm_k.parameters(), w_k]),
                                Normalized(lambda x, w: norm_v(x @ w_v, w), x, lambda: [*norm_v.parameters(), w_v]),
                                pos, weights)

    assert torch.autograd.gradcheck(outer_from_x, (x, *params, w_k, w_v))


def _column_case(pos_dim, n_heads, weighted, seed, device="cpu"):
    """An input ``x: (b, n, m)``, K and V projections and two column norms with O(1) parameters,
    coordinates and weights."""
    norm_k, norm_v = (build_norm("column", n_heads, 3).to(device, DT) for _ in range(2))
    k_proj, v_proj = (torch.nn.Linear(4, n_heads * 3).to(device, DT) for _ in range(2))
    torch.manual_seed(seed)
    for p in [*norm_k.parameters(), *norm_v.parameters(), *k_proj.parameters(), *v_proj.parameters()]:
        p.data.normal_(1.0, 0.5)
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(2, 6, 4, generator=g, dtype=DT) + 3.0).to(device).requires_grad_()  # off-centre on purpose
    pos = torch.rand(2, 6, pos_dim, generator=g, dtype=DT).to(device) if pos_dim else None
    weights = (torch.rand(2, 6, generator=g, dtype=DT) + 0.1).to(device) if weighted else None
    return norm_k, norm_v, k_proj, v_proj, x, pos, None if weights is None else weights / weights.sum(-1, keepdim=True)


COLUMN_CASES = [(pos_dim, heads, weighted) for pos_dim in (0, 1, 2) for heads in (1, 2) for weighted in (False, True)]


def _plain_column_outer(x, k_proj, v_proj, n_heads, norm_k, norm_v, pos, weights):
    """K, V formed, split into heads, normalized column by column, then ``[K̃, pos]ᵀ W [Ṽ, pos]``."""
    kt, vt = (norm(proj(x).view(*x.shape[:2], n_heads, -1).transpose(1, 2), weights)
              for norm, proj in ((norm_k, k_proj), (norm_v, v_proj)))
    return outer_blocks(kt, vt, pos, weights)


@pytest.mark.parametrize("pos_dim, n_heads, weighted", COLUMN_CASES)
def test_column_outer_from_the_input_moments_matches_autograd_of_the_plain_norms(pos_dim, n_heads, weighted,
                                                                                  device):
    norm_k, norm_v, k_proj, v_proj, x, pos, weights = _column_case(pos_dim, n_heads, weighted, seed=10,
                                                                   device=device)
    args = (x, k_proj, v_proj, n_heads, norm_k, norm_v, pos, weights)
    params = [x, *norm_k.parameters(), *norm_v.parameters(), *k_proj.parameters(), *v_proj.parameters()]
    results = []
    for fn in (column_normalized_outer, _plain_column_outer):
        out = fn(*args)
        grads = torch.autograd.grad((out * _pattern(out)).sum(), params)
        results.append((out, grads))
    torch.testing.assert_close(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b)
    # the projections' biases cancel in the centring: their gradient is zero, but it is there (DDP)
    for grad in results[0][1][-3::2]:
        assert grad is not None and not grad.any()


@pytest.mark.parametrize("pos_dim, n_heads, weighted", COLUMN_CASES)
def test_column_outer_from_the_input_moments_passes_gradcheck(pos_dim, n_heads, weighted, device):
    norm_k, norm_v, k_proj, v_proj, x, pos, weights = _column_case(pos_dim, n_heads, weighted, seed=11,
                                                                   device=device)

    def outer(x, *ps):
        return column_normalized_outer(x, k_proj, v_proj, n_heads, norm_k, norm_v, pos, weights)

    assert torch.autograd.gradcheck(outer, (x, *norm_k.parameters(), *norm_v.parameters(), k_proj.weight,
                                            v_proj.weight))


def test_column_outer_from_the_input_moments_keeps_the_digits_of_a_column_that_cancels():
    # channels 0 and 1 nearly equal (spread 10, difference 1e-2) around a mean of 100, and a K column
    # that is their difference: in moment form that column's norm is a difference of G's entries, which
    # float64 moments keep; float32 moments would lose ~(10 / 1e-2)² roundoffs, forming K in float32 one
    norm_k, norm_v, k_proj, v_proj, _, _, _ = _column_case(1, 2, True, seed=12)
    g = torch.Generator().manual_seed(12)
    z = torch.randn(2, 500, 1, generator=g, dtype=DT) * 10.0
    x = 100.0 + torch.cat([z + 1e-2 * torch.randn(2, 500, 1, generator=g, dtype=DT), z,
                           torch.randn(2, 500, 2, generator=g, dtype=DT)], dim=-1)
    pos = torch.rand(2, 500, 1, generator=g, dtype=DT)
    weights = torch.rand(2, 500, generator=g, dtype=DT) + 0.1
    weights = weights / weights.sum(-1, keepdim=True)
    modules = (k_proj, v_proj, norm_k, norm_v)
    with torch.no_grad():
        k_proj.weight[0] = torch.tensor([1.0, -1.0, 0.0, 0.0], dtype=DT)
        args = [t.float() for t in (x, pos, weights)]  # the float32 problem, solved exactly in float64 first
        for m in modules:
            m.float().double()
        exact = _plain_column_outer(args[0].double(), k_proj, v_proj, 2, norm_k, norm_v, args[1].double(),
                                    args[2].double())
        for m in modules:
            m.float()
        errors = [((fn(args[0], k_proj, v_proj, 2, norm_k, norm_v, *args[1:]).double() - exact).norm()
                   / exact.norm()).item() for fn in (column_normalized_outer, _plain_column_outer)]
    assert errors[0] < 1e-6 and errors[0] < errors[1] / 10, errors


@pytest.mark.parametrize("norm", ["layer", "column"])
def test_fused_layer_passes_gradcheck_in_all_parameters(norm):
    layer = _layer(norm, 1, 2).train()
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5, 4, generator=g, dtype=DT, requires_grad=True)
    pos = torch.rand(2, 5, 1, generator=g, dtype=DT)
    names, params = zip(*layer.named_parameters())

    def f(x, *ps):
        return torch.func.functional_call(layer, dict(zip(names, ps)), (x, pos))

    assert torch.autograd.gradcheck(f, (x, *[p.detach().clone().requires_grad_() for p in params]))


@pytest.mark.parametrize("norm, slow_float64", [("layer", False), ("column", False), ("column", True)])
def test_fused_layer_keeps_only_its_input_and_the_raw_keys_and_values_for_backward(norm, slow_float64,
                                                                                   monkeypatch):
    if slow_float64:  # as on a consumer GPU: the moments would be float64, so K and V are formed instead
        monkeypatch.setattr(fused, "fast_float64", lambda device: False)
    layer = _layer(norm, 1, 1, d_model=8, head_dim=8).float().train()
    b, n = 2, 64
    x = torch.randn(b, n, 8, requires_grad=True)
    pos = torch.rand(b, n, 1)
    point_sized = set()

    def pack(t):
        if t.numel() >= b * n * 8:
            point_sized.add((t.untyped_storage().data_ptr(), tuple(t.shape)))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = layer(x, pos)
    out.sum().backward()
    # x (shared by the K, V projections and the folded output), raw K and raw V; no normalized or
    # coordinate-concatenated copies.  Two column norms: x alone (S comes from x's moments)
    assert len({ptr for ptr, _ in point_sized}) == (1 if norm == "column" and not slow_float64 else 3), point_sized


def test_column_norms_take_the_generic_path_where_float64_is_slow_with_the_same_values(monkeypatch):
    layer = _layer("column", 2, 2).train()
    g = torch.Generator().manual_seed(13)
    x = torch.randn(2, 9, 4, generator=g, dtype=DT, requires_grad=True)
    pos = torch.rand(2, 9, 2, generator=g, dtype=DT)
    results = []
    for fast in (True, False):
        monkeypatch.setattr(fused, "fast_float64", lambda device, fast=fast: fast)
        out = layer(x, pos)
        results.append((out, *torch.autograd.grad((out * _pattern(out)).sum(), [x, layer.k_proj.weight])))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_column_norms_take_the_moment_form_under_autocast_close_to_float64(dtype, monkeypatch):
    calls = []
    moments = fused.centred_moments
    monkeypatch.setattr(fused, "centred_moments", lambda *args: calls.append(args[0].dtype) or moments(*args))
    layer = _layer("column", 1, 2, d_model=8, head_dim=4).train()
    g = torch.Generator().manual_seed(14)
    x = torch.randn(2, 256, 8, generator=g, dtype=DT)
    pos = torch.rand(2, 256, 1, generator=g, dtype=DT)
    exact = layer(x, pos)  # float64: the moment form, checked against the plain layer above
    layer.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x.to(dtype).requires_grad_(), pos.float())
    out.float().sum().backward()  # through the moments' backward: float64 gradients back to x's dtype
    assert calls == [DT, dtype]
    assert out.dtype == torch.bfloat16  # the n-sized product in autocast's dtype
    # measured 3.0e-3 for either input (the generic path: 3.1e-3): the bfloat16 rounding of x and A
    assert ((out.double() - exact).norm() / exact.norm()).item() < 1e-2


@pytest.mark.parametrize("capability, hip, fast", [((9, 0), None, True), ((8, 0), None, True),
                                                   ((10, 0), None, True), ((8, 9), None, False),
                                                   ((8, 6), None, False), ((12, 0), None, False),
                                                   ((7, 5), None, False), ((9, 0), "6.2", False)])
def test_float64_counts_as_fast_on_the_cpu_and_on_datacenter_gpus_only(capability, hip, fast, monkeypatch):
    monkeypatch.setattr(dtypes, "_fast_float64_gpus", {})
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: capability)
    monkeypatch.setattr(torch.version, "hip", hip)
    assert dtypes.fast_float64(torch.device("cuda", 0)) is fast
    assert dtypes.fast_float64(torch.device("cpu")) and not dtypes.fast_float64(torch.device("mps"))


def test_compiled_layer_keeps_only_its_input_and_the_raw_keys_and_values_for_backward():
    # under torch.compile the fused Function gives way to plain autograd (dynamo cannot trace its backward);
    # a checkpoint keeps what the Function keeps.  Partitioned as inductor partitions (min-cut), the
    # forward graph's point-sized outputs besides the layer's output are what backward keeps
    import torch._dynamo
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    layer = _layer("layer", 1, 1, d_model=8, head_dim=8).float().train()
    b, n = 2, 64
    x = torch.randn(b, n, 8, requires_grad=True)
    pos = torch.rand(b, n, 1)
    kept = set()

    def forward_compiler(gm, example_inputs):
        def run(*args):
            outputs = gm(*args)
            for t in outputs[1:]:
                if isinstance(t, torch.Tensor) and t.numel() >= b * n * 8:
                    kept.add(t.untyped_storage().data_ptr())
            return outputs
        return make_boxed_func(run)

    backend = aot_autograd(fw_compiler=forward_compiler, bw_compiler=lambda gm, _: make_boxed_func(gm.forward),
                           partition_fn=min_cut_rematerialization_partition)
    torch._dynamo.reset()
    try:
        out = torch.compile(layer, backend=backend, fullgraph=True)(x, pos)
        out.sum().backward()
    finally:
        torch._dynamo.reset()
    assert x.grad is not None and len(kept) == 3, kept  # x, raw K, raw V: K̃, Ṽ are recomputed in backward


def test_unfused_paths_still_used_for_dropout_and_16_bit_inputs_without_autocast():
    layer = Attention(4, n_heads=1, mixer="galerkin", norm="layer", pos_dim=1, dropout=0.5).train()
    x, pos = torch.randn(1, 6, 4), torch.rand(1, 6, 1)
    assert not layer._fusable(x, pos, None)
    layer.eval()
    assert layer._fusable(x, pos, None)
    assert not layer._fusable(x.bfloat16(), pos, None)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # float32 sums, bf16 products (test_amp.py)
        assert layer._fusable(x, pos, None) and layer._fusable(x.bfloat16(), pos, None)
    assert not layer._fusable(x, pos.requires_grad_(), None)


def _encoder_layer(mixer, dropout=0.0, **kw):
    from petrov.operators.blocks import EncoderConfig, EncoderLayer
    torch.manual_seed(5)
    layer = EncoderLayer(EncoderConfig(d_model=6, n_heads=2, head_dim=3, mixer=mixer, norm="layer",
                                       dim_feedforward=10, dropout=dropout, **kw), pos_dim=1)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.5)
    return layer.double().train()


@pytest.mark.parametrize("mixer, dropout", [("galerkin", 0.0), ("linear", 0.0), ("galerkin", 0.3)])
def test_recomputing_encoder_layer_matches_the_plain_one_in_values_and_gradients(mixer, dropout, device):
    layer = _encoder_layer(mixer, dropout).to(device)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 9, 6, generator=g, dtype=DT).to(device)
    pos = torch.rand(2, 9, 1, generator=g, dtype=DT).to(device)
    outs, grads = [], []
    for recompute in (False, True):
        layer.zero_grad()
        torch.manual_seed(7)  # the same dropout masks on both passes
        xi = x.clone().requires_grad_()
        out = layer(xi, pos, recompute=recompute)
        (out * _pattern(out)).sum().backward()
        outs.append(out.detach())
        grads.append([xi.grad] + [p.grad for p in layer.parameters()])
    torch.testing.assert_close(outs[0], outs[1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_recomputed_ffn_passes_gradcheck(device):
    from petrov.operators.blocks import FeedForward
    ffn = FeedForward(4, 7, act="gelu").to(device, DT)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 5, 4, generator=g, dtype=DT).to(device).requires_grad_()
    names, params = zip(*ffn.named_parameters())

    def f(x, *ps):
        return torch.func.functional_call(ffn, dict(zip(names, ps)), (x,), {"recompute": True})

    assert torch.autograd.gradcheck(f, (x, *[p.detach().clone().requires_grad_() for p in params]))


def test_recomputing_encoder_layer_keeps_only_the_inputs_of_its_two_branches():
    layer = _encoder_layer("galerkin").float()
    b, n = 2, 64
    x = torch.randn(b, n, 6, requires_grad=True)
    pos = torch.rand(b, n, 1)
    point_sized = set()

    def pack(t):
        if t.numel() >= b * n * 6:
            point_sized.add((t.untyped_storage().data_ptr(), tuple(t.shape)))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = layer(x, pos, recompute=True)
    out.sum().backward()  # (what backward recomputes is saved there, briefly, not counted)
    assert len({ptr for ptr, _ in point_sized}) == 2, point_sized  # x and x + Attn(x)


def test_the_float64_rule_is_a_constant_in_a_whole_compiled_graph(monkeypatch):
    import torch._dynamo

    def plain():
        return 0

    marked = torch.compiler.assume_constant_result(lambda: 0)
    assert vars(dtypes.constant_in_compiled_graphs(plain)) == vars(marked)  # marked as torch marks
    monkeypatch.setattr(dtypes, "_fast_float64_gpus", {})
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: (8, 9))

    def f(x):
        return x * 2 if dtypes.fast_float64(torch.device("cuda", 0)) else x - 1

    torch._dynamo.reset()
    try:
        assert torch.compile(f, backend="eager", fullgraph=True)(torch.ones(2)).tolist() == [0.0, 0.0]
    finally:
        torch._dynamo.reset()
