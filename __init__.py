"""petrov: neural operators for PDEs in PyTorch, built around softmax-free attention read as a
Petrov–Galerkin projection.

The repository's root folder is this package: each top-level folder is a subpackage of the same name
(``operators/`` is [`petrov.operators`][]), and every import inside the package is relative, so it
resolves in the source tree as it does once installed. One room per concept:

- [`petrov.operators`][]: attention (layer, normalizations, mixers), spectral layers, blocks,
  grid transfers and the operator models (registered by name);
- [`petrov.datasets`][]: PDE solvers and data recipes, dataset files, loading, importing, normalizers;
- [`petrov.train`][]: configs, the training loop, checkpoints, the trained operator;
- [`petrov.evaluate`][]: trained operators at several resolutions, tables and figures;
- [`petrov.inverse`][]: coefficient identification from observed solutions;
- [`petrov.cli`][]: the ``petrov`` command (``python -m petrov``);
- [`petrov.common`][]: registries, strict configs, atomic files, progress bars, versions.

petrov logs through ``logging`` (one logger per module, ``petrov.<package>.<module>``); the
``NullHandler`` below keeps the library quiet until an application configures logging (the
``petrov`` command does, see [`petrov.cli.console`][]).
"""
import logging

from .common.version import petrov_version

__version__ = petrov_version()

logging.getLogger("petrov").addHandler(logging.NullHandler())

__all__ = ["__version__"]
