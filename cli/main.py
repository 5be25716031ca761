"""The ``petrov`` command line.

Each command group is a module of this package exposing ``register(subparsers)``, which adds its
parsers and sets ``func`` (called with the parsed args, returning an exit code); ``COMMAND_GROUPS``
lists them in the order ``petrov --help`` shows them.  Adding a command group is one entry here.

Exit status: 0 success; 2 usage error (argparse's, or [`UsageError`][] raised by a command); 1 any
other failure, reported as one line ``petrov COMMAND: error: ...`` on stderr (``petrov --debug ...``
shows the traceback instead; a full disk's line also says how to resume, where a command can); 130 on
Ctrl-C and 143 on SIGTERM, after one line saying so (and how to resume), with the command's locks
removed and its partial files kept (worker processes stay quiet: [`petrov.common.interrupts`][]).
Output cut short by a closed pipe (``petrov info F | head``, ``petrov train ... | head -1``) ends
quietly with the status 141 a SIGPIPE would give; a standard output closed from the start (``>&-``) is
an error (status 1) before any work, and one that cannot be written (``> /dev/full``, a file on a full
disk) is an error naming it and the cause.  An operating-system error that no check put into words is
said with the file it concerns, the cause and advice that fits it ([`petrov.common.os_errors`][]).

Output: results are printed on stdout; the library's log lines (epoch lines, notices) go to stdout at
the default level INFO, warnings to stderr (see [`petrov.cli.console`][]). ``petrov -q COMMAND``
shows warnings and errors only, ``petrov -v COMMAND`` adds DEBUG lines.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import traceback

from ..common.disk_space import NoSpace, errno_of
from ..common.interrupts import Terminated, exit_status, stop_on_signals
from ..common.os_errors import os_error_message
from ..common.version import petrov_version
from . import catalog, data, export, inverse, pretrained, training
from .console import StreamFailed, console_logging, level_for, named_stream_errors
from .usage import UsageError, attach_negative_values

COMMAND_GROUPS = [catalog, data, training, inverse, export, pretrained]


WORKFLOW = """\
the workflow (each step writes files the next one reads):
  1. data      petrov generate burgers --n-samples 700 --resolution 8192 -o data/burgers-8192.h5
               (or petrov import your own arrays; petrov info FILE shows what a file holds;
               on a cluster: one --shard K/N per task, then petrov merge)
  2. train     petrov train burgers-quick --out runs/burgers      (a preset: petrov presets, or a .toml)
  3. evaluate  petrov evaluate runs/burgers --resolutions 256,1024,8192   (test split, any grid)
  4. invert    petrov invert ...  (inverse Darcy: recover the coefficient from observed solutions)

  petrov models / mixers / presets list what each name is for; petrov COMMAND --help for options.
  Exit status: 0 success, 2 usage error, 1 other failure, 130 interrupted, 143 terminated (SIGTERM).
  PETROV_QUICK=1 runs any command at toy size (a check that a workflow runs, not a result)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="petrov", description="Neural operators for PDEs: generate data, train an operator at one "
        "resolution, evaluate it at others, invert.", epilog=WORKFLOW,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"petrov {petrov_version()}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    chatter = parser.add_mutually_exclusive_group()
    chatter.add_argument("-v", "--verbose", action="store_true", help="also show debug messages")
    chatter.add_argument("-q", "--quiet", action="store_true", help="show warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(sub)
    return parser


def _message(err: BaseException) -> str:
    code = errno_of(err)
    bare = isinstance(err, OSError) and err.errno and str(err).startswith("[Errno")
    # h5py's words for one: "[Errno 13] Unable to open file (unable to open file: name = 'x.h5', errno = 13, ..."
    h5 = re.search(r"\bname = '([^']*)'", str(err)) if code and "Unable to" in str(err)[:20] else None
    if bare or h5:  # an operating-system error that no check put into words: the file, the cause, what to do
        path = err.filename if isinstance(err, OSError) and err.filename is not None else h5 and h5.group(1)
        return os_error_message(OSError(code, os.strerror(code)), path or None)
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    return str(text).splitlines()[0] if str(text) else type(err).__name__


def _discard_stdout() -> None:
    """Point the standard output at /dev/null, so that the interpreter's final flush does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _say(line: str) -> None:
    """``line`` on stderr, if stderr can take it (``2> /dev/full``: the exit status says it)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = attach_negative_values(sys.argv[1:] if argv is None else list(argv))  # --shard -1/3 as --shard=-1/3
    args = parser.parse_args(argv)  # usage errors: argparse prints them and exits with 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    if sys.stdout is None:  # started with its standard output closed (petrov info F >&-): nowhere for results
        print(f"petrov {args.command}: error: standard output is closed (`>&-`); send it somewhere instead, "
              f"e.g. `> /dev/null` to discard it or `> petrov.log` to keep it", file=sys.stderr)
        return 1
    try:
        with stop_on_signals(), named_stream_errors(), console_logging(level_for(args.verbose, args.quiet)):
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader went away (petrov info FILE | head -1): stop quietly
        _discard_stdout()
        return 141
    except KeyboardInterrupt as err:
        what = "terminated" if isinstance(err, Terminated) else "interrupted"
        hint = getattr(args, "resume_hint", None)
        hint = hint(args) if hint is not None else ""
        _say(f"petrov {args.command}: {what}{'; ' + hint if hint else ''}")
        return exit_status(err)
    except Exception as err:
        if isinstance(err, StreamFailed) and err.stream == "standard output":
            _discard_stdout()
        if args.debug:
            with contextlib.suppress(OSError, ValueError):
                traceback.print_exc()
        else:
            text = _message(err)
            hint = getattr(args, "resume_hint", None)
            hint = hint(args) if isinstance(err, NoSpace) and hint is not None else ""
            if hint and "resume" not in text:  # a full disk: what was done so far is kept
                text = f"{text}; {hint}"
            _say(f"petrov {args.command}: error: {text}")
        if isinstance(err, UsageError):
            _say(f"run 'petrov {args.command} --help' for usage")
            return 2
        return 1


if __name__ == "__main__":
    sys.exit(main())
