"""The ``petrov`` command line.

Subcommands live next to the code they drive; each module in ``COMMAND_MODULES`` exposes
``register(subparsers)``, which adds its parsers and sets ``func`` (called with the parsed args,
returning an exit code).  Adding a subcommand is one entry here.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from importlib import metadata

COMMAND_MODULES = [
    "petrov.train.commands_registry",
    "petrov.datasets.commands",
    "petrov.train.commands",
    "petrov.train.evaluate",
    "petrov.train.inverse.commands",
]


def _version() -> str:
    try:
        return metadata.version("petrov")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="petrov", description="Neural operators for PDEs: data, training, evaluation."
    )
    parser.add_argument("--version", action="version", version=f"petrov {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # subcommand module not written yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (ValueError, KeyError, FileNotFoundError, FileExistsError, RuntimeError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"petrov {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
