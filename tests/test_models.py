"""Operator models: shapes across resolutions, every mixer and norm, boundary, presets, errors."""
from __future__ import annotations

import pytest
import torch

from petrov.operators import build_model, grid_coordinates, list_mixers, list_models, model_config, model_name
from petrov.operators.blocks import EncoderConfig, EncoderLayer, count_parameters
from petrov.operators.models import artransolver2d, fno, galerkin1d, galerkin2d, point_set_models, transolver
from petrov.operators.models import latent as latent2d

ATTN_1D = dict(d_model=8, n_layers=1, n_heads=2, decoder_width=4, modes=3)
ATTN_2D = dict(d_model=9, n_layers=1, n_heads=2, coarse_size=5)
LATENT_2D = dict(d_model=9, n_layers=1, n_heads=2, latent_size=5, fine_width=3)
TRANSOLVER = dict(d_model=8, n_layers=2, n_heads=2, n_slices=3)
# name -> (tiny config, input shape builder from a resolution, two resolutions)
TINY = {
    "fno1d": (dict(width=4, modes=3, n_layers=2, proj_hidden=8), lambda n: (2, n, 1), (16, 23)),
    "fno2d": (dict(width=4, modes=2, n_layers=2, proj_hidden=8), lambda n: (2, n, n, 1), (8, 11)),
    "galerkin1d": (ATTN_1D, lambda n: (2, n, 1), (16, 23)),
    "galerkin2d": (dict(ATTN_2D, decoder_width=4, modes=2), lambda n: (2, n, n, 1), (9, 13)),
    "galerkin2d_inverse": (dict(ATTN_2D, decoder_hidden=6), lambda n: (2, n, n, 1), (9, 13)),
    "latent1d": (dict(LATENT_2D, latent_size=6, decoder_width=4, modes=3), lambda n: (2, n, 1), (16, 23)),
    "latent2d": (dict(LATENT_2D, decoder_width=4, modes=2), lambda n: (2, n, n, 1), (9, 13)),
    "latent2d_inverse": (dict(LATENT_2D, coarse_size=6, decoder_hidden=6), lambda n: (2, n, n, 1), (9, 13)),
    "marching1d": (dict(time_steps=3, width=4, modes=3, encoder_layers=1, decoder_layers=1, summary_modes=3,
                        proj_hidden=8, d_model=8, n_layers=1), lambda n: (2, n, 1), (16, 23)),
    "arfno1d": (dict(time_steps=3, width=4, modes=3, n_layers=2, proj_hidden=8), lambda n: (2, n, 1), (16, 23)),
    "transolver1d": (TRANSOLVER, lambda n: (2, n, 1), (16, 23)),
    "transolver2d": (TRANSOLVER, lambda n: (2, n, n, 1), (9, 13)),
    # the 2-D marching models with a history of 2 states (x: (b, n, n, 2)), on non-square grids too
    "arfno2d": (dict(time_steps=2, history=2, width=4, modes=2, n_layers=2, proj_hidden=8),
                lambda n: (2, n, n + 3, 2), (8, 11)),
    "fno3d": (dict(time_steps=2, history=2, width=4, modes=2, time_modes=2, n_layers=2, proj_hidden=8,
                   padding=2), lambda n: (2, n, n + 3, 2), (8, 11)),
    "artransolver2d": (dict(TRANSOLVER, time_steps=2, history=2, unified_pos=3), lambda n: (2, n, n + 3, 2), (8, 11)),
    "marching2d": (dict(LATENT_2D, time_steps=2, history=2, latent_size=6, latent_modes=2, decoder_width=4, modes=2),
                   lambda n: (2, n, n + 3, 2), (8, 11)),
}
# output: the trajectory, history + time_steps states as channels
MARCHING_MODELS = ["marching1d", "arfno1d", "arfno2d", "fno3d", "artransolver2d", "marching2d"]
ATTENTION_MODELS = ["galerkin1d", "galerkin2d", "galerkin2d_inverse", "latent1d", "latent2d", "latent2d_inverse",
                    "marching2d"]


def expected_grid(name, config, x):
    """The output grid for the input ``x``: the input's, or an inverse model's fixed coarse grid."""
    if name.endswith("_inverse"):
        return (config["coarse_size"],) * 2
    return tuple(x.shape[1:-1])


