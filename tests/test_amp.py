"""bfloat16 autocast on the CPU (``run.amp``): every model and mixer trains under it close to float32,
the sums over the points, the normalizations and the FFTs stay float32, and an amp run resumes."""
import importlib.util
import math
from pathlib import Path

import pytest
import torch

from petrov.datasets import generate_dataset
from petrov.operators import build_model, list_mixers
from petrov.operators.attention import Attention
from petrov.operators.attention.mixers import build_mixer
from petrov.operators.attention.norms import build_norm
from petrov.operators.blocks import FullPrecisionLinear, pointwise
from petrov.operators.spectral import SpectralConv
from petrov.train.checkpoint import load_run_checkpoint
from petrov.train.config import config_from_dict
from petrov.train.trainer import train

# the tiny model configurations of test_models.py
_spec = importlib.util.spec_from_file_location("_model_cases", Path(__file__).with_name("test_models.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

BF16 = dict(device_type="cpu", dtype=torch.bfloat16)
# bfloat16 keeps 8 significant bits (unit roundoff 2^-8 ~ 4e-3).  Measured on the cases below
# (torch 2.13 CPU, relative L2 from float32): model outputs 7.5e-5 .. 3.6e-3, all parameter
# gradients together 3.8e-4 .. 9.3e-3 (marching1d).
OUTPUT_RTOL = 2e-2
GRAD_RTOL = 5e-2
FLOAT32_RTOL = 1e-5  # measured 1.2e-6 for the 2^14-point Galerkin sum; rounded to bfloat16: 1.3e-3


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm())


MODEL_CASES = [(name, {}) for name in sorted(cases.TINY)] + [("galerkin1d", {"mixer": m}) for m in list_mixers()]


@pytest.mark.parametrize("out_features, bias", [(1, True), (1, False), (3, True)])
def test_the_full_precision_head_is_nn_linear_in_values_and_gradients(out_features, bias):
    torch.manual_seed(0)
    head = FullPrecisionLinear(5, out_features, bias=bias).double()
    plain = torch.nn.Linear(5, out_features, bias=bias).double()
    plain.load_state_dict(head.state_dict())
    x = torch.randn(2, 7, 3, 5, dtype=torch.float64, requires_grad=True)
    outputs = [layer(x) for layer in (head, plain)]
    assert outputs[0].shape == (2, 7, 3, out_features)
    grads = [torch.autograd.grad(out.sin().sum(), [x, *layer.parameters()])
             for out, layer in zip(outputs, (head, plain))]
    torch.testing.assert_close(outputs[0], outputs[1], rtol=1e-13, atol=1e-13)
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    with torch.autocast(**BF16):
        assert head.float()(x.float()).dtype == torch.float32
        # on a channels-first grid too (the spectral models' heads)
        assert pointwise(head, x.float().movedim(-1, 1)).dtype == torch.float32


def _output_and_grads(model, x):
    model.zero_grad(set_to_none=True)
    out = model(x)
    out.float().square().mean().backward()
    return out, {k: p.grad for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name, extra", MODEL_CASES, ids=[f"{n}-{e.get('mixer', '')}" for n, e in MODEL_CASES])
def test_forward_and_backward_under_bf16_autocast_close_to_float32(name, extra):
    torch.set_num_threads(1)
    config, shape, (n, _) = cases.TINY[name]
    torch.manual_seed(0)
    model = build_model(name, **dict(config, **extra)).train()  # training paths (no dropout in these)
    x = torch.randn(shape(n))
    ref, ref_grads = _output_and_grads(model, x)
    with torch.autocast(**BF16):
        out, grads = _output_and_grads(model, x)
    assert out.dtype == torch.float32  # the model's output head runs in float32
    assert torch.isfinite(out).all()
    assert rel(out, ref) < OUTPUT_RTOL
    assert grads.keys() == ref_grads.keys()
    for key, g in grads.items():
        assert g.dtype == torch.float32 and torch.isfinite(g).all(), key
    flat = lambda gs: torch.cat([g.flatten() for g in gs.values()])  # noqa: E731
    assert rel(flat(grads), flat(ref_grads)) < GRAD_RTOL


def _points(n, d, seed=0, offset=0.0):
    g = torch.Generator().manual_seed(seed)
    return (offset + torch.randn(1, 2, n, d, generator=g)).bfloat16()  # what a bf16 projection hands on


def test_galerkin_sum_over_the_points_is_float32_under_autocast():
    n, d = 2**14, 8
    k, v = _points(n, d, seed=0), _points(n, d, seed=1)
    exact = k.double().transpose(-1, -2) @ v.double() / n  # naive float64 quadrature of the same inputs
    mixer = build_mixer("galerkin", d, 2)
    with torch.autocast(**BF16):
        kv = mixer.matrix(k, v)
        plain = k.transpose(-1, -2) @ v / n  # what autocast alone would compute
    assert kv.dtype == torch.float32
    assert rel(kv, exact) < FLOAT32_RTOL < rel(plain, exact)  # (the check tells the two apart)


def test_galerkin_sum_gradient_under_autocast_matches_the_formula():
    n, d = 256, 8
    k, v = (_points(n, d, seed=s).float().requires_grad_() for s in (0, 1))
    g = torch.randn(1, 2, d, d, generator=torch.Generator().manual_seed(2))
    with torch.autocast(**BF16):
        kv = build_mixer("galerkin", d, 2).matrix(k, v)
    grad_k, grad_v = torch.autograd.grad(kv, (k, v), g)
    # d<G, KᵀV/n>/dK = V Gᵀ / n and /dV = K G / n (point-wise products: bfloat16 under autocast,
    # measured 2.2e-3 from float64)
    exact_k = v.double() @ g.double().transpose(-1, -2) / n
    exact_v = k.double() @ g.double() / n
    assert grad_k.dtype == grad_v.dtype == torch.float32
    assert rel(grad_k, exact_k) < OUTPUT_RTOL and rel(grad_v, exact_v) < OUTPUT_RTOL


def _spy_on_galerkin_sums(monkeypatch) -> list[dict]:
    """Record every Galerkin sum over the points -- fused (``outer_blocks``), in moment form
    (``centred_moments``: the sums' dtypes only, its input is the layer's) or not (``weighted_outer``):
    autocast state, dtypes, the coordinates and weights that enter it."""
    galerkin = importlib.import_module("petrov.operators.attention.kernels")  # the Galerkin mixer sums there
    fused = importlib.import_module("petrov.operators.attention.fused")
    seen = []

    def record(a, c, out, coords, weights):
        seen.append(dict(autocast=torch.is_autocast_enabled("cpu"), dtypes={a.dtype, c.dtype, out.dtype},
                         coords=coords, weights=weights))
        return out

    unfused_sum, fused_sum, moments = galerkin.weighted_outer, fused.outer_blocks, fused.centred_moments

    def record_moments(x, pos, weights):
        gram, cross = moments(x, pos, weights)
        record(gram, cross, gram, pos[0, :, -1] if pos.shape[-1] else None, weights)
        return gram, cross

    monkeypatch.setattr(fused, "centred_moments", record_moments)
    monkeypatch.setattr(galerkin, "weighted_outer", lambda a, c, weights, grad_dtype=None: record(
        a, c, unfused_sum(a, c, weights, grad_dtype), c[0, 0, :, -1], weights))  # v's last column: pos
    monkeypatch.setattr(fused, "outer_blocks", lambda kt, vt, pos, weights: record(
        kt, vt, fused_sum(kt, vt, pos, weights), None if pos is None else pos[0, :, -1], weights))
    return seen


@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["fused", "unfused"])
def test_galerkin_model_accumulates_in_float32_under_autocast(dropout, monkeypatch):
    seen = _spy_on_galerkin_sums(monkeypatch)
    config, shape, (n, _) = cases.TINY["galerkin1d"]
    model = build_model("galerkin1d", **dict(config, dropout=dropout)).train()
    column = model.config.norm == "column"
    with torch.autocast(**BF16):
        model(torch.randn(shape(n))).sum().backward()
    assert len(seen) == config["n_layers"]
    # float32, or float64 where the layer sums the centred moments (column norms, fused)
    assert all(not s["autocast"] and s["dtypes"] == {torch.float64 if column and not dropout else torch.float32}
               for s in seen)


@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["fused", "unfused"])
def test_attention_keeps_coordinates_and_weights_float32_under_autocast(dropout, monkeypatch):
    seen = _spy_on_galerkin_sums(monkeypatch)
    n = 2048
    layer = Attention(8, n_heads=2, mixer="galerkin", pos_dim=1, dropout=dropout).train()
    pos = (torch.arange(n) / n).reshape(1, n, 1)  # spacing 1/2048: bfloat16 resolves 1/256 near 1
    x = torch.randn(1, n, 8).bfloat16()  # an activation as an autocast Linear hands it on
    with torch.autocast(**BF16):
        layer(x, pos, torch.rand(1, n) + 0.5)
    (s,) = seen
    assert torch.equal(s["coords"], pos[0, :, 0])
    assert s["weights"].dtype == torch.float32 and abs(float(s["weights"][0].sum()) - 1) < 1e-6


