"""What the ``petrov`` command (and the example scripts) show on the terminal: logging set-up.

The library logs (``logging.getLogger(__name__)`` in each module, quiet by default); an application
turns the messages on. [`console_logging`][] does it for the command line, for the duration of one
command:

- INFO lines (epoch lines, "generating N samples", saved-file notices) go to stdout as the bare
  message, where the command's results are printed too; DEBUG lines (``-v``) go there as well,
  prefixed ``debug: <logger>:``;
- WARNING and above go to stderr, prefixed ``warning:`` / ``error:``, and so do Python warnings
  (``warnings.warn``) while the command runs;
- every line is written through ``tqdm.write``, so a progress bar being drawn is cleared and redrawn
  around it instead of being torn.

Only the ``petrov`` logger is configured: third-party loggers (matplotlib, torch) keep their own
levels whatever ``-v`` says.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from typing import Iterator

from tqdm.auto import tqdm

LEVELS = {"quiet": logging.WARNING, "normal": logging.INFO, "verbose": logging.DEBUG}


class TqdmStreamHandler(logging.StreamHandler):
    """A stream handler that writes through ``tqdm.write`` (running bars stay intact)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
            self.flush()
        except (RecursionError, BrokenPipeError):  # a closed pipe ends the command (exit 141), quietly
            raise
        except Exception:
            self.handleError(record)


class ConsoleFormatter(logging.Formatter):
    """INFO as the bare message (no timestamp: it reads like ordinary output); other levels say
    which they are, DEBUG also which logger."""

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        if record.levelno == logging.INFO:
            return message
        if record.levelno < logging.INFO:
            return f"debug: {record.name}: {message}"
        return f"{record.levelname.lower()}: {message}"


def level_for(verbose: bool = False, quiet: bool = False) -> int:
    """``-v`` -> DEBUG, ``-q`` -> WARNING, neither -> INFO."""
    if verbose and quiet:
        raise ValueError("choose one of verbose (-v) and quiet (-q)")
    return LEVELS["verbose" if verbose else "quiet" if quiet else "normal"]


@contextlib.contextmanager
def console_logging(level: int = logging.INFO, logger: str = "petrov") -> Iterator[logging.Logger]:
    """Show ``logger``'s records at ``level`` and above on the terminal while the block runs (INFO
    and DEBUG on stdout, WARNING and above on stderr); the logger's previous level, handlers and
    propagation are restored afterwards, so a library caller's own set-up is left as it was."""
    log = logging.getLogger(logger)
    out = TqdmStreamHandler(sys.stdout)
    out.addFilter(lambda record: record.levelno < logging.WARNING)
    err = TqdmStreamHandler(sys.stderr)
    err.setLevel(logging.WARNING)
    saved = log.level, log.propagate
    for handler in (out, err):
        handler.setFormatter(ConsoleFormatter())
        log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False  # a root handler set by the caller would print every line twice
    shown = warnings.showwarning
    # Python warnings (warnings.warn in the library) as one "warning: ..." line, not file:line + source
    warnings.showwarning = lambda message, *_, **__: log.warning("%s", message)
    try:
        yield log
    finally:
        warnings.showwarning = shown
        for handler in (out, err):
            log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


__all__ = ["ConsoleFormatter", "TqdmStreamHandler", "console_logging", "level_for"]