def test_every_registered_model_has_a_tiny_case():
    # the point-set models take meshes: tests/test_mesh_models.py
    assert set(list_models()) - set(point_set_models()) == set(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_forward_at_two_resolutions(name):
    config, shape, resolutions = TINY[name]
    torch.manual_seed(0)
    model = build_model(name, **config).eval()
    for n in resolutions:  # built without a resolution; evaluated at two different ones
        x = torch.randn(shape(n))
        out = model(x)
        channels = config.get("history", 1) + config["time_steps"] if name in MARCHING_MODELS else 1
        assert out.shape == (2, *expected_grid(name, config, x), channels)
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", sorted(TINY))
def test_default_pos_equals_explicit_grid(name):
    config, shape, (n, _) = TINY[name]
    torch.manual_seed(0)
    model = build_model(name, **config).eval()
    x = torch.randn(shape(n))
    periodic = model.config.periodic
    pos = grid_coordinates(x.shape[1:-1], periodic=periodic).unsqueeze(0)
    torch.testing.assert_close(model(x), model(x, pos))
    shifted = model(x, pos + 0.25)  # coordinates matter (they enter lifting or attention)
    assert not torch.allclose(shifted, model(x))


@pytest.mark.parametrize("name", ATTENTION_MODELS)
@pytest.mark.parametrize("norm", ["column", "layer", None])
@pytest.mark.parametrize("mixer", list_mixers())
def test_every_mixer_and_norm_plugs_in(name, mixer, norm):
    config, shape, (n, _) = TINY[name]
    torch.manual_seed(0)
    model = build_model(name, **dict(config, mixer=mixer, norm=norm))
    out = model(torch.randn(shape(n)))
    assert torch.isfinite(out).all()
    out.square().mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_mixer_options_reach_the_mixer():
    config, shape, (n, _) = TINY["galerkin1d"]
    with pytest.raises(ValueError, match="no option"):
        build_model("galerkin1d", **dict(config, mixer="galerkin", mixer_options={"bogus": 1}))
    model = build_model("galerkin1d", **dict(config, init_gain=0.5))  # an attention option, now a config key
    assert model.layers[0].attention.init_gain == 0.5


@pytest.mark.parametrize("name", ["galerkin2d", "latent2d", "transolver2d"])
@pytest.mark.parametrize("n", [9, 12])
def test_darcy_forward_boundary_is_exactly_zero(name, n):
    config, shape, _ = TINY[name]
    torch.manual_seed(0)
    model = build_model(name, **config)
    out = model(torch.randn(shape(n)))
    for edge in (out[:, 0], out[:, -1], out[:, :, 0], out[:, :, -1]):
        assert torch.equal(edge, torch.zeros_like(edge))
    assert out[:, 1:-1, 1:-1].abs().min() > 0  # the interior is not masked
    free = build_model(name, **dict(config, dirichlet=False))
    assert free(torch.randn(shape(n)))[:, 0].abs().max() > 0


@pytest.mark.parametrize("name", ["galerkin2d_inverse", "latent2d_inverse"])
def test_inverse_output_is_on_the_coarse_grid_for_any_fine_grid(name):
    config, shape, _ = TINY[name]
    model = build_model(name, **dict(config, coarse_size=7))
    for n in (10, 15, 21):
        assert model(torch.randn(shape(n))).shape == (2, 7, 7, 1)


def test_latent_blocks_plug_in_and_check_their_sizes():
    config, shape, (n, _) = TINY["latent2d"]
    for extra in (dict(latent_modes=2), dict(latent_kernel=3), dict(latent_modes=2, latent_kernel=3)):
        model = build_model("latent2d", **dict(config, n_layers=2, **extra))
        assert len(model.encoder.local) == 2 and model(torch.randn(shape(n))).shape == (2, n, n, 1)
    assert len(build_model("latent2d", **config).encoder.local) == 0
    with pytest.raises(ValueError, match="latent_modes"):
        build_model("latent2d", **dict(config, latent_modes=3))  # 2 * 3 > latent_size 5
    with pytest.raises(ValueError, match="latent_kernel"):
        build_model("latent2d", **dict(config, latent_kernel=2))
    with pytest.raises(ValueError, match="too coarse"):
        build_model("latent2d", **dict(config, latent_size=33))(torch.randn(shape(n)))


@pytest.mark.parametrize("ndim", [1, 2])
@pytest.mark.parametrize("periodic", [False, True])
def test_the_latent_convolution_is_torchs_padded_convolution(ndim, periodic):
    from petrov.operators.latent_encoder import GridConv

    torch.manual_seed(0)
    conv = GridConv(3, 5, ndim, periodic).double()
    torch.manual_seed(0)  # the same draws: the same initial weights
    reference = (torch.nn.Conv1d, torch.nn.Conv2d)[ndim - 1](
        3, 3, 5, padding=2, padding_mode="circular" if periodic else "replicate").double()
    assert conv.state_dict().keys() == reference.state_dict().keys()  # checkpoints of either load in the other
    for name, p in conv.named_parameters():
        torch.testing.assert_close(p, reference.get_parameter(name), rtol=0, atol=0)
    x = torch.randn(2, 3, *(6,) * ndim, dtype=torch.float64, requires_grad=True)
    out, ref = conv(x), reference(x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), x)[0], torch.autograd.grad(ref.sum(), x)[0])


