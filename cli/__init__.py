"""petrov.cli: the ``petrov`` command, one module per command group.

- [`main`][]: the parser, exit statuses, error and interrupt handling (``main``);
- [`usage`][]: ``UsageError``, a command line that cannot be run as given (exit status 2);
- [`console`][]: where log lines and progress bars go;
- [`data`][]: ``generate``, ``import``, ``info``;
- [`training`][]: ``train``, ``evaluate``;
- [`inverse`][]: ``invert``;
- [`catalog`][]: ``models``, ``mixers``, ``presets``.
"""
from .main import build_parser, main
from .usage import UsageError

__all__ = ["UsageError", "build_parser", "main"]
