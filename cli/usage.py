"""The one error a command raises for a command line it cannot run (``petrov.cli.main`` exits 2 on it)."""


class UsageError(ValueError):
    """A command line that parsed but cannot be run as given (exit status 2, like argparse's errors)."""
