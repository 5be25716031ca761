"""The operators shipped inside petrov, found by name: ``pretrained:NAME`` -> the folder that holds one.

    petrov/pretrained/NAME/best.pt       # the run's best checkpoint (weights and normalisers, weights-only)
    petrov/pretrained/NAME/config.json   # the run's config (how its data are read, its resolutions)
    petrov/pretrained/NAME/card.json     # its model card (petrov.pretrained.cards), with both files' SHA-256

Such a folder is a run directory as ``petrov train`` writes it, less the training state, so whatever
takes a run directory takes it. [`resolve_source`][] is the one place where the prefix becomes that
folder: ``petrov.train.load_operator``, ``petrov.evaluate`` (``load_run``) and ``petrov.inverse.invert``
call it on the source they are given (``petrov.pretrained.resolve_source`` is this function). It checks
both files against the SHA-256 their card records first: an unknown name, a missing or damaged file, or
a card whose hashes do not match is one line saying so. Nothing is downloaded: the files are part of
the installed package. It lives here, below ``train``, so that every layer that loads runs can use it;
``petrov.pretrained`` (cards, ``load``, the build) sits above them.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .version import petrov_version

PREFIX = "pretrained:"
WEIGHTS, CONFIG, CARD = "best.pt", "config.json", "card.json"
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "pretrained"  # the package petrov.pretrained's folder


def names() -> list[str]:
    """The shipped operators' names, sorted (empty until weights are built: ``make pretrained``)."""
    if not SHIPPED_DIR.is_dir():
        return []
    return sorted(p.name for p in SHIPPED_DIR.iterdir() if (p / CARD).is_file())


def none_shipped() -> str:
    """The line that says the registry is empty."""
    return (f"petrov {petrov_version()} ships no pretrained operators yet (`make pretrained` in a source checkout "
            f"builds them)")


def folder(name: str) -> Path:
    """The folder of the shipped operator ``name`` (ValueError naming the shipped ones otherwise)."""
    shipped = names()
    if name in shipped:
        return SHIPPED_DIR / name
    if not shipped:
        raise ValueError(f"no shipped operator {name!r}: {none_shipped()}")
    close = difflib.get_close_matches(name, shipped, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"no shipped operator {name!r}{hint}; shipped: {', '.join(shipped)} "
                     f"(petrov pretrained lists them)")


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 of the file ``path`` (hexadecimal)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recorded_hashes(where: Path) -> dict[str, str]:
    """``{file name: SHA-256}`` of the weights and config as the card in ``where`` records them."""
    path = where / CARD
    try:
        files = json.loads(path.read_text())["files"]
        return {name: str(files[name]["sha256"]) for name in (WEIGHTS, CONFIG)}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"the model card {path} is damaged (it records no SHA-256 of {WEIGHTS} and {CONFIG}: "
                         f"{type(err).__name__} {err}); reinstall petrov") from None


def check_files(where: Path) -> None:
    """ValueError (FileNotFoundError) unless the weights and config in ``where`` have their card's SHA-256."""
    for name, recorded in recorded_hashes(where).items():
        path = where / name
        if not path.is_file():
            raise FileNotFoundError(f"the shipped operator {where.name!r} has no {name} ({path}); reinstall petrov")
        got = sha256_file(path)
        if got != recorded:
            what = "weights" if name == WEIGHTS else name
            raise ValueError(f"the shipped {what} of {where.name!r} ({path}) do not match their card (SHA-256 "
                             f"{got[:12]}..., the card says {recorded[:12]}...): the file is damaged or was "
                             f"replaced; reinstall petrov")


def shipped_name(source: Any) -> str | None:
    """``NAME`` for a source written ``pretrained:NAME`` (a str or path), else None."""
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if isinstance(text, str) and text.startswith(PREFIX):
            return text[len(PREFIX):]
    return None


def resolve_source(source: Any) -> Any:
    """``pretrained:NAME`` -> the folder of that shipped operator (a run directory: ``best.pt``,
    ``config.json``), once both files match their card's SHA-256; any other source is returned as it is.

    Code that takes a run directory (or a checkpoint, or an operator) calls it on what it was given,
    before anything else."""
    name = shipped_name(source)
    if name is None:
        return source
    where = folder(name)
    check_files(where)
    return where


__all__ = ["CARD", "CONFIG", "PREFIX", "SHIPPED_DIR", "WEIGHTS", "check_files", "folder", "names", "none_shipped",
           "recorded_hashes", "resolve_source", "sha256_file", "shipped_name"]
