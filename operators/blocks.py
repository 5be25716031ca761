"""Building blocks of the operator models.

Layouts: spectral blocks and the spectral decoder take channels-first grids ``(b, c, *grid)``, and
the pointwise maps around them run there too ([`pointwise`][]); the encoder layer takes point clouds
``(b, n, d)``; the pointwise decoder takes channels-last ``(…, c)``.  Conversions go through
[`layout`][petrov.grids.layout].

- [`SpectralBlock`][]: one FNO layer ``y = σ(K x + W x + b)``, ``K`` a
  [`SpectralConv`][], ``W`` a pointwise (1x1) linear skip.
- [`EncoderLayer`][]: attention + feed-forward, each in a residual branch, with the
  reference's *post*-norm arrangement (checked in scaomath/galerkin-transformer,
  ``SimpleTransformerEncoderLayer``): ``x = LN1(x + Attn(x))``, ``x = LN2(x + FFN(x))``; the two
  LayerNorms exist only with ``layer_norm=True``.  With ``layer_norm=False`` (the reference's
  Burgers and Darcy set-up) the only normalization is the one inside the attention (K, V for
  Galerkin; Q, K for Fourier).  A causal layer also runs as a recurrence, one point at a time
  (``init_state`` / ``step``, constant-size state; see ``Attention.step``).
- [`SpectralDecoder`][]: [pointwise lift of ``(x, coordinates)``] -> spectral blocks -> MLP.
- [`pointwise`][]: a Linear, an activation or an MLP at every point of a channels-first grid.
- [`PointwiseDecoder`][]: lift of ``(x, coordinates)`` -> hidden layers -> output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from ..common.config import check_positive
from ..common.registry import Registry
from .attention import Attention, AttentionConfig
from .spectral import SpectralConv

ACTIVATIONS: Registry = Registry("activation")
for _name, _cls in {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU, "tanh": nn.Tanh}.items():
    ACTIVATIONS.register(_name)(_cls)
# modules that act on every entry alone, so on any layout ([`pointwise`][])
_ELEMENTWISE = (nn.GELU, nn.ReLU, nn.SiLU, nn.Tanh, nn.Identity, nn.Dropout)


def activation(name: str | None) -> nn.Module:
    """``nn.Module`` for an activation name (``None`` -> identity); unknown names raise ``KeyError``."""
    return nn.Identity() if name is None else ACTIVATIONS.get(name)()


def count_parameters(module: nn.Module) -> int:
    """Number of real trainable parameters (a complex entry counts as two)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in module.parameters() if p.requires_grad)


class FullPrecisionLinear(nn.Linear):
    """``nn.Linear`` computed in its weights' dtype also under autocast (float32 for a float32
    model): the layers of the output head, so a model's output keeps float32's digits under
    bfloat16 autocast.  A bfloat16 head alone moves a trained Burgers model's output by ~1e-3
    relative, next to the ~1e-3 errors the models reach; it is small (few channels), so running it in
    float32 costs little."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            x = x.to(self.weight.dtype)
            if self.out_features == 1:  # the usual last layer: as a matrix-vector product, because F.linear's
                # backward is then an (n, 1) x (1, c) matrix product, which torch's CPU takes 2-4x longer over
                out = (x @ self.weight[0]).unsqueeze(-1)  # (darcy-budget-85's training step: 139 -> 123 ms)
                return out if self.bias is None else out + self.bias
            return F.linear(x, self.weight, self.bias)

    def on_channels_first(self, x: torch.Tensor) -> torch.Tensor:
        """The same map on the channel axis of a channels-first grid ``(b, c_in, *grid) -> (b, c_out, *grid)``,
        also in the weights' dtype under autocast."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            return channel_product(self.weight, self.bias, x.to(self.weight.dtype))


