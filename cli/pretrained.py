"""``petrov pretrained``: the operators shipped inside petrov, and their model cards.

    petrov pretrained                   # each shipped operator with what it is and its test errors
    petrov pretrained show NAME         # its card (Markdown): maps, data, command, machine, errors, limits
    petrov pretrained show NAME --json  # the card as it is stored

A shipped operator is used as ``pretrained:NAME`` wherever a run directory is taken (``petrov evaluate
pretrained:NAME``, ``petrov invert ... --inverse-run pretrained:NAME``); see [`petrov.pretrained`][].
"""
from __future__ import annotations

import argparse
import difflib
import json

from ..common.shipped import names, none_shipped
from ..pretrained import card, card_markdown, card_to_dict, summary_line
from .usage import UsageError, add_command


def _unknown(name: str) -> UsageError:
    shipped = names()
    if not shipped:
        return UsageError(f"no shipped operator {name!r}: {none_shipped()}")
    close = difflib.get_close_matches(name, shipped, n=1)
    return UsageError(f"no shipped operator {name!r}; shipped: {', '.join(shipped)}"
                      f"{f' (did you mean {close[0]!r}?)' if close else ''}")


def _run(args: argparse.Namespace) -> int:
    if args.action is None:
        shipped = names()
        if not shipped:
            print(none_shipped())
            return 0
        width = max(map(len, shipped))
        print("\n".join(f"{n:<{width}}  {summary_line(card(n))}" for n in shipped))
        print("\npetrov pretrained show NAME prints a card; pretrained:NAME stands for a run directory "
              "(petrov evaluate, petrov invert --inverse-run)")
        return 0
    if args.action != "show":  # a bare NAME: the action was left out
        if args.action in names() and args.name is None:
            raise UsageError(f"petrov pretrained takes the action show before a name: did you mean "
                             f"`petrov pretrained show {args.action}`?")
        raise UsageError(f"unknown action {args.action!r}: petrov pretrained lists the operators, "
                         f"petrov pretrained show NAME prints a card")
    if args.name is None:
        raise UsageError("name the operator to show: petrov pretrained show NAME")
    if args.name not in names():
        raise _unknown(args.name)
    shown = card(args.name)
    print(json.dumps(card_to_dict(shown), indent=2) if args.json else card_markdown(shown, level=1))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "pretrained", _run, help="list the operators shipped with petrov, or show one's model card",
                    description="petrov pretrained: list the shipped operators; petrov pretrained show NAME: its "
                    "model card. Use one as pretrained:NAME wherever a run directory is taken.")
    p.add_argument("action", nargs="?", metavar="show", help="show an operator's card")
    p.add_argument("name", nargs="?", metavar="NAME", help="the operator to show")
    p.add_argument("--json", action="store_true", help="the card as stored (JSON), not as text")