def test_the_stencil_grid_is_a_convolution_between_two_restrictions():
    # stencil_size: R_latent (s + σ(Conv s)), s = R_stencil f, written here with dense matrices and torch's
    # replicate-padded convolution; latent2d_inverse's output sees it (its latent features change)
    from petrov.grids.transfer import restriction_matrix

    config, shape, (n, _) = TINY["latent2d_inverse"]
    config = dict(config, stencil_size=7, stencil_kernel=3)
    torch.manual_seed(0)
    model = build_model("latent2d_inverse", **config).double()
    encoder = model.encoder
    f = torch.randn(2, config["fine_width"], n, n, dtype=torch.float64)
    rs, rl = restriction_matrix(7, n), restriction_matrix(config["latent_size"], 7)
    s = torch.einsum("in,bcnm,jm->bcij", rs, f, rs)
    conv = encoder.stencil[0]
    t = torch.nn.functional.gelu(torch.nn.functional.conv2d(
        torch.nn.functional.pad(s, (1, 1, 1, 1), mode="replicate"), conv.weight, conv.bias))
    want = torch.einsum("in,bcnm,jm->bcij", rl, s + t, rl)
    torch.testing.assert_close(encoder.restrict(f), want, rtol=1e-12, atol=1e-12)
    x = torch.randn(shape(n), dtype=torch.float64)
    plain = build_model("latent2d_inverse", **dict(config, stencil_size=0)).double()
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if "stencil" not in k})
    assert (model(x) - plain(x)).abs().max() > 1e-3
    with pytest.raises(ValueError, match="too coarse for a stencil grid of 21 points.*smaller stencil_size"):
        build_model("latent2d_inverse", **dict(config, stencil_size=21)).double()(x)


@pytest.mark.parametrize("options, match", [
    (dict(stencil_size=1), "stencil_size"),
    (dict(stencil_size=9, stencil_kernel=2), "stencil_kernel"),
    (dict(stencil_size=9, stencil_kernel=0), "stencil_size"),
    (dict(stencil_size=9, periodic=True), "stencil_size"),
])
def test_a_stencil_grid_the_encoder_cannot_use_is_refused(options, match):
    with pytest.raises(ValueError, match=match):
        build_model("latent2d_inverse", **dict(TINY["latent2d_inverse"][0], **options))


def test_the_latent_convolution_compiles_forward_and_backward_on_the_cpu():
    # nn.Conv2d(padding_mode="replicate") stopped compiled steps here: its backward's gradient had
    # channels-last strides where the compiled graph expected contiguous ones
    from petrov.operators.latent_encoder import GridConv

    conv = GridConv(64, 3, 2, periodic=False)  # (the size at which torch's padded convolution failed)
    x = torch.randn(2, 64, 16, 16)
    grads = []
    for net in (torch.compile(conv), conv):
        xx = x.clone().requires_grad_()
        net(xx).square().sum().backward()
        grads.append(xx.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ndim", [1, 2])
def test_pointwise_on_a_channels_first_grid_is_the_layer_on_channels_last(ndim):
    # the spectral models' lifts and heads run on channels-first grids without converting the layout
    from petrov.operators.blocks import FullPrecisionLinear, mlp, pointwise

    torch.manual_seed(0)
    layers = [torch.nn.Linear(3, 4), torch.nn.Linear(3, 4, bias=False), mlp(3, 6, 1, "silu"), mlp(3, 6, 2, "gelu"),
              FullPrecisionLinear(3, 1, bias=False)]
    x = torch.randn(2, *(5,) * ndim, 3, dtype=torch.float64, requires_grad=True)  # channels-last
    for layer in layers:
        layer.double()
        want = layer(x)
        got = pointwise(layer, x.movedim(-1, 1)).movedim(1, -1)
        torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
        g = torch.randn_like(want)
        inputs = [x, *layer.parameters()]
        for a, b in zip(torch.autograd.grad(got, inputs, g), torch.autograd.grad(want, inputs, g)):
            torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)
    with pytest.raises(TypeError, match="LayerNorm"):  # mixes a point's channels: not a map of one channel axis
        pointwise(torch.nn.LayerNorm(3), x.movedim(-1, 1))