@pytest.mark.parametrize("recompute", [False, True])
def test_fused_and_unfused_galerkin_agree_under_autocast(recompute):
    torch.manual_seed(0)
    layer = Attention(16, n_heads=2, mixer="galerkin", norm="column", pos_dim=1).train()
    x = torch.randn(2, 512, 16, requires_grad=True)
    pos = (torch.arange(512) / 512).reshape(1, 512, 1)
    results = []
    for fusable in (True, False):
        layer._fusable = lambda *args, fusable=fusable: fusable
        with torch.autocast(**BF16):
            out = layer(x, pos, recompute=recompute)
        grads = torch.autograd.grad(out.float().square().sum(), [x, *layer.parameters()])
        results.append((out, torch.cat([g.flatten() for g in grads])))
    (fused_out, fused_grads), (unfused_out, unfused_grads) = results
    assert fused_out.dtype == unfused_out.dtype == torch.bfloat16
    # measured: outputs 2.6e-3, gradients 4.6e-3 apart (two bfloat16 roundings of the same operator)
    assert rel(fused_out, unfused_out) < OUTPUT_RTOL and rel(fused_grads, unfused_grads) < GRAD_RTOL


@pytest.mark.parametrize("norm", ["column", "layer"])
def test_normalizations_compute_in_float32_under_autocast(norm):
    # a large mean: centring in bfloat16 would keep ~2 of the 8 bits of the deviations
    x = _points(4096, 8, offset=50.0)
    layer = build_norm(norm, 2, 8).double()
    exact = layer(x.double())
    layer.float()
    with torch.autocast(**BF16):
        out = layer(x)
    assert out.dtype == torch.float32  # autocast continues from float32 (its matmuls round it)
    assert rel(out, exact) < FLOAT32_RTOL
    assert layer(x).dtype == torch.bfloat16  # without autocast: the input's dtype


