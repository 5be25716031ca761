"""Model cards: what a shipped operator is, how it was made and how well it does, as checked data.

A card is the JSON file ``card.json`` beside the operator's weights; [`card_from_dict`][] reads one into
a [`Card`][] and refuses anything else with one line naming the field: an unknown or missing key, a
wrong type, an error that is not a finite number >= 0, a hash that is not 64 hexadecimal digits, rows
that disagree with the resolutions named, a licence other than the project's. The fields:

- ``name``, ``summary``; ``maps``: ``input``, ``output``, ``domain`` in words and units, the
  resolution (grid points per side, or mesh level) it was ``trained_at`` and those it was
  ``evaluated_at``;
- ``model``: the registered model ``name`` and its number of ``parameters``;
- ``data``: the training ``preset`` whose ``[data]`` table it is, the training file's ``path``, the ``kind``
  it was read as, the
  ``[data.generate]`` table (``generate``: kind, n_samples, resolution, seed, options) with its ``seed``,
  the training file's content ``identity`` (``petrov.datasets.identity.data_identity``), the split
  sizes and the input ``noise`` level;
- ``training``: the ``command`` that reproduces the weights (a ``petrov train`` line), the ``machine``
  and the wall-clock and CPU seconds it took, the epochs, the best epoch and its validation error, the
  date;
- ``evaluation``: the ``command`` that measured the errors, which ``samples``, the ``metric``, and per
  resolution a row of the per-sample errors: ``n``, ``mean``, ``std``, ``median``, ``max`` (the worst);
- ``not_for``: what the operator was not trained for (other coefficients, forcings, viscosities, ...);
- ``license``: ``MIT``, the project's; ``files``: ``best.pt`` and ``config.json`` with their SHA-256 and
  size; ``quick``: made at toy size (``PETROV_QUICK=1``), never shipped.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..common.config import asdict, from_dict
from ..common.shipped import CARD, CONFIG, WEIGHTS, folder

CARD_FORMAT = 1
LICENSE = "MIT"  # the project's licence, which the shipped weights carry
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class Maps:
    input: str
    output: str
    domain: str
    trained_at: int | str  # grid points per side, or a mesh level's name
    evaluated_at: list[int | str]


@dataclass
class ModelFacts:
    name: str
    parameters: int


@dataclass
class DataFacts:
    preset: str
    path: str  # the training file, relative to the working directory of the training command
    kind: str
    generate: dict
    seed: int
    identity: dict
    n_train: int
    n_val: int
    n_test: int
    noise: float = 0.0


@dataclass
class Machine:
    cpu: str
    logical_cpus: int
    torch_threads: int
    device: str
    platform: str
    python: str
    torch: str
    petrov: str


@dataclass
class TrainingFacts:
    command: str
    wall_seconds: float
    cpu_seconds: float
    epochs: int
    best_epoch: int
    best_val_rel_l2: float
    date: str
    machine: Machine


@dataclass
class ErrorRow:
    """The per-sample relative L² errors at one resolution: their count, mean, spread, median and worst."""

    resolution: int | str
    n: int
    mean: float
    std: float
    median: float
    max: float


@dataclass
class EvaluationFacts:
    command: str
    samples: str
    metric: str
    rows: list = field(default_factory=list)  # ErrorRow each, checked by card_from_dict


@dataclass
class FileFacts:
    sha256: str
    bytes: int


@dataclass
class Card:
    card_format: int
    name: str
    summary: str
    maps: Maps
    model: ModelFacts
    data: DataFacts
    training: TrainingFacts
    evaluation: EvaluationFacts
    not_for: list[str]
    license: str
    files: dict  # file name -> FileFacts, checked by card_from_dict
    quick: bool = False

    def row(self, resolution: int | str) -> ErrorRow:
        """The errors at ``resolution`` (KeyError naming those evaluated)."""
        for r in self.evaluation.rows:
            if r.resolution == resolution:
                return r
        raise KeyError(f"card {self.name!r} has no errors at {resolution!r}; evaluated at "
                       f"{', '.join(map(str, self.maps.evaluated_at))}")


def _check_required(cls: type, mapping: Any, where: str) -> None:
    """ValueError naming the first field of dataclass ``cls`` (or of a table in it) that ``mapping`` lacks
    and that has no default."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{where}: expected a table, got {type(mapping).__name__}")
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in mapping:
            if dataclasses.is_dataclass(hints[f.name]):
                _check_required(hints[f.name], mapping[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{where}: missing key {f.name!r}")


def _finite(value: float, where: str) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: expected a finite number >= 0, got {value!r}")


def _check_row(raw: Any, where: str) -> ErrorRow:
    _check_required(ErrorRow, raw, where)
    row = from_dict(ErrorRow, raw, where)
    if row.n < 1:
        raise ValueError(f"{where}.n: expected an integer >= 1, got {row.n}")
    for key in ("mean", "std", "median", "max"):
        _finite(getattr(row, key), f"{where}.{key}")
    if row.median > row.max or row.mean > row.max:
        raise ValueError(f"{where}: the mean ({row.mean:.4g}) and median ({row.median:.4g}) cannot exceed the worst "
                         f"error ({row.max:.4g})")
    return row


def _check_file(name: str, raw: Any, where: str) -> FileFacts:
    _check_required(FileFacts, raw, f"{where}[{name!r}]")
    facts = from_dict(FileFacts, raw, f"{where}[{name!r}]")
    if not SHA256.match(facts.sha256):
        raise ValueError(f"{where}[{name!r}].sha256: expected 64 lowercase hexadecimal digits, got {facts.sha256!r}")
    if facts.bytes < 1:
        raise ValueError(f"{where}[{name!r}].bytes: expected an integer >= 1, got {facts.bytes}")
    return facts


def card_from_dict(raw: Any, where: str = "card") -> Card:
    """A [`Card`][] from its JSON form, every field checked (ValueError: one line naming the field)."""
    _check_required(Card, raw, where)
    version = raw.get("card_format")
    if isinstance(version, int) and not isinstance(version, bool) and version > CARD_FORMAT:
        raise ValueError(f"{where}: card format {version} was written by a newer petrov (this one reads "
                         f"{CARD_FORMAT}); upgrade petrov")
    card = from_dict(Card, raw, where)
    if card.card_format != CARD_FORMAT:
        raise ValueError(f"{where}.card_format: expected {CARD_FORMAT}, got {card.card_format}")
    if not NAME.match(card.name):
        raise ValueError(f"{where}.name: {card.name!r} is not a name (lowercase letters, digits, '.' and '-')")
    if card.license != LICENSE:
        raise ValueError(f"{where}.license: the shipped operators carry the project's licence {LICENSE!r}, "
                         f"got {card.license!r}")
    if not card.not_for or not all(card.not_for):
        raise ValueError(f"{where}.not_for: say what the operator is not for (at least one line)")
    words = card.training.command.split()
    start = ["PETROV_QUICK=1"] * card.quick + ["petrov", "train"]
    if words[:len(start)] != start:
        raise ValueError(f"{where}.training.command: expected `{' '.join(start)} ...`, got {card.training.command!r}")
    for key in ("wall_seconds", "cpu_seconds", "best_val_rel_l2"):
        _finite(getattr(card.training, key), f"{where}.training.{key}")
    card.evaluation.rows = [_check_row(r, f"{where}.evaluation.rows[{i}]") for i, r in enumerate(card.evaluation.rows)]
    resolutions = [r.resolution for r in card.evaluation.rows]
    if not resolutions or resolutions != list(card.maps.evaluated_at):
        raise ValueError(f"{where}.evaluation.rows: one row per resolution of maps.evaluated_at "
                         f"({card.maps.evaluated_at}) expected, got rows at {resolutions}")
    if not isinstance(card.files, Mapping) or set(card.files) != {WEIGHTS, CONFIG}:
        raise ValueError(f"{where}.files: expected the hashes of {WEIGHTS!r} and {CONFIG!r}, got "
                         f"{sorted(card.files) if isinstance(card.files, Mapping) else card.files!r}")
    card.files = {name: _check_file(name, card.files[name], f"{where}.files") for name in (WEIGHTS, CONFIG)}
    return card


def card_to_dict(card: Card) -> dict[str, Any]:
    """The JSON form of ``card`` (what [`card_from_dict`][] reads back)."""
    return asdict(card)


def read_card(path: str | os.PathLike) -> Card:
    """The card in the JSON file ``path``, checked (ValueError: one line saying what is wrong)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"model card {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"model card {str(path)!r} is not readable JSON ({err}); reinstall petrov") from None
    return card_from_dict(raw, f"card {path.parent.name}")


def card(name: str) -> Card:
    """The card of the shipped operator ``name`` (``petrov.common.shipped``: ValueError for an unknown name)."""
    return read_card(folder(name) / CARD)


__all__ = ["CARD_FORMAT", "LICENSE", "Card", "DataFacts", "ErrorRow", "EvaluationFacts", "FileFacts", "Machine",
           "Maps", "ModelFacts", "TrainingFacts", "card", "card_from_dict", "card_to_dict", "read_card"]