def test_coarse_coordinates_are_the_uniform_coarse_grid():
    model = build_model("galerkin2d", **TINY["galerkin2d"][0])
    x = torch.randn(1, 13, 13, 1)
    pos = grid_coordinates((13, 13)).unsqueeze(0)
    _, pos_c = model.encoder(x, pos)
    torch.testing.assert_close(pos_c[0], grid_coordinates((5, 5)))


def test_fno_padding_keeps_the_grid():
    model = build_model("fno2d", **dict(TINY["fno2d"][0], padding=3))
    assert model(torch.randn(1, 9, 10, 1)).shape == (1, 9, 10, 1)


@pytest.mark.parametrize(
    "name, preset, expected",
    [
        ("galerkin1d", galerkin1d.REFERENCE_CONFIG, 530_305),
        ("galerkin2d", galerkin2d.REFERENCE_CONFIG, 2_220_829),
        ("galerkin2d_inverse", galerkin2d.INVERSE_REFERENCE_CONFIG, 2_383_873),
        ("latent2d", latent2d.REFERENCE_SIZE_CONFIG, latent2d.REFERENCE_SIZE_PARAMETERS),
        # the published Transolver size (8 layers, width 128, 8 heads, 64 slices, mlp_ratio 1), linear
        # projections; counted by hand from thuml/Transolver's Physics_Attention_1D and Transolver_block
        # (without its 128-entry placeholder): 33,920 + 8 x 84,936 + 385
        ("transolver2d", transolver.REFERENCE_CONFIG, transolver.REFERENCE_PARAMETERS),
        # Neural-Solver-Library's NS Transolver (n_hidden 256, 8 layers, 8 heads, 32 slices, mlp_ratio 2, ref 8,
        # 10 input states) with linear projections: 169,728 + 8 x 465,448 + 769
        ("artransolver2d", artransolver2d.REFERENCE_CONFIG, artransolver2d.REFERENCE_PARAMETERS),
    ],
)
def test_reference_presets_have_the_reference_parameter_counts(name, preset, expected):
    # counts published by / computed from the reference code (scaomath/galerkin-transformer);
    # latent2d: sized to the Darcy hybrid's count for equal-parameter comparisons
    assert count_parameters(build_model(name, **preset)) == expected
    # the count does not depend on the mixer's normalization choice (column vs layer)
    if preset.get("norm"):
        assert count_parameters(build_model(name, **dict(preset, norm="column"))) == expected


def test_fno_reference_presets_build():
    # FNO paper: 1-D width 64 / 16 modes; 2-D width 32 / 12 modes; 4 layers, 128 hidden
    assert count_parameters(build_model("fno1d", **fno.REFERENCE_CONFIG["fno1d"])) == 549_569
    assert count_parameters(build_model("fno2d", **fno.REFERENCE_CONFIG["fno2d"])) == 2_368_001


def test_fno_navier_stokes_models_at_their_defaults_have_the_reference_counts():
    # fourier_2d_time.py (10 states and x, y as 12 inputs; width 20, 12 modes, 4 layers, 128 hidden):
    # 260 + 4 x (230,400 + 420) + 2,688 + 129; fourier_3d.py (13 inputs, width 20, 8 modes, 4 layers): 6,558,377,
    # the paper's 6,558,537 less the 160 parameters of the 4 BatchNorm3d layers of its first script
    assert count_parameters(build_model("arfno2d", history=10, time_steps=10)) == 926_357
    assert count_parameters(build_model("fno3d", history=10, time_steps=10)) == 6_558_377


def test_config_is_plain_and_rebuilds_the_same_architecture():
    for name, (config, _, _) in TINY.items():
        model = build_model(name, **config)
        assert isinstance(model_config(model), dict) and model_name(model) == name
        twin = build_model(name, **model_config(model))
        twin.load_state_dict(model.state_dict(), strict=True)


def test_encoder_layer_is_post_norm_like_the_reference():
    torch.manual_seed(0)
    layer = EncoderLayer(EncoderConfig(d_model=8, n_heads=2, layer_norm=True), pos_dim=1)
    x, pos = torch.randn(2, 10, 8), torch.rand(2, 10, 1)
    h = layer.norm1(x + layer.attention(x, pos))
    torch.testing.assert_close(layer(x, pos), layer.norm2(h + layer.ffn(h)))
    plain = EncoderLayer(EncoderConfig(d_model=8, n_heads=2, layer_norm=False), pos_dim=1)
    h = x + plain.attention(x, pos)
    torch.testing.assert_close(plain(x, pos), h + plain.ffn(h))


def test_dropout_is_off_in_eval():
    config, shape, (n, _) = TINY["galerkin2d"]
    model = build_model("galerkin2d", **dict(config, dropout=0.5)).eval()
    x = torch.randn(shape(n))
    torch.testing.assert_close(model(x), model(x))


