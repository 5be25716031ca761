"""mkdocs hook: the page of the shipped operators, written when the site is built from their model cards
(petrov/pretrained/NAME/card.json, checked as the package reads them): every figure on it is a card's."""
from __future__ import annotations

from mkdocs.structure.files import File

import petrov.pretrained as pretrained


def on_files(files, config):
    page = pretrained.cards_page(pretrained.cards(), pretrained.none_shipped())
    files.append(File.generated(config, "pretrained.md", content=page))
    return files
