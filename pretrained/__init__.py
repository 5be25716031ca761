"""petrov.pretrained: operators trained by petrov's own commands, shipped inside the package, with model cards.

    petrov pretrained                     # the shipped operators, one line each
    petrov pretrained show NAME           # a card: what it maps, data, command, machine, errors, limits
    petrov evaluate pretrained:NAME --data FILE.h5
    petrov invert FILE.h5 --method refined --inverse-run pretrained:NAME ...

    import petrov.pretrained
    op = petrov.pretrained.load("darcy-85")          # a NormalizedOperator: raw units in and out

Each operator is a folder ``NAME/`` of this package holding the run's ``best.pt`` (read with
``weights_only=True``), its ``config.json`` and its card ``card.json``: a run directory, so
``pretrained:NAME`` stands for one wherever petrov takes a run directory. ``resolve_source`` is the one
function that turns the prefix into that folder, once the files match their card's SHA-256
([`petrov.common.shipped.resolve_source`][], below ``train``, so that ``train``, ``evaluate`` and
``inverse`` call it on the sources they are given).

- [`cards`][]: the card's fields and their checks (``card_from_dict``), ``card(NAME)``;
- [`card_text`][]: a card in words (``petrov pretrained show``, the documentation's page);
- [`recipes`][], [`build`][]: what ships and how it is made (``make pretrained``).
"""
from __future__ import annotations

import os
from typing import Any

from ..common.shipped import PREFIX, folder, names, none_shipped, resolve_source, shipped_name
from ..train.checkpoint import load_operator
from .card_text import card_markdown, cards_page, summary_line
from .cards import Card, card, card_from_dict, card_to_dict


def load(name: str, map_location: Any = "cpu"):
    """The shipped operator ``name`` (or ``"pretrained:NAME"``) in eval mode: a
    [`NormalizedOperator`][petrov.train.operator.NormalizedOperator], raw units in and out, at any
    resolution it was evaluated at (its card: [`card`][petrov.pretrained.cards.card])."""
    return load_operator(name if shipped_name(name) is not None else PREFIX + os.fspath(name), map_location)


def cards() -> list[Card]:
    """The cards of every shipped operator, by name."""
    return [card(n) for n in names()]


__all__ = ["PREFIX", "Card", "card", "card_from_dict", "card_markdown", "card_to_dict", "cards", "cards_page", "folder",
           "load", "names", "none_shipped", "resolve_source", "shipped_name", "summary_line"]
