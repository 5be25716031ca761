"""``petrov mixers`` and ``petrov models``: list what is registered."""
from __future__ import annotations

import argparse


def _list_mixers(args: argparse.Namespace) -> int:
    from petrov.operators import list_mixers

    print("\n".join(list_mixers()))
    return 0


def _list_models(args: argparse.Namespace) -> int:
    from petrov.operators import list_models

    print("\n".join(list_models()))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mixers", help="list the registered attention mixers")
    p.set_defaults(func=_list_mixers)
    p = sub.add_parser("models", help="list the registered models")
    p.set_defaults(func=_list_models)
