"""petrov.cli: the ``petrov`` command, one module per command group.

- :mod:`.main`: the parser, exit statuses, error and interrupt handling (``main``);
- :mod:`.usage`: ``UsageError``, a command line that cannot be run as given (exit status 2);
- :mod:`.console`: where log lines and progress bars go;
- :mod:`.data`: ``generate``, ``import``, ``info``;
- :mod:`.training`: ``train``, ``evaluate``;
- :mod:`.inverse`: ``invert``;
- :mod:`.catalog`: ``models``, ``mixers``, ``presets``.
"""
from .main import build_parser, main
from .usage import UsageError

__all__ = ["UsageError", "build_parser", "main"]