# ---- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(TINY))
def test_wrong_rank_and_channels_raise(name):
    config, shape, (n, _) = TINY[name]
    model = build_model(name, **config)
    good = shape(n)
    with pytest.raises(ValueError, match="rank"):
        model(torch.randn(*good, 1))
    with pytest.raises(ValueError, match=f"expected {good[-1]} input channel"):
        model(torch.randn(*good[:-1], good[-1] + 2))


@pytest.mark.parametrize("name", sorted(TINY))
def test_nan_input_raises(name):
    config, shape, (n, _) = TINY[name]
    x = torch.randn(shape(n))
    x.view(-1)[3] = float("nan")
    with pytest.raises(ValueError, match="input contains NaN"):
        build_model(name, **config)(x)


@pytest.mark.parametrize("name", sorted(TINY))
def test_pos_of_wrong_shape_raises(name):
    config, shape, (n, _) = TINY[name]
    model = build_model(name, **config)
    x = torch.randn(shape(n))
    bad = torch.rand(x.shape[0], *[m + 1 for m in x.shape[1:-1]], x.dim() - 2)
    with pytest.raises(ValueError, match="pos"):
        model(x, bad)


def test_unknown_names_and_keys_raise():
    with pytest.raises(KeyError, match="unknown model 'galerkin3d'"):
        build_model("galerkin3d")
    with pytest.raises(ValueError, match="unknown key.*'widht'.*did you mean 'width'"):
        build_model("fno1d", widht=8)
    with pytest.raises(KeyError, match="unknown mixer"):
        build_model("galerkin1d", mixer="galerkn")
    with pytest.raises(ValueError, match=r"checkpoint_layers: expected one of \['ffn'\] or bool, got str 'layers'"):
        build_model("galerkin1d", checkpoint_layers="layers")
    with pytest.raises(ValueError, match="modes"):
        build_model("fno1d", modes=12)(torch.randn(1, 16, 1))  # 12 > 16 // 2 + 1


@pytest.mark.parametrize("mixer, dropout", [("galerkin", 0.0), ("galerkin", 0.1), ("fourier", 0.1)])
def test_checkpointed_encoder_gives_the_same_outputs_and_gradients(mixer, dropout):
    # dropout: recomputation replays the RNG (torch.utils.checkpoint); without it the FFN's own backward
    config = dict(ATTN_1D, n_layers=2, mixer=mixer, dropout=dropout)
    runs, kept = [], []
    for checkpoint_layers in (False, "ffn", True):
        torch.manual_seed(0)
        model = build_model("galerkin1d", **config, checkpoint_layers=checkpoint_layers).double().train()
        x = torch.randn(2, 16, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        saved = []  # what autograd keeps for backward during the forward pass
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
            out = model(x)
        out.square().sum().backward()
        runs.append((out.detach(), [p.grad for p in model.parameters()]))
        kept.append(sum(saved))
    # "ffn" keeps less than nothing recomputed (each layer's (b, n, dim_feedforward) hidden), True less still
    assert kept[2] < kept[1] < kept[0]
    (out0, grads0) = runs[0]
    for out1, grads1 in runs[1:]:
        torch.testing.assert_close(out0, out1)
        assert len(grads0) == len(grads1) and all(g is not None for g in grads1)
        for a, b in zip(grads0, grads1):
            torch.testing.assert_close(a, b)


def test_finite_check_can_be_switched_off_and_on():
    from petrov.operators.checks import set_finite_check

    config, shape, (n, _) = TINY["fno1d"]
    model = build_model("fno1d", **config)
    x = torch.randn(shape(n))
    x.view(-1)[0] = float("inf")
    try:
        set_finite_check("never")  # no per-call pass over the input: the inf goes through
        assert not torch.isfinite(model(x)).all()
        set_finite_check("always")
        with pytest.raises(ValueError, match="input contains NaN or inf"):
            model(x)
        with pytest.raises(ValueError, match="'cpu', 'always' or 'never'"):
            set_finite_check("sometimes")
    finally:
        set_finite_check("cpu")


def test_latent1d_on_node_grids_uses_the_hat_transfers():
    config, shape, _ = TINY["latent1d"]
    model = build_model("latent1d", **dict(config, periodic=False))
    assert model.encoder.coord_dim == 1 and model(torch.randn(shape(17))).shape == (2, 17, 1)
    with pytest.raises(ValueError, match="too coarse"):
        build_model("latent1d", **dict(config, periodic=False, latent_size=40))(torch.randn(shape(17)))
