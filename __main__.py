"""``python -m petrov ...``: the ``petrov`` command (also what ``torchrun -m petrov`` starts)."""
import sys

from .cli import main

if __name__ == "__main__":  # importing the module (e.g. to document the package) runs nothing
    sys.exit(main())