def channel_product(weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    """``W x + b`` on the channel axis of a channels-first grid: ``weight (c_out, c_in)``, ``bias (c_out,)`` or
    None, ``x (b, c_in, *grid)`` -> ``(b, c_out, *grid)``, one batched product that reads ``x`` in place (a
    Linear on the channels-last view would copy the grid into a contiguous matrix first, and its gradient
    back)."""
    b = x.shape[0]
    w, flat = weight.expand(b, -1, -1), x.flatten(2)
    y = torch.bmm(w, flat) if bias is None else torch.baddbmm(bias.unsqueeze(-1), w, flat)
    return y.view(b, -1, *x.shape[2:])


def pointwise(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``layer`` at every point of a channels-first grid ``x (b, c_in, *grid) -> (b, c_out, *grid)``: the
    numbers ``layer`` gives on the channels-last grid, without converting the layout there and back.

    ``layer`` is a ``Linear`` ([`channel_product`][]; a [`FullPrecisionLinear`][] stays in its weights'
    dtype), an element-wise module (an activation, ``Dropout``, ``Identity``), or an ``nn.Sequential`` of
    them; anything else (a LayerNorm mixes the channels of a point) raises ``TypeError``."""
    if isinstance(layer, nn.Sequential):
        for part in layer:
            x = pointwise(part, x)
        return x
    if isinstance(layer, FullPrecisionLinear):
        return layer.on_channels_first(x)
    if isinstance(layer, nn.Linear):
        return channel_product(layer.weight, layer.bias, x)
    if isinstance(layer, _ELEMENTWISE):
        return layer(x)
    raise TypeError(f"pointwise: {type(layer).__name__} is not a Linear, an element-wise module or a "
                    "Sequential of them")


def mlp(in_features: int, hidden: int, out_features: int, act: str = "gelu") -> nn.Sequential:
    """Pointwise two-layer perceptron ``Linear -> σ -> Linear`` on the last dim, in full precision
    also under autocast ([`FullPrecisionLinear`][]: the models' output heads)."""
    return nn.Sequential(FullPrecisionLinear(in_features, hidden), activation(act),
                         FullPrecisionLinear(hidden, out_features))


class SpectralBlock(nn.Module):
    """``(b, c_in, *grid) -> (b, c_out, *grid)``: ``σ(SpectralConv(x) + W x + b)``."""

    def __init__(self, in_channels: int, out_channels: int, modes, ndim: int, act: str | None = "gelu"):
        super().__init__()
        self.spectral = SpectralConv(in_channels, out_channels, modes, ndim=ndim)
        self.skip = nn.Linear(in_channels, out_channels)
        self.act = activation(act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.spectral(x) + pointwise(self.skip, x))


class _RecomputedHidden(torch.autograd.Function):
    """``W_2 σ(W_1 x + b_1) + b_2`` keeping only ``x`` for backward: the hidden ``σ(W_1 x + b_1)``
    (``(…, f)``, the FFN's largest activation) is recomputed there.

    ``forward(ffn, x, *params)``, ``params`` = the FFN's parameters (so autograd returns their
    gradients).  Backward: ``dL/dW_2 = gᵀ r``, ``dL/db_2 = Σ g``, ``dL/dr = g W_2`` by hand, then
    through ``r = σ(W_1 x + b_1)``, recomputed with autograd.
    """

    @staticmethod
    def forward(ctx, ffn, x, *params):
        ctx.ffn = ffn
        ctx.save_for_backward(x)
        with torch.no_grad():
            return ffn.net(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        first, act, _, last = ctx.ffn.net
        with torch.enable_grad():
            leaf = x.detach().requires_grad_(x.requires_grad)
            hidden = act(first(leaf))
        g = grad.reshape(-1, grad.shape[-1])
        grad_w2 = g.t() @ hidden.detach().reshape(-1, hidden.shape[-1]) if last.weight.requires_grad else None
        grad_b2 = g.sum(0) if last.bias.requires_grad else None
        wanted = [t for t in (leaf, first.weight, first.bias) if t.requires_grad]
        found = dict(zip(map(id, wanted), torch.autograd.grad(hidden, wanted, grad @ last.weight)))
        return None, found.get(id(leaf)), found.get(id(first.weight)), found.get(id(first.bias)), grad_w2, grad_b2


class FeedForward(nn.Module):
    """``(…, d) -> (…, d)``: ``Linear(d, f) -> σ -> Dropout -> Linear(f, d)``.

    ``forward(x, recompute=False)``; ``recompute=True`` (training memory): keep only ``x`` for
    backward and recompute the hidden ``(…, f)`` activation there (with active dropout: the whole
    block, by ``torch.utils.checkpoint``, which replays the dropout mask).  Same numbers.
    """

    def __init__(self, d_model: int, dim_feedforward: int, act: str = "relu", dropout: float = 0.0):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, dim_feedforward),
            activation(act),
            nn.Dropout(dropout),
            nn.Linear(dim_feedforward, d_model),
        )

    def forward(self, x: torch.Tensor, recompute: bool = False) -> torch.Tensor:
        if not (recompute and torch.is_grad_enabled()):
            return self.net(x)
        # (under torch.compile too: dynamo cannot trace the autograd.grad in _RecomputedHidden's backward)
        if self.training and self.net[2].p > 0 or torch.compiler.is_compiling():
            return checkpoint(self.net, x, use_reentrant=False)
        return _RecomputedHidden.apply(self, x, *self.parameters())


@dataclass
class EncoderConfig(AttentionConfig):
    """Config fields every attention model shares: its attention (the inherited
    [`AttentionConfig`][] fields), channels, and its stack of
    ``EncoderLayer``s.  Model configs extend it with their own fields (one flat table in TOML /
    ``build_model``); ``dropout`` acts in the attention, the FFN and both residual branches.  Fields:

    - ``in_channels``: channels of the input field.
    - ``out_channels``: channels of the output field.
    - ``d_model``: width of the attention layers (the encoder's feature channels).
    - ``n_layers``: encoder layers (attention + feed-forward, each in a residual branch).
    - ``dim_feedforward``: hidden width of each layer's feed-forward block (``None``: ``2 * d_model``).
    - ``ffn_activation``: activation of the feed-forward block (``relu``, ``gelu``, ``silu``, ...).
    - ``layer_norm``: a LayerNorm after each residual sum (post-norm); off in the reference hybrids.
    """

    in_channels: int = 1
    out_channels: int = 1
    d_model: int = 64
    n_layers: int = 2
    dim_feedforward: Optional[int] = None  # default 2 * d_model
    ffn_activation: str = "relu"
    layer_norm: bool = False

    def __post_init__(self):
        check_positive(self, "in_channels", "out_channels", "d_model", "n_layers", "n_heads", "head_dim",
                       "dim_feedforward")


def _residual(x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
    """``x + branch``, summed in place into ``branch`` when it is a fresh tensor (no (b, n, d)
    temporary; no backward reads a branch output).  Not into a view: autograd would then copy the
    base tensor in backward."""
    return branch.add_(x) if branch._base is None else x + branch


class EncoderLayer(nn.Module):
    """``(b, n, d) -> (b, n, d)``: ``x + Attn(x, pos)`` then ``x + FFN(x)`` (post-norm if ``layer_norm``).

    Built from an [`EncoderConfig`][] passed whole (``d_model``, the attention fields,
    ``dim_feedforward``, ``ffn_activation``, ``layer_norm``, ``dropout``); the attention is
    [`Attention`][] of the same config, so any registered mixer plugs
    in by name.
    """

    def __init__(self, config: EncoderConfig, pos_dim: int = 0):
        super().__init__()
        c = config
        self.attention = Attention(c.d_model, c, pos_dim=pos_dim)
        self.ffn = FeedForward(c.d_model, c.dim_feedforward or 2 * c.d_model, c.ffn_activation, c.dropout)
        self.drop1 = nn.Dropout(c.dropout)
        self.drop2 = nn.Dropout(c.dropout)
        self.norm1 = nn.LayerNorm(c.d_model) if c.layer_norm else nn.Identity()
        self.norm2 = nn.LayerNorm(c.d_model) if c.layer_norm else nn.Identity()

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None, weights: torch.Tensor | None = None,
                recompute: bool | str = False):
        """``recompute=True``: each branch keeps only its input for backward (``x`` and ``x + Attn(x)``)
        and recomputes its activations there (see ``Attention.forward``, ``FeedForward.forward``);
        ``recompute="ffn"``: the feed-forward branch only (its hidden activation is the largest)."""
        attention = self.attention(x, pos, weights, recompute=recompute is True)
        x = self.norm1(_residual(x, self.drop1(attention)))
        return self._feed_forward(x, bool(recompute))

    def _feed_forward(self, x: torch.Tensor, recompute: bool = False) -> torch.Tensor:
        return self.norm2(_residual(x, self.drop2(self.ffn(x, recompute=recompute))))

    def init_state(self, batch: int, n_points: int, **options):
        """Empty recurrent state of a causal layer (see ``Attention.init_state``)."""
        return self.attention.init_state(batch, n_points, **options)

    def step(self, state, x_t: torch.Tensor, pos_t: torch.Tensor | None = None, weight_t=None):
        """One point of a causal layer, ``x_t: (b, d)`` -> ``(y_t: (b, d), new state)``: the
        attention's recurrent step, then the same residuals and FFN (point-wise) as ``forward``;
        steps 0..n-1 give the rows of ``forward`` (eval mode)."""
        a, state = self.attention.step(state, x_t, pos_t, weight_t)
        return self._feed_forward(self.norm1(x_t + self.drop1(a))), state


def encoder_stack(c: EncoderConfig, pos_dim: int) -> nn.ModuleList:
    """``c.n_layers`` encoder layers as configured by ``c``, attending with ``pos_dim`` coordinates."""
    return nn.ModuleList(EncoderLayer(c, pos_dim) for _ in range(c.n_layers))


class SpectralDecoder(nn.Module):
    """``(b, c_in, *grid)`` [+ ``pos (b, p, *grid)``] ``-> (b, c_out, *grid)``, channels-first throughout.

    With ``coord_dim > 0``: ``Linear(c_in + p, width)`` on ``[x, pos]``, then ``n_layers``
    spectral blocks ``width -> width``; otherwise the first block maps ``c_in -> width``.
    Every block has the activation (the reference keeps it on the last one too); then the MLP
    ``width -> hidden -> c_out``.  The lift and the MLP act at every point ([`pointwise`][]).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        width: int,
        modes,
        ndim: int,
        n_layers: int = 2,
        hidden: int | None = None,
        coord_dim: int = 0,
        act: str = "silu",
    ):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"decoder needs at least one spectral layer, got {n_layers}")
        self.coord_dim = coord_dim
        self.lift = nn.Linear(in_channels + coord_dim, width) if coord_dim else None
        first = width if coord_dim else in_channels
        self.blocks = nn.ModuleList(
            [SpectralBlock(first if i == 0 else width, width, modes, ndim, act) for i in range(n_layers)]
        )
        self.head = mlp(width, hidden or width, out_channels, act)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        if self.lift is not None:
            x = pointwise(self.lift, torch.cat([x, pos], dim=1))
        for block in self.blocks:
            x = block(x)
        return pointwise(self.head, x)


@dataclass
class SpectralDecoderFields:
    """The config fields of a [`SpectralDecoder`][] (models that decode on their input grid); a
    model config lists it first among its bases, so these fields come last in its table.

    - ``decoder_width``: channels of the decoder's spectral blocks.
    - ``decoder_layers``: the decoder's spectral blocks.
    - ``decoder_hidden``: hidden width of the decoder's output MLP (``None``: ``4 * decoder_width``).
    - ``modes``: Fourier modes each spectral block keeps per axis (a fixed number: the same
      frequencies at every resolution).
    - ``decoder_activation``: activation of the decoder.
    """

    decoder_width: int = 16
    decoder_layers: int = 2
    decoder_hidden: Optional[int] = None  # default 4 * decoder_width
    modes: int = 8
    decoder_activation: str = "silu"


@dataclass
class PointwiseDecoderFields:
    """The config fields of a [`PointwiseDecoder`][] (an MLP of ``[h, pos]`` at every point).

    - ``decoder_hidden``: hidden width of the decoder MLP (``None``: the model's ``d_model``).
    - ``decoder_layers``: hidden layers of the decoder MLP.
    - ``decoder_activation``: activation of the decoder MLP.
    """

    decoder_hidden: Optional[int] = None  # default d_model
    decoder_layers: int = 1
    decoder_activation: str = "silu"


def spectral_decoder(c: SpectralDecoderFields, in_channels: int, out_channels: int, ndim: int, coord_dim: int,
                     hidden: int | None = None) -> "SpectralDecoder":
    """The [`SpectralDecoder`][] a config describes (``hidden``: default ``4 * decoder_width``)."""
    return SpectralDecoder(in_channels, out_channels, c.decoder_width, c.modes, ndim=ndim, n_layers=c.decoder_layers,
                           hidden=hidden or c.decoder_hidden or 4 * c.decoder_width, coord_dim=coord_dim,
                           act=c.decoder_activation)


def pointwise_decoder(c, in_channels: int, hidden: int, coord_dim: int = 2) -> "PointwiseDecoder":
    """The [`PointwiseDecoder`][] a config with ``decoder_layers``, ``decoder_activation``,
    ``out_channels`` and ``dropout`` describes, ``hidden`` wide."""
    return PointwiseDecoder(in_channels, c.out_channels, hidden, coord_dim=coord_dim, n_layers=c.decoder_layers,
                            act=c.decoder_activation, dropout=getattr(c, "dropout", 0.0))


class PointwiseDecoder(nn.Module):
    """``(…, c_in)``, ``pos (…, p)`` ``-> (…, c_out)``.

    ``Linear(c_in + p, h)`` on ``[x, pos]``, ``n_layers`` x ``[Linear(h, h), σ]``, ``Linear(h, c_out)``.
    """

    def __init__(self, in_channels: int, out_channels: int, hidden: int, coord_dim: int,
                 n_layers: int = 1, act: str = "silu", dropout: float = 0.0):
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(in_channels + coord_dim, hidden)]
        for _ in range(n_layers):
            layers += [nn.Linear(hidden, hidden), activation(act), nn.Dropout(dropout)]
        layers.append(FullPrecisionLinear(hidden, out_channels))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, pos], dim=-1))
