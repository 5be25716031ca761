"""petrov.cli: the ``petrov`` command, one module per command group.

- :mod:`.main`: the parser, exit statuses, error and interrupt handling (``main``);
- :mod:`.console`: where log lines and progress bars go;
- :mod:`.data`: ``generate``, ``import``, ``info``;
- :mod:`.training`: ``train``, ``evaluate``;
- :mod:`.inverse`: ``invert``;
- :mod:`.catalog`: ``models``, ``mixers``, ``presets``.
"""
from .main import UsageError, build_parser, main

__all__ = ["UsageError", "build_parser", "main"]
