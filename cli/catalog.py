"""``petrov mixers``, ``petrov models`` and ``petrov presets``: what is registered or shipped, with options.

    petrov models                  # each model with a line saying what it is for
    petrov models NAME ...         # those models' config fields and defaults (model.options in a config)
    petrov mixers [NAME ...]       # the same for the mixers (model.options.mixer_options)
    petrov presets                 # the shipped training presets, each with what it is for
    petrov presets show NAME       # a preset's TOML, to copy and edit

Models and mixers of other installed packages (entry points ``petrov.models`` / ``petrov.mixers``)
are listed too.
"""
from __future__ import annotations

import argparse
import difflib
import inspect
import json
from importlib import resources
from typing import Any, Callable

from ..common.config import asdict
from ..operators import list_mixers, list_models
from ..common.registry import Registry
from ..operators.attention.mixers import MIXERS, mixer_options
from ..operators.models import MODELS, config_class
from ..train.config import preset_names
from .usage import UsageError, add_command


def _value(value: Any) -> str:
    """A default as it would be written in TOML (``None``: not set)."""
    return "(unset)" if value is None else json.dumps(value)


def _block(title: str, options: dict[str, Any] | None) -> str:
    if options is None:
        return f"{title}\n  (any keyword options)"
    if not options:
        return f"{title}\n  (no options)"
    width = max(map(len, options))
    return "\n".join([title] + [f"  {k:<{width}} = {_value(v)}" for k, v in options.items()])


def model_options(name: str) -> dict[str, Any]:
    """The fields of model ``name``'s config dataclass and their defaults."""
    return asdict(config_class(name)())


def mixer_defaults(name: str) -> dict[str, Any] | None:
    """``mixer_options(name)`` with each option's default (None: the mixer takes any keywords)."""
    names = mixer_options(name)
    if names is None:
        return None
    factory = MIXERS.get(name)
    params = inspect.signature(factory.__init__ if isinstance(factory, type) else factory).parameters
    return {k: (None if params[k].default is inspect.Parameter.empty else params[k].default) for k in names}


# What each built-in model and mixer is for (one line); others (plugins) show their docstring's first line.
MODEL_SUMMARIES = {
    "fno1d": "Fourier neural operator on 1-D grids (Burgers); the baseline",
    "fno2d": "Fourier neural operator on 2-D grids (Darcy; node or cell-centred grids)",
    "galerkin1d": "Burgers hybrid of the Galerkin Transformer paper: attention encoder + spectral decoder",
    "galerkin2d": "Darcy hybrid of the paper (reproduces it; not resolution-invariant)",
    "galerkin2d_inverse": "inverse Darcy hybrid of the paper: u -> a on a coarse grid",
    "latent1d": "resolution-invariant 1-D operator: attention on a latent grid fixed in physical space",
    "latent2d": "resolution-invariant Darcy operator: attention on a latent grid fixed in physical space",
    "latent2d_inverse": "resolution-invariant inverse Darcy: u at any resolution -> a on a fixed coarse grid",
    "marching1d": "time marching: causal attention over time steps, u0 -> u(t_1..t_T)",
    "arfno1d": "autoregressive FNO baseline for time marching: u_k -> u_{k+1}",
    "mesh_attention": "attention on meshes (point sets with quadrature weights)",
    "mesh_latent": "resolution-invariant operator on meshes via a latent grid",
    "mesh_fno": "FNO on meshes via interpolation to and from a grid",
}
MIXER_SUMMARIES = {
    "galerkin": "Galerkin-type attention Q (K^T V): linear cost, a Petrov-Galerkin projection",
    "fourier": "Fourier-type attention (Q K^T) V: the kernel on the grid, quadratic cost",
    "softmax": "standard softmax attention (torch SDPA), quadratic cost",
    "linear": "linear attention with elu + 1 features",
    "performer": "Performer FAVOR+ random features, linear cost",
    "cosformer": "cosFormer: ReLU features reweighted by the cosine of coordinate distances",
}


def summary(name: str, table: dict[str, str], obj: Any) -> str:
    """One line saying what ``name`` is for: from ``table``, else the first line of ``obj``'s docstring."""
    if name in table:
        return table[name]
    doc = inspect.getdoc(obj) or ""
    return doc.splitlines()[0] if doc else "(no description)"


def preset_summary(name: str) -> str:
    """The first line of a shipped preset's TOML (a comment saying what it is for)."""
    first = (resources.files("petrov.train.configs") / f"{name}.toml").read_text().splitlines()[0]
    return first.lstrip("# ").strip()


