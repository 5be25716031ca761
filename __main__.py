"""``python -m petrov ...``: the ``petrov`` command (also what ``torchrun -m petrov`` starts, and what the
installed ``petrov`` console script calls: ``[project.scripts]`` in pyproject.toml).

[`main`][] imports the command line (and with it torch, seconds on a busy machine) only when called, so
that a Ctrl-C during that start-up ends with one line and the status 130, not an import traceback; once
the command runs, ``petrov.cli.main`` handles Ctrl-C and SIGTERM itself.
"""
import sys


def main(argv: "list[str] | None" = None) -> int:
    """Run the ``petrov`` command (``argv``: the arguments, default ``sys.argv[1:]``); its exit status."""
    try:
        from .cli.main import main as run_command

        return run_command(argv)
    except KeyboardInterrupt as err:  # before (or after) the command's own handler: the imports, the parsing
        terminated = type(err).__name__ == "Terminated"  # SIGTERM, as petrov.common.interrupts raises it
        print(f"petrov: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130


if __name__ == "__main__":  # importing the module (e.g. to document the package) runs nothing
    sys.exit(main())
