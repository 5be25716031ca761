"""petrov: neural operators for PDEs in PyTorch, built around softmax-free attention read as a
Petrov–Galerkin projection.

The package holds one room per concept:

- :mod:`petrov.operators`: attention (layer, normalizations, mixers), spectral layers, blocks,
  grid transfers and the operator models (registered by name);
- :mod:`petrov.datasets`: PDE solvers and data recipes, dataset files, loading, importing, normalizers;
- :mod:`petrov.train`: configs, the training loop, checkpoints, the trained operator;
- :mod:`petrov.evaluate`: trained operators at several resolutions, tables and figures;
- :mod:`petrov.inverse`: coefficient identification from observed solutions;
- :mod:`petrov.cli`: the ``petrov`` command (``python -m petrov``);
- :mod:`petrov.common`: registries, strict configs, atomic files, progress bars, versions.

petrov logs through :mod:`logging` (one logger per module, ``petrov.<package>.<module>``); the
``NullHandler`` below keeps the library quiet until an application configures logging (the
``petrov`` command does, see :mod:`petrov.cli.console`).
"""
import logging
from pkgutil import extend_path

# Run from a source checkout, ``petrov/`` beside the other top-level folders would hide the installed
# package's subpackages (they live in other folders of the checkout): extend the search path to every
# ``petrov`` directory on sys.path, as a namespace package would.
__path__ = extend_path(__path__, __name__)

from petrov.common import moved as _moved  # noqa: E402
from petrov.common.version import petrov_version  # noqa: E402

__version__ = petrov_version()

logging.getLogger("petrov").addHandler(logging.NullHandler())
_moved.install()

__all__ = ["__version__"]
