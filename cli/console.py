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

A write to the standard output or error that fails (``> /dev/full``, a redirection into a file on a
full disk, a terminal that went away) ends the command with one line naming the stream, the file it
goes to and the cause: [`named_stream_errors`][] turns such an ``OSError`` into a [`StreamFailed`][]
while the command runs, log lines included (a closed pipe stays a ``BrokenPipeError``: the reader is
gone, nothing is wrong).
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import Any, Iterator

from tqdm.auto import tqdm

from ..common.os_errors import display_path, stream_message

LEVELS = {"quiet": logging.WARNING, "normal": logging.INFO, "verbose": logging.DEBUG}


class StreamFailed(OSError):
    """A write to the standard output or error failed; the message names the stream (``stream``: "standard
    output" or "standard error"), the file it goes to and the cause (``errno``)."""

    def __init__(self, message: str, code: int | None, stream: str):
        super().__init__(message)
        self.errno = code
        self.stream = stream


def stream_target(stream: Any) -> str | None:
    """The file a standard stream goes to (relative to the working folder when inside it), None for a pipe, a
    socket or a stream without a descriptor (a test's capture)."""
    try:
        target = os.readlink(f"/proc/self/fd/{stream.fileno()}")
    except (OSError, ValueError, AttributeError):
        return None
    return display_path(target) if target.startswith("/") else None  # not pipe:[123], socket:[456]


class _Named:
    """A standard stream whose failed writes name it (see [`StreamFailed`][]); everything else is the stream's."""

    def __init__(self, stream: Any, name: str):
        self._stream, self._name = stream, name

    @contextlib.contextmanager
    def _naming(self) -> Iterator[None]:
        try:
            yield
        except (BrokenPipeError, StreamFailed):  # a closed pipe ends the command (exit 141), quietly
            raise
        except OSError as err:
            raise StreamFailed(stream_message(err, self._name, stream_target(self._stream)), err.errno,
                               self._name) from None

    def write(self, text: str) -> int:
        with self._naming():
            return self._stream.write(text)

    def writelines(self, lines) -> None:
        with self._naming():
            self._stream.writelines(lines)

    def flush(self) -> None:
        with self._naming():
            self._stream.flush()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._stream, attr)


@contextlib.contextmanager
def named_stream_errors() -> Iterator[None]:
    """While the block runs, a failed write to ``sys.stdout`` or ``sys.stderr`` (a print, a log line, a
    flush) raises [`StreamFailed`][] naming the stream and the cause; the streams are restored afterwards."""
    saved = sys.stdout, sys.stderr
    if sys.stdout is not None:
        sys.stdout = _Named(sys.stdout, "standard output")
    if sys.stderr is not None:
        sys.stderr = _Named(sys.stderr, "standard error")
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class TqdmStreamHandler(logging.StreamHandler):
    """A stream handler that writes through ``tqdm.write`` (running bars stay intact).  A line that cannot
    be written ends the command (an ``OSError``: a closed pipe, [`StreamFailed`][]) instead of printing
    logging's own traceback and going on."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=self.stream)
            self.flush()
        except (RecursionError, OSError):
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


__all__ = ["ConsoleFormatter", "StreamFailed", "TqdmStreamHandler", "console_logging", "level_for",
           "named_stream_errors", "stream_target"]
