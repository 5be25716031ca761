"""The one error a command raises for a command line it cannot run (``petrov.cli.main`` exits 2 on it),
and the checks of flag values that raise it."""
from __future__ import annotations

import argparse
import re
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class UsageError(ValueError):
    """A command line that parsed but cannot be run as given (exit status 2, like argparse's errors)."""


def flag_name(dest: str) -> str:
    """An option's ``dest`` as the user typed it: ``"n_samples"`` -> ``"--n-samples"``."""
    return "--" + dest.replace("_", "-")


def check_minimums(args: argparse.Namespace, **minimums: int) -> None:
    """UsageError for the first flag (by its ``dest``) whose value is below its minimum; flags left out
    (None) pass: ``check_minimums(args, n_samples=1, workers=0)``."""
    for dest, low in minimums.items():
        value = getattr(args, dest, None)
        if value is not None and value < low:
            raise UsageError(f"{flag_name(dest)} must be an integer >= {low}, got {value}")


def as_usage_error(check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``check(*args, **kwargs)`` (a parser or check of a flag's value), its ValueError raised as a
    UsageError with the same message."""
    try:
        return check(*args, **kwargs)
    except UsageError:
        raise
    except ValueError as err:
        raise UsageError(str(err)) from None


# options whose value may start with "-" followed by a digit or ":" (a negative index, a slice from the
# end): argparse takes such a word after the option for another option ("--shard -1/3": "expected one
# argument"), so it is attached to its option first ("--shard=-1/3") and reaches the option's own check
VALUE_MAY_BE_NEGATIVE = ("--shard", "--indices", "--calibrate")
_NEGATIVE = re.compile(r"^-[\d:.]")


def attach_negative_values(argv: list[str]) -> list[str]:
    """``argv`` with ``OPTION VALUE`` written ``OPTION=VALUE`` for the ``VALUE_MAY_BE_NEGATIVE`` options
    whose value starts with "-" and a digit or ":" (``--indices -2:`` -> ``--indices=-2:``); the rest as given
    (after ``--`` nothing is changed)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            out.extend(argv[i:])
            break
        if word in VALUE_MAY_BE_NEGATIVE and i + 1 < len(argv) and isinstance(argv[i + 1], str) \
                and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{word}={argv[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def add_command(sub: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int], *,
                resume_hint: Callable[[argparse.Namespace], str] | None = None, **parser_options: Any
                ) -> argparse.ArgumentParser:
    """The command ``petrov NAME``: its parser (``parser_options``: ``help``, ``description``, ...), whose
    parsed arguments ``run(args)`` takes (its return value is the exit status); ``resume_hint(args)``: the
    line an interrupted run of it prints (``petrov.cli.main``)."""
    p = sub.add_parser(name, **parser_options)
    p.set_defaults(func=run, **({} if resume_hint is None else {"resume_hint": resume_hint}))
    return p


__all__ = ["UsageError", "add_command", "as_usage_error", "attach_negative_values", "check_minimums", "flag_name"]