def test_spectral_conv_runs_its_ffts_in_float32_under_autocast():
    torch.manual_seed(0)
    conv = SpectralConv(3, 2, (4, 3)).double()
    x = torch.randn(2, 3, 23, 12).bfloat16().requires_grad_()  # odd size on one axis
    exact = conv(x.double())
    conv.float()
    with torch.autocast(**BF16):
        out = conv(x)
    assert out.dtype == torch.float32
    assert rel(out, exact) < FLOAT32_RTOL
    out.square().sum().backward()
    assert x.grad.dtype == torch.bfloat16 and torch.isfinite(x.grad).all()


# ---------------------------------------------------------------- training with run.amp = true

def _amp_config(path):
    return config_from_dict({
        "data": {"path": str(path), "n_train": 6, "n_val": 2, "n_test": 2},
        "model": {"name": "galerkin1d", "options": {"d_model": 8, "n_layers": 1, "n_heads": 2,
                                                    "decoder_width": 8, "modes": 4}},
        "optim": {"lr": 1e-3, "epochs": 2, "batch_size": 3},
        "run": {"device": "cpu", "progress": False, "amp": True, "threads": 1},
    })


def test_amp_training_on_cpu_is_finite_autocasts_only_training_and_resumes(tmp_path):
    torch.set_num_threads(1)
    data = tmp_path / "burgers.h5"
    generate_dataset("burgers", data, n_samples=10, resolution=32, progress=False)
    cfg = _amp_config(data)
    modes = []  # (training?, autocast on?) of every model forward

    def hook_model(trainer, record):  # installed after epoch 1; watches epoch 2 of the straight run
        if record.epoch == 1:
            trainer.model.register_forward_hook(
                lambda m, args, out: modes.append((m.training, torch.is_autocast_enabled("cpu"), out.dtype)))
        return False

    straight = train(cfg, tmp_path / "straight", callbacks=[hook_model])
    assert straight.epochs_completed == 2 and math.isfinite(straight.best_val_rel_l2)
    assert (True, True, torch.float32) in modes  # training forwards under autocast
    assert {m for m in modes if not m[0]} == {(False, False, torch.float32)}  # validation/test: float32
    assert all(math.isfinite(row["mean"]) for row in straight.test)

    first = train(cfg, tmp_path / "resumed", callbacks=[lambda trainer, record: record.epoch == 1])
    assert first.epochs_completed == 1
    resumed = train(cfg, tmp_path / "resumed", resume=True)
    assert resumed.epochs_completed == 2
    a, b = (load_run_checkpoint(tmp_path / d / "last.pt")["state_dict"] for d in ("straight", "resumed"))
    for key in a:
        assert a[key].dtype == torch.float32 and torch.equal(a[key], b[key]), key
