"""``petrov mixers``, ``petrov models`` and ``petrov presets``: what is registered or shipped, with options.

    petrov models [NAME ...]       # each model's config fields and defaults (model.options in a config)
    petrov mixers [NAME ...]       # each mixer's options and defaults (model.options.mixer_options)
    petrov presets                 # the shipped training presets
    petrov presets show NAME       # a preset's TOML, to copy and edit

Models and mixers of other installed packages (entry points ``petrov.models`` / ``petrov.mixers``)
are listed too.
"""
from __future__ import annotations

import argparse
import inspect
import json
from importlib import resources
from typing import Any

from petrov.common.config import asdict
from petrov.operators import list_mixers, list_models
from petrov.operators.attention.mixers import MIXERS, mixer_options
from petrov.operators.models import config_class

from petrov.train.config import preset_names

from .main import UsageError


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


def _list_mixers(args: argparse.Namespace) -> int:
    names = args.names or list_mixers()
    print("\n".join(_block(n, mixer_defaults(n)) for n in names))
    return 0


def _list_models(args: argparse.Namespace) -> int:
    names = args.names or list_models()
    print("\n".join(_block(f"{n} ({config_class(n).__name__})", model_options(n)) for n in names))
    return 0


def _presets(args: argparse.Namespace) -> int:
    if args.action is None:
        print("\n".join(preset_names()))
        return 0
    if args.name is None:
        raise UsageError("name the preset to show: petrov presets show NAME")
    name = args.name[:-5] if args.name.endswith(".toml") else args.name
    if name not in preset_names():
        raise FileNotFoundError(f"no shipped preset {args.name!r}; presets: {', '.join(preset_names())}")
    print((resources.files("petrov.train.configs") / f"{name}.toml").read_text(), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mixers", help="list the attention mixers with their options and defaults")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these mixers")
    p.set_defaults(func=_list_mixers)
    p = sub.add_parser("models", help="list the models with their config options and defaults")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these models")
    p.set_defaults(func=_list_models)
    p = sub.add_parser("presets", help="list the shipped training presets, or show one's TOML",
                       description="petrov presets: list them; petrov presets show NAME: print the TOML "
                       "(save it, edit it, then petrov train FILE.toml)")
    p.add_argument("action", nargs="?", choices=["show"], help="show a preset")
    p.add_argument("name", nargs="?", metavar="NAME", help="the preset to show")
    p.set_defaults(func=_presets)
