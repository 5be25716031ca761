"""Does ``torch.compile`` compute the model it compiles?  Compiled against eager, model by model and part by part.

    python benchmarks/compile_check.py                              # the GPU presets' models, on the GPU torch sees
    python benchmarks/compile_check.py --presets darcy-gpu --parts encoder decoder.layers.0
    python benchmarks/compile_check.py --device cpu --grid 33       # the same on the CPU (slow: inductor's C++)

For each preset (``--presets``): its model in training mode on a random batch (``--batch`` samples on its
training grid, ``--grid`` to change it), then the parts named in ``--parts`` (submodule paths, default: the
encoder, the first attention layer, the decoder and every spectral convolution of the decoder), each fed
the inputs it received in the eager forward of the whole model.  Each target is compiled by inductor
(``--mode``: ``default`` or ``reduce-overhead``) and compared with an eager copy by
``petrov.train.compilation.compiled_agreement``: the relative L2 difference of the outputs, and of the
gradients of ``Σ r·output`` with respect to the target's parameters.  A part that differs where its
parents differ and its children agree is where the compiler goes wrong.  The trainer makes the same
check of the whole model before it trains compiled; this script says where.

Measured so far (README, "On a GPU"): on one NVIDIA H200 (torch 2.11, 2026-11-27) the whole ``latent2d`` of
``darcy-gpu`` differed by 134% (outputs) and 240% (gradients), on the CPU it agreed to 3e-7; with the
spectral convolution in real arithmetic under compilation, every part of both presets' models agreed on
the H200 (2026-11-28: the whole ``latent2d`` 1.3e-6 and 1.7e-5, the largest part 3.1e-4).
"""
from __future__ import annotations

import argparse
import copy
import sys
import time

import torch

from _common import format_table, machine_info, print_machine

DEFAULT_PRESETS = ["darcy-gpu", "burgers-gpu"]


def default_parts(model: torch.nn.Module) -> list[str]:
    """The encoder, its first attention layer, the decoder and the decoder's spectral convolutions."""
    from petrov.operators.spectral import SpectralConv

    names = dict(model.named_modules())
    parts = [p for p in ("encoder", "encoder.layers.0", "decoder") if p in names]
    parts += [n for n, m in names.items() if n.startswith("decoder") and isinstance(m, SpectralConv)]
    return parts


def recorded_inputs(model: torch.nn.Module, parts: list[str], x: torch.Tensor, pos: torch.Tensor) -> dict:
    """``{part: (args, kwargs)}`` that each part received in one eager forward of ``model``."""
    seen, handles = {}, []
    for name in parts:
        module = model.get_submodule(name)

        def hook(module, args, kwargs, name=name):
            seen.setdefault(name, (tuple(a.detach() if torch.is_tensor(a) else a for a in args),
                                   {k: v.detach() if torch.is_tensor(v) else v for k, v in kwargs.items()}))
        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(x, pos)
    finally:
        for h in handles:
            h.remove()
    return seen


def flat(out) -> torch.Tensor:
    """A module's output(s) as one float vector per sample."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return torch.cat([o.float().flatten(1) for o in outs if torch.is_tensor(o)], dim=1)


def check(target: torch.nn.Module, args: tuple, kwargs: dict, mode: str) -> dict:
    from petrov.train.compilation import compiled_agreement

    compiled = torch.compile(target, mode=None if mode == "default" else mode)
    mark = "cuda-graphs" if mode == "reduce-overhead" else "default"
    start = time.perf_counter()
    try:
        outputs, grads = compiled_agreement(lambda net: flat(net(*args, **kwargs)), target, compiled, mark)
    except Exception as err:  # a compiler that fails outright: the row says how
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"}
    return {"outputs": outputs, "gradients": grads, "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=DEFAULT_PRESETS)
    p.add_argument("--parts", nargs="*", default=None, help="submodule paths (default: see above)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--mode", choices=["default", "reduce-overhead"], default="default")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--grid", type=int, default=None, help="points per axis (default: the preset's training grid)")
    args = p.parse_args(argv)
    from petrov.operators import build_model, grid_coordinates
    from petrov.train.compilation import AGREEMENT_TOLERANCE
    from petrov.train.config import load_config
    from petrov.train.distributed import resolve_device

    device = resolve_device(args.device)
    print_machine(machine_info())
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device: {name}; torch {torch.__version__}, CUDA {torch.version.cuda}; inductor mode {args.mode}")
    tol_out, tol_grad = AGREEMENT_TOLERANCE[None]
    rows = []
    for preset in args.presets:
        cfg = load_config(preset)
        torch.manual_seed(0)
        model = build_model(cfg.model.name, **cfg.model.options).to(device).train()
        ndim = model.grid_ndim
        n = args.grid or cfg.data.train_resolution or 64
        grid = (n,) * ndim
        g = torch.Generator().manual_seed(1)
        x = torch.randn(args.batch, *grid, cfg.model.options.get("in_channels", 1), generator=g).to(device)
        pos = grid_coordinates(grid, periodic=ndim == 1).expand(args.batch, *grid, ndim).to(device)
        parts = default_parts(model) if args.parts is None else args.parts
        inputs = recorded_inputs(model, parts, x, pos)
        targets = [(cfg.model.name, model, (x, pos), {})]
        targets += [(f"{cfg.model.name}.{part}", model.get_submodule(part), *inputs[part]) for part in parts]
        for label, module, a, k in targets:
            result = check(copy.deepcopy(module), a, k, args.mode)
            if "error" in result:
                rows.append([preset, label, "-", "-", "-", result["error"]])
            else:
                ok = result["outputs"] <= tol_out and result["gradients"] <= tol_grad
                rows.append([preset, label, f"{result['outputs']:.2e}", f"{result['gradients']:.2e}",
                             f"{result['seconds']:.0f}", "agrees" if ok else "DIFFERS"])
            print("  " + "  ".join(map(str, rows[-1])), flush=True)
    print()
    print(format_table(["preset", "compiled target", "outputs", "gradients", "s", "verdict"], rows))
    print(f"(relative L2 against eager; rounding stays below {tol_out:g} / {tol_grad:g})")


if __name__ == "__main__":
    sys.exit(main())