def _table(names: list[str], describe) -> str:
    """``name  what it is for`` lines, names padded to one width."""
    width = max(map(len, names), default=0)
    return "\n".join(f"{n:<{width}}  {describe(n)}" for n in names)


def check_names(names: list[str], registry: Registry) -> None:
    """UsageError for the first of ``names`` that ``registry`` does not hold: the registry's message (the
    registered names, a close match), with the name in other case suggested (``FNO1D`` -> ``fno1d``)."""
    for name in names:
        if name in registry:
            continue
        message = registry.unknown_message(name)
        cased = {known.lower(): known for known in registry.names()}.get(name.lower())
        if cased is not None and f"did you mean {cased!r}" not in message:
            message += f" (did you mean {cased!r}?)"
        raise UsageError(message)


def close_preset(name: str) -> str | None:
    """The shipped preset closest to ``name`` (None: none is close)."""
    close = difflib.get_close_matches(name, preset_names(), n=1)
    return close[0] if close else None


def _lister(what: str, registry: Registry, names: Callable[[], list[str]], summaries: dict[str, str],
            title: Callable[[str, str], str], options: Callable[[str], dict | None], fields: str):
    """The body of ``petrov mixers`` / ``petrov models``: every registered name with what it is for, or the
    named ones (``--options``: all) with their options (``options(name)``, ``fields`` says where a config sets
    them); ``title(name, summary)`` heads a name's block."""

    def run(args: argparse.Namespace) -> int:
        describe = lambda n: summary(n, summaries, registry.get(n))  # noqa: E731
        if not args.names and not args.options:
            print(_table(names(), describe))
            print(f"\npetrov {what} NAME shows a {what[:-1]}'s {fields}")
            return 0
        check_names(args.names, registry)
        print("\n".join(_block(title(n, describe(n)), options(n)) for n in args.names or names()))
        return 0

    return run


_list_mixers = _lister("mixers", MIXERS, list_mixers, MIXER_SUMMARIES, lambda n, s: f"{n} — {s}", mixer_defaults,
                       "options (model.options.mixer_options in a config)")
_list_models = _lister("models", MODELS, list_models, MODEL_SUMMARIES,
                       lambda n, s: f"{n} ({config_class(n).__name__}) — {s}", model_options,
                       "config fields and defaults (model.options in a config)")


def _presets(args: argparse.Namespace) -> int:
    if args.action is None:
        print(_table(preset_names(), preset_summary))
        print("\npetrov presets show NAME prints one's TOML (save, edit, then petrov train FILE.toml)")
        return 0
    if args.action != "show":  # a bare NAME (petrov presets burgers-quick): the action was left out
        word = args.action[:-5] if args.action.endswith(".toml") else args.action
        target = word if word in preset_names() else close_preset(word)
        if args.name is not None or target is None:
            raise UsageError(f"unknown action {args.action!r}: petrov presets lists the presets, "
                             f"petrov presets show NAME prints one")
        raise UsageError(f"petrov presets takes the action show before a preset's name: did you mean "
                         f"`petrov presets show {target}`?")
    if args.name is None:
        raise UsageError("name the preset to show: petrov presets show NAME")
    name = args.name[:-5] if args.name.endswith(".toml") else args.name
    if name not in preset_names():
        close = close_preset(name)
        raise UsageError(f"no shipped preset {args.name!r}; presets: {', '.join(preset_names())}"
                         f"{f' (did you mean {close!r}?)' if close else ''}")
    print((resources.files("petrov.train.configs") / f"{name}.toml").read_text(), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    for what, run, help_, shows in (
            ("mixers", _list_mixers, "list the attention mixers (what each is for; NAME: its options)", "options"),
            ("models", _list_models, "list the models (what each is for; NAME: its config fields)", "config fields")):
        p = add_command(sub, what, run, help=help_)
        p.add_argument("names", nargs="*", metavar="NAME", help=f"show these {what}' {shows} and defaults")
        p.add_argument("--options", action="store_true", help=f"show every {what[:-1]}'s {shows} and defaults")
    p = add_command(sub, "presets", _presets,
                    help="list the shipped training presets (what each is for), or show one's TOML",
                    description="petrov presets: list them; petrov presets show NAME: print the TOML "
                    "(save it, edit it, then petrov train FILE.toml)")
    p.add_argument("action", nargs="?", metavar="show", help="show a preset")
    p.add_argument("name", nargs="?", metavar="NAME", help="the preset to show")
