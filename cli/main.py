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
an error (status 1) before any work.

Output: results are printed on stdout; the library's log lines (epoch lines, notices) go to stdout at
the default level INFO, warnings to stderr (see [`petrov.cli.console`][]). ``petrov -q COMMAND``
shows warnings and errors only, ``petrov -v COMMAND`` adds DEBUG lines.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback

from ..common.disk_space import NoSpace
from ..common.interrupts import Terminated, exit_status, stop_on_signals
from ..common.version import petrov_version
from . import catalog, data, inverse, training
from .console import console_logging, level_for
from .usage import UsageError, attach_negative_values

COMMAND_GROUPS = [catalog, data, training, inverse]


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
    if isinstance(err, OSError) and err.errno and str(err).startswith("[Errno"):
        # a bare operating-system error that no check put into words: say it plainly, without "[Errno N]"
        words = (err.strerror or os.strerror(err.errno)).lower()
        where = f" {err.filename!r}" if err.filename is not None else ""
        return f"cannot use{where}: {words}; check the path and its permissions"
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    return str(text).splitlines()[0] if str(text) else type(err).__name__


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
        with stop_on_signals(), console_logging(level_for(args.verbose, args.quiet)):
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader went away (petrov info FILE | head -1): stop quietly; point stdout at devnull so
        # the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt as err:
        what = "terminated" if isinstance(err, Terminated) else "interrupted"
        hint = getattr(args, "resume_hint", None)
        hint = hint(args) if hint is not None else ""
        print(f"petrov {args.command}: {what}{'; ' + hint if hint else ''}", file=sys.stderr)
        return exit_status(err)
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        else:
            text = _message(err)
            hint = getattr(args, "resume_hint", None)
            hint = hint(args) if isinstance(err, NoSpace) and hint is not None else ""
            if hint and "resume" not in text:  # a full disk: what was done so far is kept
                text = f"{text}; {hint}"
            print(f"petrov {args.command}: error: {text}", file=sys.stderr)
        if isinstance(err, UsageError):
            print(f"run 'petrov {args.command} --help' for usage", file=sys.stderr)
            return 2
        return 1


if __name__ == "__main__":
    sys.exit(main())
